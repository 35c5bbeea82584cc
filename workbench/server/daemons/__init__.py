"""Supervision of the real servers workbench tests against: private config and state, no system files.

`workbench servers up/status/down`: sshd with its SSH gate (sshgate.py, the ForceCommand that confines a
session), smbd, the rsync daemon and `workbench serve` itself (serve_process.py), under supervisor.py.
Part of workbench.server: the same imports are allowed (shared, fixtures, probe, the rest of server).
"""
