"""sshfs: the served root mounted over SFTP through FUSE, logged in with an SSH key.

The host key is verified against the credentials' known_hosts (StrictHostKeyChecking=yes), BatchMode
keeps ssh from ever prompting, and `-F /dev/null` keeps the user's ~/.ssh/config out of the numbers.
Nothing secret is on argv: the key is a file. Reconnect is off and ServerAlive probes are on, so a
dead server turns reads into EIO/ENOTCONN within about `timeout` seconds instead of a hang.

A stock server (`target.stock`) is mounted as the user reaches it: the alias with their ssh config (or
WORKBENCH_SSH_CONFIG's as -F), agent, identity files and known_hosts; only what the credentials name is
added. A password goes to sshfs on stdin (`password_stdin`: sshfs types it at ssh's prompt on a pty).
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

from workbench.protocols.base import ClientOptions
from workbench.protocols.details import ClientDetails
from workbench.protocols.mounts.base import MountClient, classify, readahead_bytes, which
from workbench.protocols.mounts.commands import CommandRunner, Outcome
from workbench.protocols.mounts.stale import owned_prefix
from workbench.protocols.openssh_sftp import known_host_hint, ssh_host
from workbench.shared.errors import AuthError, NetworkError, NotFoundError, UnavailableError, WorkbenchError
from workbench.shared.sshconfig import config_args
from workbench.shared.target import Target, url_host

REQUEST_BYTES = 32 * 1024  # the kernel splits FUSE reads and writes into SFTP requests of this size
DEFAULT_CIPHER = "aes128-gcm@openssh.com"  # AES-NI: 20-45 % faster than chacha20-poly1305 (OpenSSH 9.2, x86-64)

_SSHFS_FAILURES: tuple[tuple[str, type[WorkbenchError]], ...] = (
    ("host key verification failed", AuthError),
    ("remote host identification has changed", AuthError),
    ("no such file or directory", NotFoundError),
    ("fuse: device not found", UnavailableError),
    ("fusermount", UnavailableError),
    ("connection refused", NetworkError),
)


class SshfsClient(MountClient):
    """sshfs + cp: the served root mounted over SFTP."""

    protocol = "sftp"
    name = "sshfs"
    page_cache = "sshfs without kernel_cache/auto_cache (FUSE drops a file's pages on open) + fadvise DONTNEED"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if not which("sshfs"):
            return "sshfs not installed: apt-get install sshfs"
        if sys.platform == "linux":
            if not os.path.exists("/dev/fuse"):
                return "no /dev/fuse: load the fuse module (or pass --device /dev/fuse to the container)"
            if not os.access("/dev/fuse", os.R_OK | os.W_OK):
                return "no access to /dev/fuse: run as root or join the group that owns it"
            if not which("fusermount3", "fusermount"):
                return "fusermount not installed: apt-get install fuse3"
        return None

    @property
    def cipher(self) -> str:
        return self.options.cipher or DEFAULT_CIPHER

    def __init__(
        self, target: Target, options: ClientOptions | None = None, *, runner: CommandRunner | None = None
    ) -> None:
        super().__init__(target, options, runner=runner)
        self._log_dir: Path | None = None

    def mount_argv(self, mountpoint: Path, ssh_log: Path | None = None) -> list[str]:
        """The sshfs command line (no secrets: the key and known_hosts are files)."""
        creds = self.target.credentials
        if self.target.stock:
            return self._stock_argv(mountpoint, ssh_log)
        host = url_host(self.target.host)
        ssh = {
            **self._common_ssh_options(),
            "PasswordAuthentication": "no",
            "KbdInteractiveAuthentication": "no",
        }
        if creds.ssh_key:
            ssh |= {"IdentityFile": str(creds.ssh_key), "IdentitiesOnly": "yes"}
        if self.options.verify_host_keys:
            ssh["StrictHostKeyChecking"] = "yes"
            if creds.known_hosts:
                ssh |= {"UserKnownHostsFile": str(creds.known_hosts), "GlobalKnownHostsFile": "/dev/null"}
        else:
            ssh |= {"StrictHostKeyChecking": "no", "UserKnownHostsFile": "/dev/null"}
        return [
            which("sshfs") or "sshfs",
            f"{creds.user}@{host}:{self.target.remote_root}",
            str(mountpoint),
            "-p",
            str(self.target.port("ssh")),
            "-F",
            "/dev/null",
            "-o",
            self._option_list(ssh, ssh_log),
        ]

    def _stock_argv(self, mountpoint: Path, ssh_log: Path | None) -> list[str]:
        """A stock server: the alias, the user's ssh config, and only what the credentials name."""
        creds = self.target.credentials
        ssh = self._common_ssh_options()
        if creds.password:
            ssh |= {"BatchMode": "no", "NumberOfPasswordPrompts": "1"}
        if creds.ssh_key:
            ssh |= {"IdentityFile": str(creds.ssh_key), "IdentitiesOnly": "yes"}
        if self.options.verify_host_keys:
            ssh["StrictHostKeyChecking"] = "yes"
            if creds.known_hosts:
                ssh["UserKnownHostsFile"] = str(creds.known_hosts)
        else:
            ssh |= {"StrictHostKeyChecking": "no", "UserKnownHostsFile": "/dev/null"}
        extra = ["password_stdin"] if creds.password else []
        return [
            which("sshfs") or "sshfs",
            f"{creds.user}@{url_host(ssh_host(self.target))}:{self.target.remote_root}",
            str(mountpoint),
            "-p",
            str(self.target.port("ssh")),
            *config_args(),
            "-o",
            self._option_list(ssh, ssh_log, extra),
        ]

    def _common_ssh_options(self) -> dict[str, str]:
        timeout = max(1, math.ceil(self.options.stall_timeout_s))
        return {
            "BatchMode": "yes",
            "ConnectTimeout": str(max(1, math.ceil(self.options.connect_timeout_s))),
            # about `timeout` seconds of silence before ssh gives up and sshfs fails the reads
            "ServerAliveInterval": str(max(1, math.ceil(timeout / 3))),
            "ServerAliveCountMax": "3",
            "Ciphers": self.cipher,
            "Compression": "no",
            "LogLevel": "ERROR",
        }

    def _option_list(self, ssh: dict[str, str], ssh_log: Path | None, extra: list[str] | None = None) -> str:
        fuse = [
            # no attribute/listing cache: a file rewritten on the server between runs must not be
            # read with its old size (FUSE stops reading at the cached size)
            "dir_cache=no",
        ]
        if ssh_log is not None:
            # sshfs discards ssh's stderr; -E keeps its reason ("Permission denied") for the error message
            fuse.append(f"ssh_command={_escape(f'ssh -E {ssh_log}')}")
        opts = [f"{k}={_escape(v)}" for k, v in ssh.items()] + fuse + (extra or [])
        return ",".join(opts)

    def _mount(self, mountpoint: Path) -> Outcome:
        key = self.target.credentials.ssh_key
        if key is not None and not Path(key).exists():
            raise AuthError(f"{self.label}: SSH key {key} not found", "start the server with 'workbench serve'")
        self._log_dir = Path(tempfile.mkdtemp(prefix=owned_prefix("sshfs-log")))  # owner pid: see stale.py
        log = self._log_dir / "ssh.log"
        password = self.target.credentials.password if self.target.stock else ""
        # password_stdin: sshfs reads one line and types it at ssh's password prompt (never argv).
        stdin = password + "\n" if password else None
        outcome = self.runner.run(self.mount_argv(mountpoint, log), timeout=self.mount_timeout, stdin_text=stdin)
        if not outcome.ok and log.exists():
            outcome = dataclasses.replace(outcome, output=log.read_text(errors="replace") + outcome.output)
        return outcome

    def _cleanup(self) -> None:
        if self._log_dir is not None:
            shutil.rmtree(self._log_dir, ignore_errors=True)
            self._log_dir = None

    def _failure(self, outcome: Outcome) -> WorkbenchError:
        if self.target.stock and "host key verification failed" in outcome.output.lower():
            where = f"{ssh_host(self.target)}:{self.target.port('ssh')}"
            return AuthError(f"{self.label}: host key of {where} is not known", known_host_hint(self.target))
        return classify(self.label, outcome, self.mount_timeout, _SSHFS_FAILURES)

    def _unmount_commands(self, mountpoint: Path) -> list[list[str]]:
        if sys.platform != "linux":
            return [["umount", str(mountpoint)], ["umount", "-f", str(mountpoint)]]
        fusermount = which("fusermount3", "fusermount") or "fusermount"
        # -z (lazy) as the last resort: detaches even when a dead sshfs left the mount busy
        return [[fusermount, "-u", str(mountpoint)], [fusermount, "-u", "-z", str(mountpoint)]]

    def details(self) -> ClientDetails:
        # measured with sshfs_debug (sshfs 3.7.3, Linux 6.x): the kernel splits I/O into 32 KiB SFTP
        # requests; writes keep 8 or more in flight
        return dataclasses.replace(
            super().details(), cipher=self.cipher, request_bytes=REQUEST_BYTES, requests_in_flight=8
        )

    def row_details(self, direction: str) -> ClientDetails:
        info = self.details()
        if direction != "download" or self.mountpoint is None:
            return info
        readahead = readahead_bytes(self.mountpoint)
        if readahead:
            # A sequential read has only the kernel's readahead window in flight: 128 KiB (4 READs) by
            # default, which held a 2.8 ms lab link to 40-43 MB/s of 63, as 128 KiB / 2.8 ms predicts.
            # Raising /sys/class/bdi/<dev>/read_ahead_kb on the client lifts it.
            info = dataclasses.replace(
                info, readahead_bytes=readahead, requests_in_flight=max(1, readahead // REQUEST_BYTES)
            )
        return info


def _escape(value: str) -> str:
    """Escape a value for a FUSE -o list, where commas separate options."""
    return value.replace("\\", "\\\\").replace(",", "\\,")
