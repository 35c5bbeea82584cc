"""OpenSSH `sftp` in batch mode: the native reference for SFTP (one process per copy or per file set)."""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import shlex
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Unpack

from workbench.protocols.base import Client, ClientOptions, FileCopy, Progress
from workbench.protocols.details import ClientDetails
from workbench.protocols.process import Completed, Watch, last_line, run_native
from workbench.shared.errors import AuthError, NetworkError, NotFoundError, WorkbenchError
from workbench.shared.sshconfig import config_args
from workbench.shared.target import Target, url_host

DEFAULT_CIPHER = "aes128-gcm@openssh.com"  # 20-45 % faster than chacha20-poly1305 with AES-NI (OpenSSH 9.2, x86-64)
REQUEST_BYTES = 32768  # sftp -B default
REQUESTS_IN_FLIGHT = 64  # sftp -R default
MAX_BUDGET_BYTES = 1 << 40  # caps the deadline when a download's size is unknown
MIN_RATE = 1_000_000  # bytes/s below which a whole copy is declared dead (on top of the silence timeout)
ASKPASS_SECRET_ENV = "WORKBENCH_ASKPASS_SECRET"  # the askpass helper prints this variable of its own environment
ASKPASS_FOR_ENV = "WORKBENCH_ASKPASS_FOR"  # _1, _2, ...: the exact prompts the helper answers (askpass_prompts)
BATCH_OFF_SSH = "ssh-batchmode-off"
# ssh's "user@host: Permission denied (publickey,password)." names auth methods; a file's EACCES does not.
SSH_LOGIN_DENIED = re.compile(r"permission denied \((publickey|password|keyboard-interactive|hostbased|gssapi)", re.I)


def ssh_options(target: Target, options: ClientOptions) -> list[str]:
    """ssh/sftp arguments for a non-interactive, host-verified login (no secrets).

    Served targets (workbench's own sshd) log in with the credentials' key and known_hosts only. Stock
    targets follow the user's OpenSSH configuration: see `_stock_options`.
    """
    if target.stock:
        return _stock_options(target, options)
    creds = target.credentials
    if creds.ssh_key is None:
        raise AuthError(
            "OpenSSH clients here log in with a key only", "put ssh_key in the credentials (the server writes one)"
        )
    opts = ["-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-i", str(creds.ssh_key)]
    if options.verify_host_keys:
        if creds.known_hosts is None:
            raise AuthError("no known_hosts file to verify the server", "add known_hosts to the credentials")
        opts += ["-o", f"UserKnownHostsFile={creds.known_hosts}", "-o", "StrictHostKeyChecking=yes"]
    else:
        opts += ["-o", "UserKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "LogLevel=ERROR"]
    return opts + _timing_options(options)


def _timing_options(options: ClientOptions) -> list[str]:
    alive = max(1, round(options.stall_timeout_s / 3))
    return [
        "-o",
        f"ConnectTimeout={max(1, round(options.connect_timeout_s))}",
        "-o",
        f"ServerAliveInterval={alive}",
        "-o",
        "ServerAliveCountMax=3",
        "-c",
        options.cipher or DEFAULT_CIPHER,
    ]


def _stock_options(target: Target, options: ClientOptions) -> list[str]:
    """A stock server, reached as the user reaches it: their ssh config (or WORKBENCH_SSH_CONFIG's, as -F),
    agent, identity files and known_hosts. Only what the credentials name is added (-i, UserKnownHostsFile);
    host keys are always checked strictly unless verification is off. With a password ssh may prompt,
    which `askpass_env` answers (BatchMode would forbid it); without one nothing may prompt."""
    creds = target.credentials
    opts = config_args()
    if creds.password:
        opts += ["-o", "BatchMode=no", "-o", "NumberOfPasswordPrompts=1"]
    else:
        opts += ["-o", "BatchMode=yes"]
    if creds.ssh_key is not None:
        opts += ["-o", "IdentitiesOnly=yes", "-i", str(creds.ssh_key)]
    if options.verify_host_keys:
        if creds.known_hosts is not None:
            opts += ["-o", f"UserKnownHostsFile={creds.known_hosts}"]
        opts += ["-o", "StrictHostKeyChecking=yes"]
    else:
        opts += ["-o", "UserKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "LogLevel=ERROR"]
    return opts + _timing_options(options)


def ssh_host(target: Target) -> str:
    """The host an OpenSSH program is given: a stock target's alias, so ~/.ssh/config applies to it."""
    return target.ssh_alias if target.stock and target.ssh_alias else target.host


def ssh_login(target: Target) -> str:
    return f"{target.credentials.user}@{url_host(ssh_host(target))}"


def remote_path(target: Target, remote: str) -> str:
    """A remote path as the SSH server sees it.

    Workbench's sshd starts every session in the served root, so its paths go as they are. On a stock
    server they are beneath `remote_root` (the scratch directory), which is absolute or relative to
    the login's home directory: a relative path stays relative, since sftp-server, scp and the
    remote shell all start in the home directory.
    """
    if not target.stock:
        return remote
    root = target.remote_root.rstrip("/") or ("/" if target.remote_root.startswith("/") else "")
    remote = remote.strip("/")
    if not root:
        return remote or "."
    return posixpath.join(root, remote) if remote and remote != "." else root


@contextlib.contextmanager
def askpass_env(target: Target) -> Iterator[dict[str, str]]:
    """Environment for an OpenSSH program that may need the password: SSH_ASKPASS names a 0700 helper
    that prints the secret from its own environment (never argv, never a file). Empty when not needed.

    The helper answers only the exact prompts of this login (askpass_prompts), and exits 1 on anything else:
    a ProxyJump or ProxyCommand ssh, which inherits this environment, asks with the jump host's name, and a
    jump host whose prompt merely holds "USER@HOST" gets nothing either.
    Only stock targets with a password use it; workbench's own sshd takes keys only.
    """
    password = target.credentials.password
    if not (target.stock and password):
        yield {}
        return
    # the host as ssh -G resolved it (HostName), which is what ssh names in its prompts
    prompts = askpass_prompts(target.credentials.user, target.host)
    folder = tempfile.mkdtemp(prefix="wb-askpass-")  # 0700
    helper = os.path.join(folder, "askpass")
    try:
        _write_script(
            helper,
            # quoted, each variable matches as plain text (no pattern): only a whole, identical prompt is answered
            'case "$1" in '
            + "|".join(f'"${ASKPASS_FOR_ENV}_{i}"' for i in range(1, len(prompts) + 1))
            + f') printf \'%s\\n\' "${ASKPASS_SECRET_ENV}" ;; *) exit 1 ;; esac',
        )
        # `sftp -b` puts -oBatchMode=yes before every option it passes on, and ssh keeps the first value it
        # sees, so no password would ever be asked for: sftp runs ssh through this one (sftp -S) instead.
        _write_script(
            os.path.join(folder, BATCH_OFF_SSH),
            f'exec {shlex.quote(shutil.which("ssh") or "ssh")} -o BatchMode=no "$@"',
        )
        yield {
            "SSH_ASKPASS": helper,
            "SSH_ASKPASS_REQUIRE": "force",
            ASKPASS_SECRET_ENV: password,
            **{f"{ASKPASS_FOR_ENV}_{i}": prompt for i, prompt in enumerate(prompts, 1)},
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def askpass_prompts(user: str, host: str) -> tuple[str, ...]:
    """The prompts OpenSSH asks this login's password with, exactly: "USER@HOST's password: " (older releases
    cut USER to 30 and HOST to 128 characters there) and keyboard-interactive's "(USER@HOST) Password: "."""
    forms = (f"{user}@{host}'s password: ", f"{user[:30]}@{host[:128]}'s password: ", f"({user}@{host}) Password: ")
    return tuple(dict.fromkeys(forms))


def batch_off_ssh(env: dict[str, str]) -> str | None:
    """The ssh that sftp must run (-S) for ssh to ask for the password `env` holds; None without one."""
    helper = env.get("SSH_ASKPASS")
    return os.path.join(os.path.dirname(helper), BATCH_OFF_SSH) if helper else None


def _write_script(path: str, body: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
    with os.fdopen(fd, "w") as fh:
        fh.write(f"#!/bin/sh\n{body}\n")


def ssh_error(done: Completed, what: str, where: str, target: Target | None = None) -> WorkbenchError:
    """Map an ssh-based client's failure (exit status and stderr) to one clean error."""
    text = done.stderr + done.stdout
    low = text.lower()
    line = last_line(done.stderr) or last_line(done.stdout) or f"exit status {done.returncode}"
    stock = target is not None and target.stock
    if "remote host identification has changed" in low:
        return AuthError(
            f"host key of {where} has CHANGED since it was recorded in known_hosts",
            "if the server was reinstalled remove the old key with ssh-keygen -R; otherwise someone may be in between",
        )
    if "host key verification failed" in low:
        if stock and target is not None:
            return AuthError(f"host key of {where} is not known", known_host_hint(target))
        return AuthError(f"host key of {where} could not be verified", "check known_hosts in the credentials")
    if SSH_LOGIN_DENIED.search(text) or "too many authentication failures" in low:
        if stock:
            denied = next((ln.strip() for ln in text.splitlines() if SSH_LOGIN_DENIED.search(ln)), line)
            return AuthError(
                f"{where} refused the SSH login: {denied}",
                "check the user, the key (IdentityFile in ~/.ssh/config, or ssh-add -l for the agent) or the password",
            )
        return AuthError(f"{where} refused the SSH login", "check the user and key in the credentials")
    if "no such file" in low or "not found" in low:
        return NotFoundError(f"{what}: {line}", "check the path (relative to the served root)")
    if "connection refused" in low:
        return NetworkError(f"connection refused by {where} while {what}", "is sshd running there?")
    if "timed out" in low or "timeout" in low:
        return NetworkError(f"timed out talking to {where} while {what}", "the link or the server stalled")
    if "permission denied" in low:
        return WorkbenchError(f"permission denied while {what}: {line}", "the path is outside the served root?")
    return NetworkError(f"{what} failed: {line}", "the server stopped or dropped the link")


def known_host_hint(target: Target) -> str:
    """What to do about an unknown host key, in OpenSSH's terms."""
    host = ssh_host(target)
    port = target.port("ssh")
    p = f"-p {port} " if port != 22 else ""
    return (
        f"check its fingerprint with the server's owner, then connect once with `ssh {p}{host}` and accept it, "
        f"or add it with `ssh-keyscan {p}{target.host} >> ~/.ssh/known_hosts`"
    )


def _quote(path: str | Path) -> str:
    """A path as one sftp batch-file argument (double quotes, backslash escapes)."""
    text = str(path).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def _parents(remote: str) -> list[str]:
    parts = PurePosixPath(remote).parts
    return [str(PurePosixPath(*parts[: i + 1])) for i in range(len(parts))]


def total_size(paths: Sequence[Path]) -> int:
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):
            total += path.stat().st_size
    return total


class OpenSSHSftpClient(Client):
    protocol = "sftp"
    name = "openssh"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return None if shutil.which("sftp") else "sftp not installed: apt-get install openssh-client"

    @property
    def _where(self) -> str:
        return f"{ssh_host(self.target)}:{self.target.port('ssh')}"

    def _remote(self, remote: str) -> str:
        return _quote(remote_path(self.target, remote))

    def _run(self, batch: list[str], progress: Progress, total: int, what: str, **watch: Unpack[Watch]) -> None:
        argv = [
            "sftp",
            "-b",
            "-",
            "-P",
            str(self.target.port("ssh")),
            *ssh_options(self.target, self.options),
            ssh_login(self.target),
        ]
        with askpass_env(self.target) as env:
            ssh = batch_off_ssh(env)
            done = run_native(
                [argv[0], "-S", ssh, *argv[1:]] if ssh else argv,
                progress=progress,
                total_bytes=total,
                timeout=self.options.stall_timeout_s * 4 + min(total, MAX_BUDGET_BYTES) / MIN_RATE,
                stall_timeout=self.options.stall_timeout_s,
                stdin_text="\n".join(batch) + "\n",
                env=env,
                **watch,
            )
        if done.returncode != 0:
            raise ssh_error(done, what, self._where, self.target)

    def connect(self) -> None:
        """Log in once so bad credentials or host keys fail here, outside the timed copies."""
        self._run(["pwd"], lambda n: None, 0, "logging in over SFTP")

    def download(self, remote: str, local: Path, progress: Progress) -> None:
        # The size is not known up front: report the file's real growth, whatever run_native estimates.
        sent = 0

        def real(_: int) -> None:
            nonlocal sent
            now = total_size([local])
            if now > sent:
                progress(now - sent)
                sent = now

        self._get([FileCopy(local, remote, 1 << 62)], real)

    def upload(self, local: Path, remote: str, progress: Progress) -> None:
        self.upload_many([FileCopy(local, remote, local.stat().st_size)], progress)

    def download_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        self._get(files, progress)

    def _get(self, files: Sequence[FileCopy], progress: Progress) -> None:
        batch = [f"get {self._remote(f.remote)} {_quote(f.local)}" for f in files]
        locals_ = [f.local for f in files]
        total = sum(f.size for f in files)
        self._run(batch, progress, total, f"downloading {files[0].remote}", watch=lambda: total_size(locals_))

    def upload_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        batch = [f"put {_quote(f.local)} {self._remote(f.remote)}" for f in files]
        total = sum(f.size for f in files)
        self._run(batch, progress, total, f"uploading {files[0].local.name}", watch_reads=True)

    def mkdir(self, remote_dir: str) -> None:
        # '-' prefix: an existing directory is not an error.
        paths = _parents(remote_path(self.target, remote_dir))
        self._run([f"-mkdir {_quote(p)}" for p in paths], lambda n: None, 0, f"creating {remote_dir}")

    def details(self) -> ClientDetails:
        return ClientDetails(
            request_bytes=REQUEST_BYTES,
            requests_in_flight=REQUESTS_IN_FLIGHT,
            cipher=self.options.cipher or DEFAULT_CIPHER,
            timed_includes_setup=True,
        )
