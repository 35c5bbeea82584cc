"""The ForceCommand gate of workbench's sshd: one SSH session may run only SFTP or `rsync --server`,
confined by Landlock to the served root.

Run by sshd as a plain script (`python -S -I sshgate.py gate.json`) at the start of every session, so
it imports only the standard library: a package import here would add ~0.2 s to every session.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

RRSYNC = "/usr/bin/rrsync"

# --- Landlock (linux/landlock.h): the gate's sandbox --------------------------------------------

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_PR_SET_NO_NEW_PRIVS = 38
_RULE_PATH_BENEATH = 1
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_TRUNCATE, _IOCTL_DEV = 1 << 14, 1 << 15
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when unsupported."""
    if sys.platform != "linux":
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(version), 0)


def _handled_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if abi >= 2:
        rights |= 1 << 13  # REFER
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def confine(read_write: list[str], read_exec: list[str]) -> None:
    """Restrict this process and what it execs to the given trees (Landlock); raise OSError if impossible."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError("Landlock is not available in this kernel")
    handled = _handled_rights(abi)
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    attr = ctypes.c_uint64(handled)
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(8), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for paths, rights in ((read_write, handled), (read_exec, _EXECUTE | _READ_FILE | _READ_DIR)):
            for path in paths:
                _add_rule(libc, int(ruleset), path, rights & handled)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(NO_NEW_PRIVS) failed")
        if libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS  # the kernel rejects directory rights on a file
        rule = _PathBeneath(rights, fd)
        if libc.syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule), 0):
            raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(fd)


# --- The ForceCommand gate ------------------------------------------------------------------------

_SYSTEM_CODE = ["/usr", "/lib", "/lib64", "/bin", "/sbin"]


def _refuse(message: str) -> int:
    sys.stderr.write(f"workbench: {message}\n")
    return 1


def gate(config_path: str) -> int:
    """Run the one thing a workbench SSH session may run, confined to the served root."""
    with open(config_path) as fh:
        config = json.load(fh)
    root = config["root"]
    command = os.environ.get("SSH_ORIGINAL_COMMAND", "")
    words = command.split()
    if not words:
        return _refuse("interactive shells are disabled; only sftp and rsync are served")
    if words[0] in ("internal-sftp", "sftp-server") or words[0].endswith("/sftp-server"):
        os.chdir(root)
        confine([root, "/dev/null"], config["sftp_files"])
        os.execv(config["sftp_server"], [config["sftp_server"], "-d", root])
    if words[0] == "rsync" and words[1:2] == ["--server"]:
        os.chdir(root)
        # rrsync (python3) and rsync need system code; rrsync keeps rsync's paths inside root.
        confine([root, "/dev/null"], [p for p in _SYSTEM_CODE if os.path.exists(p)])
        os.execv(RRSYNC, [RRSYNC, "-munge", "-no-lock", root])
    return _refuse(f"command refused: {words[0]!r}; only sftp and rsync are served")


if __name__ == "__main__":
    sys.exit(gate(sys.argv[1]))
