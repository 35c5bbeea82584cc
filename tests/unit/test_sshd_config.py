"""The served sshd's configuration: written for this sshd, and without SetEnv where an older sshd refuses it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import loopback_context
from workbench.server.daemons.sshd import Sshd


def _fake_sshd(tmp_path: Path, refuses: str | None) -> Path:
    """An sshd stand-in for its configuration check (`-t`): it refuses one keyword, as an older sshd would."""
    script = tmp_path / "sshd"
    body = f'echo "$3: line 9: Bad configuration option: {refuses}" >&2; exit 255' if refuses else "exit 0"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


@pytest.mark.parametrize(("refuses", "kept"), [(None, True), ("SetEnv", False), ("Compression", True)])
def test_setenv_is_left_out_only_for_an_sshd_that_refuses_it(tmp_path: Path, refuses: str | None, kept: bool) -> None:
    server = Sshd(loopback_context(tmp_path, "ssh"))
    server.binary = str(_fake_sshd(tmp_path, refuses))
    server.prepare()
    lines = server.config_path.read_text().splitlines()
    assert ("SetEnv SHLVL=1" in lines) is kept
    assert any(line.startswith("ForceCommand ") for line in lines)  # the gate stays whatever the check said
