"""AFP through mount_afp: command line, URL encoding, password handling and unmount-on-failure.

No Mac here, so the mount commands go to a recording runner (a fake for pure logic: the mount point
is a plain directory, so the copy code still runs for real). The pseudo-terminal that types the
password is tested for real against a program that reads its terminal the way mount_afp -i does.
"""

from __future__ import annotations

import ipaddress
import os
import stat
import sys
from pathlib import Path

import pytest

from tests.helpers import write_random
from workbench.protocols import registry
from workbench.protocols.base import ClientOptions
from workbench.protocols.mount import AfpClient, CommandRunner, Outcome
from workbench.shared.credentials import Credentials
from workbench.shared.errors import AuthError, NetworkError, NotFoundError, UnavailableError, WorkbenchError
from workbench.shared.target import Target

PASSWORD = "pa:ss@w/rd ü;AUTH=x"
MOUNTED = Outcome(0)


class RecordingRunner(CommandRunner):
    """Stands for a Mac: records every command, mounts by marking the path, unmounts as scripted."""

    def __init__(self, mount: Outcome = MOUNTED, stays_mounted_after: int = 0, mounted_anyway: bool = False):
        self.mount_outcome = mount
        self.stays_mounted_after = stays_mounted_after  # how many unmount commands fail before one works
        self.mounted_anyway = mounted_anyway  # the mount went through even though the command failed
        self.calls: list[tuple[list[str], str | None]] = []
        self.mounted: set[Path] = set()
        self.mode_seen: int | None = None

    def unavailable(self, client_cls) -> str | None:
        return None

    def is_mounted(self, path: Path) -> bool:
        return path in self.mounted

    def run_with_prompt(self, argv, *, timeout: float, answer: str) -> Outcome:
        self.calls.append((list(argv), answer))
        mountpoint = Path(argv[-1])
        self.mode_seen = stat.S_IMODE(mountpoint.stat().st_mode)
        if self.mount_outcome.ok or self.mounted_anyway:
            self.mounted.add(mountpoint)
        return self.mount_outcome

    def run(self, argv, *, timeout: float, stdin_text: str | None = None) -> Outcome:
        self.calls.append((list(argv), stdin_text))
        if self.stays_mounted_after > 0:
            self.stays_mounted_after -= 1
            return Outcome(1, "umount: resource busy")
        self.mounted.discard(Path(argv[-1]))
        return Outcome(0)


def target(user: str = "jo", share: str = "workbench", host: str = "127.0.0.1", **ports: int) -> Target:
    return Target(host, Credentials(user, PASSWORD), ports=ports, share=share)


@pytest.mark.parametrize(
    ("user", "share", "host", "expected"),
    [
        ("jo", "workbench", "127.0.0.1", "afp://jo@127.0.0.1:548/workbench"),
        ("jo smith", "My Share", "127.0.0.1", "afp://jo%20smith@127.0.0.1:548/My%20Share"),
        ("a@b:c", "x/y;z", "127.0.0.1", "afp://a%40b%3Ac@127.0.0.1:548/x%2Fy%3Bz"),
        ("user;AUTH=No User Authent", "s", "127.0.0.1", "afp://user%3BAUTH%3DNo%20User%20Authent@127.0.0.1:548/s"),
        ("Jürgen", "Fotos Ü", "127.0.0.1", "afp://J%C3%BCrgen@127.0.0.1:548/Fotos%20%C3%9C"),
        ("jo", "workbench", "::1", "afp://jo@[::1]:548/workbench"),
    ],
)
def test_url_encodes_user_share_and_special_characters(user: str, share: str, host: str, expected: str) -> None:
    assert AfpClient(target(user, share, host)).url() == expected


def test_url_takes_the_afp_port_from_the_target() -> None:
    assert AfpClient(target(afp=10548)).url() == "afp://jo@127.0.0.1:10548/workbench"


def test_mount_is_interactive_soft_private_and_keeps_the_password_off_argv() -> None:
    runner = RecordingRunner()
    client = AfpClient(target("jo smith"), runner=runner)
    client.connect()
    try:
        mountpoint = client.mountpoint
        assert mountpoint is not None
        argv, answer = runner.calls[0]
        assert argv == [
            "mount_afp",
            "-i",
            "-s",
            "-o",
            "nobrowse",
            "afp://jo%20smith@127.0.0.1:548/workbench",
            str(mountpoint),
        ]
        assert answer == PASSWORD  # typed at the prompt...
        assert all(PASSWORD not in word and "pa:ss" not in word for word in argv)  # ...never on argv
        assert runner.mode_seen == 0o700
    finally:
        client.close()
    assert runner.calls[-1][0] == ["umount", str(mountpoint)]
    assert not mountpoint.exists()


def test_copies_go_through_the_mount_point_and_it_is_unmounted_after(tmp_path: Path) -> None:
    runner = RecordingRunner()
    data = write_random(tmp_path / "up.bin", 3 * 1024 * 1024 + 7)
    seen: list[int] = []
    with AfpClient(target(), ClientOptions(block_size=1 << 20), runner=runner) as client:
        client.mkdir("incoming/a")
        client.upload(tmp_path / "up.bin", "incoming/a/up.bin", seen.append)
        client.download("incoming/a/up.bin", tmp_path / "down.bin", seen.append)
        mountpoint = client.mountpoint
        assert mountpoint is not None
        assert (mountpoint / "incoming" / "a" / "up.bin").read_bytes() == data
        # safety: delete what we copied before unmounting so the (plain) directory can be removed
        (mountpoint / "incoming" / "a" / "up.bin").unlink()
        (mountpoint / "incoming" / "a").rmdir()
        (mountpoint / "incoming").rmdir()
    assert (tmp_path / "down.bin").read_bytes() == data
    assert seen == ([1 << 20] * 3 + [7]) * 2
    assert runner.calls[-1][0][0] == "umount"
    assert not mountpoint.exists()


def test_a_failed_copy_still_unmounts(tmp_path: Path) -> None:
    runner = RecordingRunner()
    client = AfpClient(target(), runner=runner)
    with pytest.raises(NotFoundError), client:
        mountpoint = client.mountpoint
        client.download("files/missing.bin", tmp_path / "x.bin", lambda n: None)
    assert runner.calls[-1][0] == ["umount", str(mountpoint)]
    assert not runner.mounted and not mountpoint.exists()


def test_paths_may_not_leave_the_share() -> None:
    with AfpClient(target(), runner=RecordingRunner()) as client, pytest.raises(WorkbenchError, match="leaves"):
        client.mkdir("../outside")


def test_a_mount_that_timed_out_but_went_through_is_unmounted() -> None:
    runner = RecordingRunner(mount=Outcome(None, "Password:"), mounted_anyway=True)
    client = AfpClient(target(), runner=runner)
    with pytest.raises(NetworkError, match="did not finish"):
        client.connect()
    mountpoint = Path(runner.calls[0][0][-1])
    assert runner.calls[-1][0] == ["umount", str(mountpoint)]
    assert not mountpoint.exists() and client.mountpoint is None


def test_busy_mount_falls_back_to_diskutil_force() -> None:
    runner = RecordingRunner(stays_mounted_after=1)
    with AfpClient(target(), runner=runner) as client:
        mountpoint = client.mountpoint
    assert [argv for argv, _ in runner.calls[1:]] == [
        ["umount", str(mountpoint)],
        ["diskutil", "unmount", "force", str(mountpoint)],
    ]
    assert not mountpoint.exists()


def test_an_unmountable_share_is_reported_with_what_to_run() -> None:
    runner = RecordingRunner(stays_mounted_after=2)
    client = AfpClient(target(), runner=runner)
    client.connect()
    mountpoint = client.mountpoint
    with pytest.raises(WorkbenchError, match="could not unmount") as err:
        client.close()
    assert f"umount {mountpoint}" in err.value.hint
    client.close()  # safe to call again: retries and now succeeds
    assert not mountpoint.exists()


@pytest.mark.parametrize(
    ("outcome", "error"),
    [
        (Outcome(None, "Password:\n", reprompted=True), AuthError),
        (Outcome(1, "mount_afp: AFPMountURL returned error -5023, errno is 9"), AuthError),
        (Outcome(1, "mount_afp: AFPMountURL returned error -1, errno is 61"), NetworkError),
        (Outcome(1, "mount_afp: AFPMountURL returned error -5018, errno is 2"), NotFoundError),
        (Outcome(None, ""), NetworkError),
        (Outcome(1, "mount_afp: something odd"), WorkbenchError),
    ],
)
def test_mount_failures_become_one_line_errors(outcome: Outcome, error: type) -> None:
    runner = RecordingRunner(mount=outcome)
    client = AfpClient(target(), runner=runner)
    with pytest.raises(error) as err:
        client.connect()
    assert "\n" not in err.value.one_line() and err.value.hint
    assert PASSWORD not in err.value.one_line()
    assert client.mountpoint is None and not Path(runner.calls[0][0][-1]).exists()


@pytest.mark.skipif(sys.platform == "darwin", reason="checks the message given on other systems")
def test_unavailable_off_macos() -> None:
    assert AfpClient.unavailable_reason() == "mount_afp is macOS only"
    entry = next(e for e in registry.KNOWN_CLIENTS if e.label == "afp/mount_afp")
    assert registry.load(entry) == "mount_afp is macOS only"
    client = AfpClient(target())
    with pytest.raises(UnavailableError, match="macOS only"):
        client.connect()
    client.close()


# --- the pseudo-terminal that types the password (real processes) ---------------------------------

PROMPTER = """
import getpass, sys
first = getpass.getpass("Password for jo: ")  # reads /dev/tty, like readpassphrase in mount_afp -i
if first != sys.argv[1]:
    getpass.getpass("Password for jo: ")
print("mounted with", len(first), "characters")
"""


def test_password_is_typed_at_the_terminal_prompt() -> None:
    outcome = CommandRunner().run_with_prompt([sys.executable, "-c", PROMPTER, PASSWORD], timeout=20, answer=PASSWORD)
    assert outcome.ok, outcome
    assert f"mounted with {len(PASSWORD)} characters" in outcome.output
    assert PASSWORD not in outcome.output  # not echoed


def test_a_second_prompt_means_the_password_was_refused() -> None:
    outcome = CommandRunner().run_with_prompt([sys.executable, "-c", PROMPTER, "other"], timeout=20, answer=PASSWORD)
    assert outcome.reprompted and not outcome.ok
    assert PASSWORD not in outcome.output


def test_a_command_that_never_finishes_is_killed_at_the_deadline() -> None:
    outcome = CommandRunner().run_with_prompt(
        [sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.5, answer=PASSWORD
    )
    assert outcome.timed_out


# --- on a Mac, against a real AFP server ---------------------------------------------------------


def _afp_server() -> tuple[str, int, str] | None:
    """WORKBENCH_AFP_TEST=host:port/share names a loopback AFP server (e.g. netatalk) to test against."""
    spec = os.environ.get("WORKBENCH_AFP_TEST", "")
    if not spec or "/" not in spec:
        return None
    hostport, share = spec.split("/", 1)
    host, _, port = hostport.rpartition(":")
    return host, int(port), share


@pytest.mark.macos
@pytest.mark.skipif(sys.platform != "darwin", reason="mount_afp exists only on macOS")
@pytest.mark.skipif(_afp_server() is None, reason="set WORKBENCH_AFP_TEST=host:port/share and WORKBENCH_PASSWORD")
def test_mount_afp_copies_for_real(tmp_path: Path) -> None:
    host, port, share = _afp_server()  # type: ignore[misc]
    if not ipaddress.ip_address(host).is_loopback:
        pytest.skip("only loopback servers are tested")
    creds = Credentials(os.environ.get("WORKBENCH_USER", os.environ.get("USER", "")), os.environ["WORKBENCH_PASSWORD"])
    data = write_random(tmp_path / "up.bin", 3 * 1024 * 1024 + 1)
    with AfpClient(Target(host, creds, ports={"afp": port}, share=share)) as client:
        client.mkdir("workbench-test")
        client.upload(tmp_path / "up.bin", "workbench-test/up.bin", lambda n: None)
        client.download("workbench-test/up.bin", tmp_path / "down.bin", lambda n: None)
        os.unlink(client.mountpoint / "workbench-test" / "up.bin")  # type: ignore[operator]
    assert (tmp_path / "down.bin").read_bytes() == data
