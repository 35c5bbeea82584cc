"""The mount family: copies through a mounted share (sshfs, mount -t cifs, mount_smbfs, mount_afp)."""
