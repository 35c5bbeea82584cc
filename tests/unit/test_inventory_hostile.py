"""A fleet's --clients file and a --via-ssh destination from outside: a missing file is not-found (exit 5), a
control character anywhere in a host line is one usage error naming the file and line with the text as repr,
refused before ssh (or `ssh -G`) is ever run; valid files still parse."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from workbench.core import far_servers, ssh_session
from workbench.core.fleet_controller import read_inventory
from workbench.core.ssh_session import Destination
from workbench.shared import sshconfig
from workbench.shared.errors import ExitCode, NotFoundError, UsageError


@pytest.fixture(autouse=True)
def no_ssh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing here may run ssh: a refusal that slipped through fails on this tripwire, never on the network."""

    def tripwire(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"ssh was run: {args!r}")

    monkeypatch.setattr(subprocess, "Popen", tripwire)
    monkeypatch.setattr(subprocess, "run", tripwire)
    monkeypatch.setattr(sshconfig, "resolve", tripwire)


def test_a_missing_clients_file_is_not_found_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nonexist"
    with pytest.raises(NotFoundError) as info:
        read_inventory(missing)
    assert info.value.exit_code == ExitCode.NOT_FOUND == 5
    assert info.value.message == f"--clients {missing} does not exist"


def test_a_clients_directory_is_still_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--clients .*: Is a directory"):
        read_inventory(tmp_path)


@pytest.mark.parametrize(
    ("text", "number", "shown"),
    [
        ("\x1b[31mhost\n", 1, r"'\x1b[31mhost'"),
        ("desk1\nhost ansible_user=\x1b[31mx\n", 2, r"'host ansible_user=\x1b[31mx'"),
        ("desk1 ansible_become_pass=se\x07cret\n", 1, r"'desk1 ansible_become_pass=se\x07cret'"),
        ("alice\x00@desk1\n", 1, r"'alice\x00@desk1'"),
        ("de\x7fsk1\n", 1, r"'de\x7fsk1'"),
        ("de\x9bsk1\n", 1, r"'de\x9bsk1'"),  # the 8-bit CSI
        ("de\x85sk1\n", 1, r"'de\x85sk1'"),  # NEL: splitlines() and split() would break the line here
        ("desk1\x1cdesk2\n", 1, r"'desk1\x1cdesk2'"),  # a file separator: split() takes it for a space
        ("desk1\x0bdesk2\n", 1, r"'desk1\x0bdesk2'"),  # a vertical tab
        ("desk1\x1c\n", 1, r"'desk1\x1c'"),  # str.strip() would drop it silently
        ("desk1\n\x85\n", 2, r"'\x85'"),  # a line of nothing but a control character
        ("[desktops]\ndesk1\n\n[lap\x1btops]\n", 4, r"'[lap\x1btops]'"),
        ("[all:vars]\nansible_user=\x1b]0\x07\n", 2, r"'ansible_user=\x1b]0\x07'"),  # a vars section too
    ],
)
def test_a_control_character_in_a_clients_file_is_refused_naming_file_and_line(
    tmp_path: Path, text: str, number: int, shown: str
) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text(text, newline="")
    with pytest.raises(UsageError) as info:
        read_inventory(hosts)
    assert info.value.message == f"--clients {hosts} line {number}: {shown} has a control character"
    assert info.value.exit_code == ExitCode.USAGE
    one_line = info.value.one_line()
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in one_line), one_line


def test_a_control_character_in_a_comment_is_left_alone(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("# \x1b[31mred\ndesk1  ; \x07\n")
    assert [(d.alias, d.user) for d in read_inventory(hosts)] == [("desk1", None)]


def test_valid_files_still_parse_with_tabs_and_crlf(tmp_path: Path) -> None:
    hosts = tmp_path / "inventory.ini"
    hosts.write_bytes(b"[desktops]\r\ndesk1\tansible_user=bob\r\nalice@desk2\r\n\r\n[desktops:vars]\r\nx=1\r\n")
    assert [(d.alias, d.user) for d in read_inventory(hosts)] == [("desk1", "bob"), ("desk2", "alice")]
    plain = tmp_path / "hosts"
    plain.write_text("desk1\nbob@lap1 # his\ndésk-ü\n")
    assert [(d.alias, d.user) for d in read_inventory(plain)] == [("desk1", None), ("lap1", "bob"), ("désk-ü", None)]


@pytest.mark.parametrize("text", ["\x1b[31mnas", "alice@nas\x1b]0;x\x07", "al\x00ice@nas", "nas\x7f", "nas\x9b1m"])
def test_a_control_character_in_via_ssh_is_refused(text: str) -> None:
    with pytest.raises(UsageError) as info:
        Destination.parse(text)
    assert info.value.message == f"--via-ssh {text!r} has a control character"


def test_via_ssh_is_refused_before_ssh_dash_g_runs() -> None:
    # far_servers parses the destination first; the autouse tripwire on sshconfig.resolve fails a later refusal
    with pytest.raises(UsageError, match="has a control character"), far_servers.far_servers("\x1b[2Jnas"):
        pass


@pytest.mark.parametrize(("text", "alias", "user"), [("nas", "nas", None), ("alice@nas", "nas", "alice")])
def test_a_plain_via_ssh_still_parses(text: str, alias: str, user: str | None) -> None:
    assert ssh_session.Destination.parse(text) == Destination(alias, user)
