"""The ForceCommand gate of workbench's sshd: one SSH session may run only SFTP, `rsync --server` or the
legacy scp protocol's `scp -t`/`scp -f`, confined by Landlock to the served root and by a seccomp filter
against setuid/setgid files.

Threat model: the authenticated client is hostile, and the session runs as the account that runs
the servers (often root). Beneath the root it may read, write, create regular files and directories,
remove, rename and hard-link within the root; it may not create device nodes, FIFOs, sockets or
symlinks (Landlock handles those rights and grants none of them), may not hard-link or rename a file
in from outside the root (REFER is granted only beneath the root), and may not create or chmod a
file or directory to setuid/setgid, make any node with mknod, or set extended attributes such as
security.capability (seccomp: Landlock does not govern chmod or xattrs).

Run by sshd as a plain script (`python -S -I sshgate.py gate.json`) at the start of every session, so
it imports only the standard library: a package import here would add ~0.2 s to every session.
"""

from __future__ import annotations

import ctypes
import json
import os
import struct
import sys

RRSYNC = "/usr/bin/rrsync"

# --- Landlock (linux/landlock.h): the gate's sandbox --------------------------------------------

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_PR_SET_NO_NEW_PRIVS = 38
_RULE_PATH_BENEATH = 1
# Access rights, bit numbers as in linux/landlock.h (ABI 1: 0..12, ABI 2: REFER, 3: TRUNCATE, 5: IOCTL_DEV).
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_MAKE_CHAR, _MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = 1 << 6, 1 << 9, 1 << 10, 1 << 11, 1 << 12
_TRUNCATE, _IOCTL_DEV = 1 << 14, 1 << 15
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
# Handled (so denied) but granted nowhere: a device node would expose a disk through every protocol, a
# FIFO blocks a server that opens it, and a symlink may lead out of the root for a server that follows it.
NEVER_GRANTED = _MAKE_CHAR | _MAKE_BLOCK | _MAKE_FIFO | _MAKE_SOCK | _MAKE_SYM


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
    """Restrict this process and what it execs to the given trees, with no setuid/setgid files, device
    nodes, FIFOs, sockets or symlinks (Landlock and seccomp); raise OSError if impossible."""
    restrict_paths(read_write, read_exec)
    forbid_setid_files()


def restrict_paths(read_write: list[str], read_exec: list[str]) -> None:
    """The Landlock half of `confine`: what may be opened, created, removed or linked, and where."""
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
        # REFER (link/rename between directories) only beneath read_write: nothing from outside comes in.
        for paths, rights in ((read_write, handled & ~NEVER_GRANTED), (read_exec, _EXECUTE | _READ_FILE | _READ_DIR)):
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


# --- seccomp: no setuid/setgid files, no mknod, no xattrs -----------------------------------------

_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_RET_ALLOW, _RET_ERRNO, _RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
_EPERM, _ENOSYS, _EOPNOTSUPP = 1, 38, 95
_AUDIT_ARCH_X86_64, _AUDIT_ARCH_AARCH64 = 0xC000003E, 0xC00000B7
_X32_SYSCALL_BIT = 0x40000000
_SETID_BITS = 0o6000  # S_ISUID | S_ISGID
_CREATING = 0o100 | 0o20000000  # O_CREAT | __O_TMPFILE (same values on x86_64 and aarch64): mode is used

# What each checked syscall gets: ("mode", i) = EPERM when args[i] has setid bits; ("open", f, m) = the
# same for args[m] when args[f] creates; an int = that errno always. aarch64 has only the *at forms.
_Check = tuple[str, int] | tuple[str, int, int] | int
_CHECKS_BY_ARCH: dict[int, dict[int, _Check]] = {
    _AUDIT_ARCH_X86_64: {
        90: ("mode", 1),  # chmod(path, mode)
        91: ("mode", 1),  # fchmod(fd, mode)
        268: ("mode", 2),  # fchmodat(dirfd, path, mode)
        452: ("mode", 2),  # fchmodat2(dirfd, path, mode, flags)
        83: ("mode", 1),  # mkdir(path, mode)
        258: ("mode", 2),  # mkdirat(dirfd, path, mode)
        85: ("mode", 1),  # creat(path, mode)
        2: ("open", 1, 2),  # open(path, flags, mode)
        257: ("open", 2, 3),  # openat(dirfd, path, flags, mode)
        437: _ENOSYS,  # openat2: its mode sits behind a pointer; glibc falls back to openat
        133: _EPERM,  # mknod: devices and FIFOs (Landlock denies them too), or a setuid regular file
        259: _EPERM,  # mknodat
        188: _EOPNOTSUPP,  # setxattr: e.g. security.capability, a setuid by another name
        189: _EOPNOTSUPP,  # lsetxattr
        190: _EOPNOTSUPP,  # fsetxattr
        463: _EOPNOTSUPP,  # setxattrat
        425: _ENOSYS,  # io_uring_setup: its opens and chmods would bypass this filter
    },
    _AUDIT_ARCH_AARCH64: {
        52: ("mode", 1),  # fchmod
        53: ("mode", 2),  # fchmodat
        452: ("mode", 2),  # fchmodat2
        34: ("mode", 2),  # mkdirat
        56: ("open", 2, 3),  # openat
        437: _ENOSYS,  # openat2
        33: _EPERM,  # mknodat
        5: _EOPNOTSUPP,  # setxattr
        6: _EOPNOTSUPP,  # lsetxattr
        7: _EOPNOTSUPP,  # fsetxattr
        463: _EOPNOTSUPP,  # setxattrat
        425: _ENOSYS,  # io_uring_setup
    },
}

# Classic BPF opcodes and struct seccomp_data offsets (nr at 0, arch at 4, args[i] at 16 + 8 i; the
# low 32 bits come first on these little-endian machines, and modes and flags fit in them).
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06


def _arg(i: int) -> int:
    return 16 + 8 * i


def seccomp_program() -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) tuples; unknown architectures are killed, never let through."""
    # Assembled with symbolic labels: ("label", name) marks a place, jumps name their targets.
    prog: list[tuple] = [("ld", 4)]
    for arch in _CHECKS_BY_ARCH:
        prog.append(("jeq", arch, f"arch{arch}", None))
    prog.append(("ret", _RET_KILL_PROCESS))
    checks: dict[str, _Check] = {}
    for arch, table in _CHECKS_BY_ARCH.items():
        prog += [("label", f"arch{arch}"), ("ld", 0)]
        if arch == _AUDIT_ARCH_X86_64:
            prog.append(("jge", _X32_SYSCALL_BIT, "enosys", None))  # x32 numbers reach the same calls
        for nr, check in table.items():
            name = f"errno{check}" if isinstance(check, int) else "_".join(map(str, check))
            checks[name] = check
            prog.append(("jeq", nr, name, None))
        prog.append(("ret", _RET_ALLOW))
    checks["enosys"] = _ENOSYS
    for name, check in checks.items():
        prog.append(("label", name))
        if isinstance(check, int):
            prog.append(("ret", _RET_ERRNO | check))
        elif len(check) == 2:  # ("mode", i)
            prog += [("ld", _arg(check[1])), ("jset", _SETID_BITS, "eperm", None), ("ret", _RET_ALLOW)]
        else:  # ("open", f, m)
            prog += [("ld", _arg(check[1])), ("jset", _CREATING, f"{name}_mode", None), ("ret", _RET_ALLOW)]
            prog += [("label", f"{name}_mode"), ("ld", _arg(check[2])), ("jset", _SETID_BITS, "eperm", None)]
            prog.append(("ret", _RET_ALLOW))
    prog += [("label", "eperm"), ("ret", _RET_ERRNO | _EPERM)]
    return _assemble(prog)


def _assemble(prog: list[tuple]) -> list[tuple[int, int, int, int]]:
    where: dict[str, int] = {}
    n = 0
    for op in prog:
        if op[0] == "label":
            where[op[1]] = n
        else:
            n += 1
    out: list[tuple[int, int, int, int]] = []
    for op in prog:
        if op[0] == "label":
            continue
        here = len(out) + 1  # jumps are relative to the next instruction
        if op[0] == "ld":
            out.append((_LD_ABS, 0, 0, op[1]))
        elif op[0] == "ret":
            out.append((_RET, 0, 0, op[1]))
        else:
            code = {"jeq": _JEQ, "jge": _JGE, "jset": _JSET}[op[0]]
            jt = where[op[2]] - here
            jf = 0 if op[3] is None else where[op[3]] - here
            if not (0 <= jt < 256 and 0 <= jf < 256):
                raise ValueError("seccomp program too long for an 8-bit jump")
            out.append((code, jt, jf, op[1]))
    return out


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def forbid_setid_files() -> None:
    """Install the seccomp filter on this process and what it execs (needs NO_NEW_PRIVS, set by confine)."""
    prog = seccomp_program()
    raw = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *ins) for ins in prog))
    fprog = _SockFprog(len(prog), ctypes.cast(raw, ctypes.c_void_p))
    libc = _libc()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(NO_NEW_PRIVS) failed")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


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
        return _refuse("interactive shells are disabled; only sftp, scp and rsync are served")
    if words[0] in ("internal-sftp", "sftp-server") or words[0].endswith("/sftp-server"):
        os.chdir(root)
        confine([root, "/dev/null"], config["sftp_files"])
        os.execv(config["sftp_server"], [config["sftp_server"], "-d", root])
    if words[0] == "rsync" and words[1:2] == ["--server"]:
        os.chdir(root)
        # rrsync (python3) and rsync need system code; rrsync keeps rsync's paths inside root.
        confine([root, "/dev/null"], [p for p in _SYSTEM_CODE if os.path.exists(p)])
        os.execv(RRSYNC, [RRSYNC, "-munge", "-no-lock", root])
    if words[0] == "scp" and config.get("scp"):
        argv = scp_argv(command)
        if argv is None:
            return _refuse("scp: only `scp [-v] [-r] [-p] [-d] -t|-f [--] PATH` is served")
        os.chdir(root)
        # Like sftp-server: scp may read only its own binary and libraries, and the root.
        confine([root, "/dev/null"], config["scp_files"])
        os.execv(config["scp"], [config["scp"], *argv])
    return _refuse(f"command refused: {words[0]!r}; only sftp, scp and rsync are served")


_SCP_FLAGS = ("-v", "-r", "-p", "-d")


def scp_argv(command: str) -> list[str] | None:
    """The arguments of a legacy `scp -t`/`scp -f` request (what `scp -O` sends), or None to refuse it.

    scp hands the path to the login shell; there is none here, so it is unquoted as sh would (shlex)
    and never expanded. Exactly one of -t (receive) or -f (send), a few harmless flags, one path.
    """
    import shlex  # here, not at the top: every SFTP and rsync session would pay for it

    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or words[0] != "scp":
        return None
    flags: list[str] = []
    rest = words[1:]
    while rest and rest[0] in (*_SCP_FLAGS, "-t", "-f"):
        flags.append(rest.pop(0))
    if rest and rest[0] == "--":
        rest.pop(0)
    modes = [f for f in flags if f in ("-t", "-f")]
    if len(modes) != 1 or len(set(flags)) != len(flags) or len(rest) != 1 or not rest[0]:
        return None
    return [*flags, "--", rest[0]]


if __name__ == "__main__":
    sys.exit(gate(sys.argv[1]))
