"""Stock servers, configured as their users run them, with nothing of workbench on the far side.

`workbench run URL` measures servers workbench did not start: a NAS's Samba, a Mac's File Sharing, any
OpenSSH, FTP, rsync or WebDAV server. To check that it works, and to replay it in the lab, these modules
start the same kinds of server plainly: OpenSSH's sshd with its own sftp-server and no gate, Samba with a
plain share, pyftpdlib as its own program (also with explicit TLS), an rsync daemon with a module and
WsgiDAV. Each is a ManagedServer (private config and state, its own process group, optionally inside the
lab's server namespace) whose `url()` is what a user would type. They are not hardened like the servers
of `workbench servers up`: they stand in for a stranger's server, not for workbench's own.
"""
