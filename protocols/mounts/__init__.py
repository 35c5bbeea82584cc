"""The mount family: copies through a mounted share (sshfs, mount -t cifs, mount_smbfs, mount_afp).

Part of workbench.protocols: the same imports are allowed (workbench.shared and the rest of protocols).
"""
