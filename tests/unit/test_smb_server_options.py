"""`lab --smb-server`: what it accepts, what it refuses in one line, and the smb.conf it makes (no lab)."""

from __future__ import annotations

import dataclasses

import pytest

from tests.helpers import loopback_context
from workbench.server.daemons.smbd import Smbd, SmbServerOptions
from workbench.shared.errors import UsageError


def test_each_key_maps_to_its_smb_conf_setting() -> None:
    options = SmbServerOptions.parse("signing=required,encryption=required,max-dialect=3.0")
    assert options.conf() == {
        "server signing": "mandatory",
        "server smb encrypt": "required",
        "server max protocol": "SMB3_00",
    }
    assert SmbServerOptions.parse(" max-dialect = 2.0.2 ").conf()["server max protocol"] == "SMB2_02"
    # what is not given stays at workbench's smbd's own: signing and encryption offered, SMB 3.1.1
    assert SmbServerOptions.parse("signing=required").to_json() == {
        "signing": "required",
        "encryption": "offered",
        "max_dialect": "3.1.1",
    }


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "is not KEY=VALUE"),
        ("signing", "is not KEY=VALUE"),
        ("sign=required", "is not KEY=VALUE"),
        ("signing=yes", "signing='yes' is unknown"),
        ("max-dialect=SMB2_02", "is unknown"),
        ("signing=required,signing=offered", "given twice"),
        ("encryption=required,max-dialect=2.1", "has no encryption"),
    ],
)
def test_bad_input_is_refused_in_one_line(text: str, says: str) -> None:
    with pytest.raises(UsageError, match=says) as caught:
        SmbServerOptions.parse(text)
    assert "\n" not in caught.value.one_line() and "--smb-server" in caught.value.one_line()


def test_the_smbd_config_carries_the_options_and_keeps_its_defaults_without(tmp_path) -> None:
    plain = Smbd(loopback_context(tmp_path / "a", "smb")).config_text()
    assert "server max protocol = SMB3_11" in plain and "server signing = auto" in plain
    asked = SmbServerOptions.parse("signing=required,max-dialect=2.0.2").to_json()
    ctx = dataclasses.replace(loopback_context(tmp_path / "b", "smb"), smb_server=asked)
    text = Smbd(ctx).config_text()
    assert "server signing = mandatory" in text and "server max protocol = SMB2_02" in text
    assert "server min protocol = SMB2_02" in text
    bad = dataclasses.replace(ctx, smb_server={"signing": "sometimes"})
    with pytest.raises(UsageError):
        Smbd(bad).config_text()
