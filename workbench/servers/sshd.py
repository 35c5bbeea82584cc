"""OpenSSH sshd with private config and keys, serving SFTP and rsync confined to the served root.

Confinement: ``ChrootDirectory`` cannot be used here because sshd demands that every component of
the chroot path be root-owned and not group/other-writable (temp trees under /tmp are not), and a
chroot would also hide the rsync binary from rsync-over-ssh sessions. Instead a ``ForceCommand``
gate (this module run with ``-m``) refuses shells and any command but the SFTP subsystem and
``rsync --server``, then, before exec, applies a Landlock ruleset (unprivileged kernel sandbox):
read/write only beneath the served root, plus read/execute of the program's own code. SFTP may read
only the exact files its binary loads (and /etc/passwd, which sftp-server needs to start); rsync
also goes through ``rrsync -munge ROOT``, which rejects paths that leave the root. Writes outside
the root are impossible for both.
"""

from __future__ import annotations

import ctypes
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from workbench.errors import NotFoundError, UnavailableError
from workbench.servers.base import ManagedServer

SFTP_SERVER = "/usr/lib/openssh/sftp-server"
RRSYNC = "/usr/bin/rrsync"
RSYNC = "/usr/bin/rsync"
_PROJECT_ROOT = Path(__file__).resolve().parents[2]  # so the gate imports this module under sshd's bare env


class Sshd(ManagedServer):
    """sshd on ctx.bind:ctx.ports['ssh'], key login for ctx.credentials.user only."""

    name = "sshd"
    services = ("ssh",)
    binary = "/usr/sbin/sshd"
    install_hint = "apt-get install openssh-server"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        reason = super().unavailable_reason()
        if reason:
            return reason
        if landlock_abi() < 1:
            return "the kernel lacks Landlock, which confines SFTP and rsync to the served root: use Linux >= 5.13"
        return None

    @property
    def config_path(self) -> Path:
        return self.dir / "sshd_config"

    @property
    def host_key_path(self) -> Path:
        return self.dir / "host_ed25519"

    @property
    def client_key_path(self) -> Path:
        """Private key the clients log in with (its public half is the only authorized key)."""
        return self.dir / "client_ed25519"

    @property
    def known_hosts_path(self) -> Path:
        """known_hosts holding this server's host key, for clients that verify host keys."""
        return self.dir / "known_hosts"

    @property
    def gate_path(self) -> Path:
        return self.dir / "gate.json"

    def prepare(self) -> None:
        reason = self.unavailable_reason()
        if reason:
            raise UnavailableError(f"cannot run sshd: {reason}", "see 'workbench doctor'")
        # sshd refuses to start without its privilege-separation directory.
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        for key in (self.host_key_path, self.client_key_path):
            if not key.exists():
                _keygen(key)
        shutil.copyfile(self.client_key_path.with_suffix(".pub"), self.dir / "authorized_keys")
        os.chmod(self.dir / "authorized_keys", 0o600)
        self._write_known_hosts()
        self._write_gate()
        self.config_path.write_text(self._config())

    def command(self) -> list[str]:
        return [str(self.binary), "-D", "-e", "-f", str(self.config_path)]

    def _write_known_hosts(self) -> None:
        kind, blob = self.host_key_path.with_suffix(".pub").read_text().split()[:2]
        port = self.ctx.ports["ssh"]
        # A wildcard bind is reached through some other address: cover the loopback names at least.
        hosts = ["127.0.0.1", "localhost", "::1"] if self.ctx.bind in ("", "0.0.0.0", "::") else [self.ctx.bind]
        names = [f"[{h}]:{port}" for h in hosts] + (hosts if port == 22 else [])
        self.known_hosts_path.write_text(f"{','.join(names)} {kind} {blob}\n")

    def _write_gate(self) -> None:
        gate = {
            "root": str(Path(self.ctx.root).resolve()),
            "sftp_server": SFTP_SERVER,
            "sftp_files": _loaded_files(SFTP_SERVER),
        }
        self.gate_path.write_text(json.dumps(gate, indent=2))

    def _config(self) -> str:
        gate_cmd = (
            f"PYTHONPATH={shlex.quote(str(_PROJECT_ROOT))} exec {shlex.quote(sys.executable)} -S"
            f" -m workbench.servers.sshd {shlex.quote(str(self.gate_path))}"
        )
        lines = [
            f"ListenAddress {self.ctx.bind}",
            f"Port {self.ctx.ports['ssh']}",
            f"HostKey {self.host_key_path}",
            f"PidFile {self.dir / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.dir / 'authorized_keys'}",
            f"AllowUsers {self.ctx.credentials.user}",
            "AuthenticationMethods publickey",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password",
            "UsePAM no",
            # Keys live in a private dir that may sit under world-writable /tmp.
            "StrictModes no",
            "PermitTTY no",
            "PermitUserRC no",
            "PermitUserEnvironment no",
            "AllowTcpForwarding no",
            "AllowStreamLocalForwarding no",
            "AllowAgentForwarding no",
            "X11Forwarding no",
            "PermitTunnel no",
            "PrintMotd no",
            "UseDNS no",
            "Compression no",
            "ClientAliveInterval 15",
            "ClientAliveCountMax 4",
            "LogLevel INFO",
            "Subsystem sftp internal-sftp",
            f"ForceCommand {gate_cmd}",
        ]
        return "\n".join(lines) + "\n"


def _keygen(path: Path) -> None:
    """An unencrypted ed25519 key pair (the passphrase is empty, so nothing secret is on argv)."""
    try:
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "workbench", "-f", str(path)],
            check=True,
            capture_output=True,
            timeout=30,
        )
    except FileNotFoundError as exc:
        raise NotFoundError("ssh-keygen is not installed", "apt-get install openssh-client") from exc
    except subprocess.CalledProcessError as exc:
        msg = exc.stderr.decode(errors="replace").strip()
        raise NotFoundError(f"ssh-keygen failed: {msg}", f"check {path.parent} is writable") from exc


def _loaded_files(binary: str) -> list[str]:
    """The binary, its dynamic loader and the shared libraries it links (the gate lets SFTP read only these)."""
    # sftp-server looks up its own account at start (glibc's built-in NSS 'files' backend).
    files = {os.path.realpath(binary), "/etc/ld.so.cache", "/etc/nsswitch.conf", "/etc/passwd"}
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30).stdout
    for line in out.splitlines():
        for word in line.split():
            if word.startswith("/"):
                files.add(os.path.realpath(word))
    return sorted(f for f in files if os.path.exists(f))


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
    config = json.loads(Path(config_path).read_text())
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
