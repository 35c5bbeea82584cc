"""OpenSSH sshd with private config and keys, serving SFTP, scp and rsync confined to the served root.

Confinement: ``ChrootDirectory`` cannot be used here because sshd demands that every component of
the chroot path be root-owned and not group/other-writable (temp trees under /tmp are not), and a
chroot would also hide the rsync binary from rsync-over-ssh sessions. Instead a ``ForceCommand``
gate (``sshgate.py``, run as a plain script) refuses shells and any command but the SFTP subsystem,
``rsync --server`` and the legacy scp protocol's ``scp -t``/``scp -f``, then, before exec, applies a
Landlock ruleset (unprivileged kernel sandbox): read/write only beneath the served root, plus
read/execute of the program's own code. SFTP and scp may read only the exact files their binary loads
(and /etc/passwd, which both look up at start); rsync also goes through ``rrsync -munge ROOT``, which
rejects paths that leave the root. Writes outside the root are impossible for all three. Beneath the
root no device node, FIFO, socket or symlink can be made and no file can be hard-linked or renamed in
from outside (Landlock grants none of those rights there), and a seccomp filter refuses setuid/setgid
modes, mknod and extended attributes.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from workbench.server.daemons.base import ManagedServer
from workbench.server.daemons.sshgate import landlock_abi
from workbench.shared.errors import NotFoundError, UnavailableError

SFTP_SERVER = "/usr/lib/openssh/sftp-server"
SCP = "/usr/bin/scp"  # the legacy protocol's remote end (`scp -O` runs `scp -t` or `scp -f` on the server)
GATE = Path(__file__).resolve().with_name("sshgate.py")


class Sshd(ManagedServer):
    """sshd on ctx.bind:ctx.ports['ssh'], key login for ctx.credentials.user only."""

    name = "sshd"
    services = ("ssh",)
    binary = "/usr/sbin/sshd"
    install_hint = "apt-get install openssh-server"
    set_env = True  # the configuration sets the sessions' SHLVL (SetEnv: OpenSSH 8.7 and later)

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
        self._write_keys()
        self._write_known_hosts()
        self._write_gate()
        self.config_path.write_text(self._config())
        if not self._config_accepted():  # an sshd older than OpenSSH 8.7 knows no SetEnv and refuses to start
            self.set_env = False
            self.config_path.write_text(self._config())

    def _config_accepted(self) -> bool:
        """Whether sshd's own check (`sshd -t`) takes the written configuration (True when the check cannot run:
        the start then says what is wrong)."""
        try:
            check = subprocess.run(
                [str(self.binary), "-t", "-f", str(self.config_path)], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired):
            return True
        return check.returncode == 0 or "SetEnv" not in check.stderr

    def _write_keys(self) -> None:
        """The host key and the client key (its public half the only authorized key), made once."""
        # sshd refuses to start without its privilege-separation directory.
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        for key in (self.host_key_path, self.client_key_path):
            if not key.exists():
                _keygen(key)
        shutil.copyfile(self.client_key_path.with_suffix(".pub"), self.dir / "authorized_keys")
        os.chmod(self.dir / "authorized_keys", 0o600)

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
        if os.path.exists(SCP):
            gate |= {"scp": SCP, "scp_files": _loaded_files(SCP)}
        self.gate_path.write_text(json.dumps(gate, indent=2))

    def _config(self) -> str:
        # A plain script under -S -I imports nothing but the standard library: it runs at the start of
        # every SSH session, inside the timed span of clients that connect per copy.
        gate_cmd = (
            f"exec {shlex.quote(sys.executable)} -S -I {shlex.quote(str(GATE))} {shlex.quote(str(self.gate_path))}"
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
            # OpenSSH's default: compression only after login, and only for a client that asks (scp -C, ssh -C);
            # with "no" the `scp -C` a user compares with `rsync -z` would silently compress nothing
            "Compression yes",
            # A connection that has not logged in 10 s after accept is dropped, as serve's listeners do:
            # sshd's default of 120 s would let slow clients hold its pre-auth slots.
            "LoginGraceTime 10",
            "ClientAliveInterval 15",
            "ClientAliveCountMax 4",
            "LogLevel INFO",
            "Subsystem sftp internal-sftp",
            # sshd hands the gate to the account's login shell, and bash first reads the account's ~/.bashrc for a
            # command that comes from sshd unless it is a nested shell (SHLVL set): that is the account's start-up,
            # not the server's, and it would run inside every per-copy login's timed span (about 100 ms of CPU
            # for an account whose shell start-up runs a version manager)
            *(["SetEnv SHLVL=1"] if self.set_env else []),
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
