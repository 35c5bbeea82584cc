"""netatalk's afpd (AFP over DSI/TCP) with a private config and state, one volume at the served root.

netatalk 4 runs from the host when it has it, else from the Debian 13 root filesystem setup prepared
(workbench/shared/netatalk.py), entered with chroot. Either way the server starts in a mount namespace of its own
(`unshare --mount`), where bind mounts put in place what is private to this server: the served root and
this server's folder at fixed paths beneath /srv/workbench (in the Debian 13 root, or on the host: a
guest session's afpd, no longer root, reads its config again and opens the volume, which may lie beneath a
folder only root may enter, such as pytest's), a passwd, group and shadow holding the one user with its
password (set by chpasswd from stdin, never argv; every other account locked), and netatalk's lock and
state folders. Those mounts exist only in that namespace: nothing on the host changes but two empty mount
points, and the mounts vanish with the server's last process, however it ends.

Confinement (an authenticated client is hostile): "follow symlinks = no" (afpd neither resolves a path
through a link nor opens one; it shows a link as a 'slnk' file); no AFP3 UNIX privileges (a client sets
no mode bits; what it creates takes its parent folder's mode without execute bits); extended attributes
and resource forks go to the file system's xattrs where it has them ("ea = sys") else to AppleDouble files
afpd itself names ("ea = ad"); no ACL mapping; no guest unless asked. In the Debian 13 root a link out
of the volume leads nowhere besides: only the volume is mounted there. The confinement suite
(tests/integration/test_confine_afp.py) tries the ways out.

CNIDs: "cnid scheme = last" needs no cnid_metad (which wants to raise the open-files limit, refused where
the hard limit is low) and keeps no database: IDs live as long as the session.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path
from typing import ClassVar

from workbench.server.daemons.base import ManagedServer, ServerContext
from workbench.shared.errors import AuthError, NotFoundError, UnavailableError
from workbench.shared.netatalk import GUEST_ACCOUNT, REFERENCE_VOLUME, Netatalk, find

INNER_BASE = "/srv/workbench"  # mount points (in the Debian 13 root or on the host): volume/ and state/
LOCKED = "!*"  # a shadow password field no password matches
PASSWORD_MAX_BYTES = 256
# afpd refuses every login of uid 0. A served user who is root logs in as an account of this uid whose group
# is afpd's "admin group": afpd then keeps root's rights for that session, as smbd and sshd serve root as root.
ADMIN_UID = 64990
ADMIN_GID = 64990
ADMIN_GROUP = "workbench-afp-admin"
# Where a tool cannot take a password otherwise (netatalk's afp_speedtest takes one only as -w on its command
# line, else logs in by cleartext with an empty one), this unprivileged account logs in without a password,
# and a guest login ("No User Authent") is this account too. It reads and writes only what its uid or the
# world may in the volume, never the served user's rights; only a server started with guest = True has it.
GUEST_UID = 64991
# The volume that password-less account gets for netatalk's afp_speedtest (the lab's reference row,
# protocols/afp_speedtest.py): an empty folder of its own in this server's private state, never the served root;
# on a server with ctx.afp_reference that account may log in there and nowhere else.
REFERENCE_FOLDER = "reference"
_PRIVATE_FOLDERS = ("conf", "accounts/etc", "lib", "lock", "cnid")
STEP_TIMEOUT_S = 30.0

# Runs inside the new mount namespace: the binds, then the master in the foreground. Paths come as
# arguments, never spliced into the script. $1 root ("" on the host), $2 served root, $3 the volume's
# path as afpd sees it, $4 this server's folder, $5 its folder as afpd sees it; then the master's argv.
_ENTER = r"""
set -eu
root=$1 served=$2 volume=$3 state=$4 inner=$5
shift 5
mount --bind "$served" "$root$volume"
mount --bind "$state" "$root$inner"
if [ -n "$root" ]; then mount -t proc proc "$root/proc"; fi
for f in passwd group shadow; do mount --bind "$state/accounts/etc/$f" "$root/etc/$f"; done
mount --bind "$state/lib" "$root/var/lib/netatalk"
mount --bind "$state/lock" "$root/run/lock"
if [ -n "$root" ]; then exec chroot "$root" "$@"; fi
exec "$@"
"""


def conf_value(text: str) -> str:
    """Refuse values that would break out of one afp.conf line (or start a comment)."""
    if any(c in text for c in "\n\r;#") or text != text.strip():
        raise NotFoundError(f"invalid afp.conf value {text!r}", "paths and names must be one plain line")
    return text


def _xattrs_work(folder: Path) -> bool:
    """Whether `folder`'s file system takes user extended attributes (tmpfs on older kernels does not)."""
    probe = "user.workbench-probe"
    try:
        os.setxattr(folder, probe, b"1")
        os.removexattr(folder, probe)
        return True
    except OSError:
        return False


class Afpd(ManagedServer):
    name = "afpd"
    services = ("afp",)
    install_hint = "run scripts/afp_root.sh as root"
    # a guest login as GUEST_ACCOUNT: only for tools that cannot take a password otherwise
    guest: ClassVar[bool] = False

    def __init__(self, ctx: ServerContext) -> None:
        super().__init__(ctx)
        found, why = find()
        if found is None:
            raise UnavailableError(f"AFP server: {why}", "")
        self.netatalk: Netatalk = found

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if os.geteuid() != 0:
            return "afpd needs root (it switches to the logged-in user; mounts of its own)"
        if shutil.which("unshare") is None:
            return "unshare not found: apt-get install util-linux"
        found, why = find()
        return None if found is not None else why

    # -- paths ----------------------------------------------------------------------------------------------

    @property
    def volume_path(self) -> str:
        """The served root as afpd sees it."""
        return f"{INNER_BASE}/volume"

    @property
    def inner_dir(self) -> str:
        """This server's folder as afpd sees it."""
        return f"{INNER_BASE}/state"

    @property
    def conf_path(self) -> Path:
        return self.dir / "conf" / "afp.conf"

    # -- config ---------------------------------------------------------------------------------------------

    def config_text(self) -> str:
        creds = self.ctx.credentials
        uams = ["uams_dhx2.so", "uams_clrtxt.so"] + (["uams_guest.so"] if self.guest else [])
        glob = {
            "afp port": str(self.ctx.ports["afp"]),
            "afp listen": self.ctx.bind,
            "uam list": " ".join(uams),
            "zeroconf": "no",
            "spotlight": "no",
            "afpstats": "no",
            "save password": "no",
            "set password": "no",
            "log file": f"{self.inner_dir}/conf/afpd.log",
            "log level": "default:note",
            "vol dbpath": f"{self.inner_dir}/cnid/",
            "server name": "workbench",
            # a client that vanished is not kept waiting for its return (the default keeps it 24 hours)
            "disconnect time": "0",
            "map acls": "none",
        }
        glob.update(self.admin_settings())
        if self.guest:
            glob["guest account"] = GUEST_ACCOUNT
        share = {
            "path": self.volume_path,
            "cnid scheme": "last",
            "valid users": f"{creds.user} {GUEST_ACCOUNT}" if self.guest else creds.user,
            "follow symlinks": "no",
            "ea": "sys" if _xattrs_work(self.ctx.root) else "ad",
            # No AFP3 UNIX privileges: a client sets no mode (no setuid, setgid or sticky bit, nothing opened to
            # others); what it creates takes its parent's mode without execute bits. With them on, afpd runs
            # with umask 0 and creates files 0666 whatever the volume's umask says.
            "unix priv": "no",
            "acls": "no",
            "convert appledouble": "no",
            "time machine": "no",
            "stat vol": "yes",
        }
        lines = ["[Global]"]
        lines += [f"{k} = {conf_value(v)}" for k, v in glob.items()]
        lines += ["", f"[{conf_value(self.ctx.share)}]"]
        lines += [f"{k} = {conf_value(v)}" for k, v in share.items()]
        if self.has_guest_account:
            reference = {**share, "path": f"{self.inner_dir}/{REFERENCE_FOLDER}", "valid users": GUEST_ACCOUNT}
            lines += ["", f"[{REFERENCE_VOLUME}]", *(f"{k} = {conf_value(v)}" for k, v in reference.items())]
        return "\n".join(lines) + "\n"

    @property
    def has_guest_account(self) -> bool:
        """GUEST_ACCOUNT exists: on the served volume too (guest = True), or on REFERENCE_VOLUME alone."""
        return self.guest or self.ctx.afp_reference

    # -- accounts -------------------------------------------------------------------------------------------

    def _base_file(self, name: str) -> list[str]:
        return self.netatalk.path(f"/etc/{name}").read_text().splitlines()

    def admin_settings(self) -> dict[str, str]:
        """afp.conf's [Global] keys that let a served root log in (see ADMIN_UID)."""
        return {"admin group": ADMIN_GROUP} if self._served_ids()[0] == 0 else {}

    def _served_ids(self) -> tuple[int, int]:
        """(uid, gid) files of the served user get: the host account of that name, else whoever runs workbench."""
        try:
            known = pwd.getpwnam(self.ctx.credentials.user)
            return known.pw_uid, known.pw_gid
        except KeyError:
            return os.getuid(), os.getgid()

    def _write_accounts(self) -> None:
        """passwd, group and shadow of the netatalk system, with the served user's uid and gid, every
        password locked; then the served user's password set by chpasswd from stdin."""
        creds = self.ctx.credentials
        if ":" in creds.user or "\n" in creds.user or not creds.user:
            raise AuthError(f"AFP: the user name {creds.user!r} cannot be an account name", "choose another user")
        if len(creds.password.encode()) > PASSWORD_MAX_BYTES or "\n" in creds.password:
            raise AuthError("AFP: the password cannot be set (one line, at most 256 bytes)", "choose another")
        uid, gid = self._served_ids()
        etc = self.dir / "accounts" / "etc"
        users = [line for line in self._base_file("passwd") if line and not line.startswith(f"{creds.user}:")]
        groups = [line for line in self._base_file("group") if line]
        if uid == 0:
            if not any(line.split(":")[2:3] == ["0"] for line in users):
                users.append("workbench-root:x:0:0::/:/usr/sbin/nologin")
            uid, gid = ADMIN_UID, ADMIN_GID
            groups.append(f"{ADMIN_GROUP}:x:{gid}:{creds.user}")
        users = [line for line in users if line.split(":")[2:3] != [str(uid)]]
        users.append(f"{creds.user}:x:{uid}:{gid}::/:/usr/sbin/nologin")
        if self.has_guest_account:
            users = [line for line in users if line.split(":")[2:3] != [str(GUEST_UID)]]
            users.append(f"{GUEST_ACCOUNT}:x:{GUEST_UID}:{GUEST_UID}::/:/usr/sbin/nologin")
            groups.append(f"{GUEST_ACCOUNT}:x:{GUEST_UID}:")
        if not any(line.split(":")[2:3] == [str(gid)] for line in groups):
            groups.append(f"workbench:x:{gid}:")
        (etc / "passwd").write_text("\n".join(users) + "\n")
        (etc / "group").write_text("\n".join(groups) + "\n")
        shadow = [f"{line.split(':')[0]}:{self._shadow_field(line)}:20000:0:99999:7:::" for line in users]
        (etc / "shadow").write_text("\n".join(shadow) + "\n")
        (etc / "gshadow").write_text("".join(f"{line.split(':')[0]}:!::\n" for line in groups))
        for name in ("passwd", "group"):
            (etc / name).chmod(0o644)
        for name in ("shadow", "gshadow"):
            (etc / name).chmod(0o600)
        done = subprocess.run(
            ["chpasswd", "-c", "SHA512", "-R", str(self.dir / "accounts")],
            input=f"{creds.user}:{creds.password}\n".encode(),
            capture_output=True,
            timeout=STEP_TIMEOUT_S,
        )
        if done.returncode != 0:
            why = done.stderr.decode(errors="replace").strip().splitlines() or ["no message"]
            raise AuthError(f"AFP: chpasswd could not set the password of {creds.user!r}: {why[-1]}", "")

    def _shadow_field(self, passwd_line: str) -> str:
        """Every account locked, except the guest account's empty password (see GUEST_ACCOUNT)."""
        return "" if self.has_guest_account and passwd_line.startswith(f"{GUEST_ACCOUNT}:") else LOCKED

    # -- life -----------------------------------------------------------------------------------------------

    def prepare(self) -> None:
        self.ctx.root.mkdir(parents=True, exist_ok=True)
        for sub in _PRIVATE_FOLDERS:
            (self.dir / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        for point in ("volume", "state"):
            self.netatalk.path(f"{INNER_BASE}/{point}").mkdir(parents=True, exist_ok=True)
        self.netatalk.path(INNER_BASE).chmod(0o755)  # a guest session's afpd passes through it
        self._write_accounts()
        self.conf_path.write_text(self.config_text())
        self.conf_path.chmod(0o600)
        if self.has_guest_account:  # afpd, once it runs as the guest, looks at its config again (no secret in it)
            for folder in (self.dir, self.dir / "conf"):
                folder.chmod(0o711)
            self.conf_path.chmod(0o644)
            reference = self.dir / REFERENCE_FOLDER  # the guest account's own, emptied by nothing but its tool
            reference.mkdir(exist_ok=True, mode=0o700)
            os.chown(reference, GUEST_UID, GUEST_UID)

    def command(self) -> list[str]:
        root = str(self.netatalk.root) if self.netatalk.root is not None else ""
        master = ["/usr/sbin/netatalk", "-d", "-F", f"{self.inner_dir}/conf/afp.conf"]
        return [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "/bin/sh",
            "-c",
            _ENTER,
            "afpd-enter",
            root,
            str(self.ctx.root),
            self.volume_path,
            str(self.dir),
            self.inner_dir,
            *master,
        ]
