"""Every command honours every config key the same way: each key of the settings table, set in a config file and
(where it is a flag) typed, reaches what `run`, `fleet` and `lab` build from it (the plan, a fleet member's plan,
the lab's link request) alike, and differs from the default. The settings are resolved as the commands resolve
them: through the options the settings table makes (workbench.cli.options) and workbench.core.config.resolve.
A new setting fails here until it says how each of its commands honours it (HONOURED below) or has a
`meta` key in the run's plan object. And docs/config.md is what the table renders now."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer

from workbench.cli.options import with_settings
from workbench.core.config import build_plan, draft_plan, resolve, shape, url_plan
from workbench.core.plan import Plan
from workbench.core.settings import BY_NAME, SETTINGS, Setting, Settings, config_page, plan_json, typed_value
from workbench.lab.run import lab_request
from workbench.shared import credentials as creds_mod
from workbench.shared import target as target_mod
from workbench.shared.credentials import Credentials
from workbench.shared.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]


def capture(command: str, args: list[str]) -> Settings:
    """The Settings a command decorated as `run`, `fleet` and `lab` are would receive for these arguments."""
    seen: dict[str, Settings] = {}
    app = typer.Typer()

    @app.command()
    @with_settings(command)
    def cmd(ctx: typer.Context, settings: Settings) -> None:
        seen["settings"] = settings

    app(args, standalone_mode=False)
    return seen["settings"]


# ---------------------------------------------------------------- what each command builds from its settings
def run_plans(settings: Settings) -> tuple[Plan, Plan]:
    """`run --host` (or --target) and `run URL`: the two plans a run makes."""
    served = settings if settings["host"] or settings["target"] else settings.replace(host="127.0.0.1")
    return build_plan(served), url_plan(settings)


def fleet_plans(settings: Settings) -> tuple[Plan, Plan]:
    """The controller's plan and a member's, made from the job as workbench.core.fleet_member makes it."""
    member = resolve("fleet", settings.for_members(), typed=settings.given)
    return url_plan(settings), url_plan(member)


def lab_plans(settings: Settings) -> tuple[Plan, ...]:
    return (shape(settings),)


PLANS: dict[str, Callable[[Settings], tuple[Plan, ...]]] = {"run": run_plans, "fleet": fleet_plans, "lab": lab_plans}


class Agreeing(tuple[Any, ...]):
    """One value from each plan a command makes: a given setting must reach all alike (a fleet member's plan is
    the controller's; `run --host` and `run URL` take it the same way). Defaults may differ (`run URL`: every
    client)."""


def from_plans(read: Callable[[Plan], Any]) -> Callable[[str, Settings], Any]:
    return lambda command, settings: Agreeing(read(plan) for plan in PLANS[command](settings))


def lab_field(name: str) -> Callable[[str, Settings], Any]:
    return lambda command, settings: getattr(lab_request(settings), name)


def as_read(name: str) -> Callable[[str, Settings], Any]:
    """A setting the command reads from its settings as is (workbench.cli.app, workbench.core.session)."""
    return lambda command, settings: settings[name]


def _served_target(command: str, settings: Settings) -> Any:
    target = run_plans(settings)[0].target
    return target.host, target.credentials.user


# How each command honours a setting that is not in the run's plan object (a `meta` setting is read from there).
HONOURED: dict[str, Callable[[str, Settings], Any]] = {
    "host": _served_target,
    "target": _served_target,
    "credentials": _served_target,
    "tcp_duration": from_plans(lambda plan: plan.tcp_duration),
    "goodput_duration": as_read("goodput_duration"),  # the lab's link meter (workbench.lab.run), not the plan's
    "stall_timeout": from_plans(lambda plan: plan.options.stall_timeout_s),
    "files": from_plans(lambda plan: plan.files_dir),
    "iperf3": as_read("iperf3"),  # a URL run's baseline server; a fleet job carries it to the members
    "skip_iperf3": as_read("skip_iperf3"),  # a served run's plan (build_plan: test_a_served_plan_skips_iperf3…)
    "insecure_host_keys": from_plans(lambda plan: plan.options.verify_host_keys),
    "link": lab_field("preset"),
    **{name: lab_field(name) for name in ("rate", "rtt", "loss", "mtu", "cc", "window_sweep", "rate_up")},
    **{name: lab_field(name) for name in ("rate_down", "client_window", "stall", "servers")},
    **{name: lab_field(name) for name in ("smb_server", "server_cpu")},
    "scenario": as_read("scenario"),
    "quick": as_read("quick"),
    "clients": as_read("clients"),
    "offload": lab_field("offload"),
    "link_breaks": lab_field("link_breaks"),
}
# (setting, command) pairs the command takes and does not use, with the reason.
UNUSED = {
    ("files", "fleet"): "each member makes its test files in its own files directory",
}


def honoured(setting: Setting, command: str, settings: Settings) -> Any:
    if setting.name in HONOURED:
        return HONOURED[setting.name](command, settings)
    meta = setting.meta
    assert meta, f"say how {setting.name} is honoured: a meta key, or an entry in HONOURED"
    return from_plans(lambda plan: plan_json(plan)[meta])(command, settings)


# ---------------------------------------------------------------- sample values, as a file and as a flag
@pytest.fixture
def samples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Each key's config value: its declared example, or a real file where one is read."""
    monkeypatch.setenv("WORKBENCH_PASSWORD", "not-a-secret")  # a served run's login when no file is named
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))  # no state directory's target file
    creds = tmp_path / "credentials.json"
    creds_mod.write_private(creds, Credentials("alice", "pw"))
    target = target_mod.write(tmp_path / "served", "192.0.2.7", {"http": 8181}, tmp_path, "share")
    values = {s.name: tomllib.loads(s.example)[s.name] for s in SETTINGS if s.config}
    values.update(target=str(target), credentials=str(creds), files=str(tmp_path / "files"))
    return values


def flag_args(setting: Setting, value: Any) -> list[str]:
    if value is True:
        return [setting.flag_text]
    if isinstance(value, list) and setting.toml is not None and setting.type is not str:
        return [arg for item in value for arg in (setting.flag_text, str(item))]
    text = ",".join(value) if isinstance(value, list) else str(value)
    return [setting.flag_text, text]


CASES = [(s.name, c) for s in SETTINGS if s.config for c in s.commands if (s.name, c) not in UNUSED]


@pytest.mark.parametrize(("name", "command"), CASES, ids=[f"{n}-{c}" for n, c in CASES])
def test_every_config_key_is_honoured_by_every_command_as_its_flag(
    name: str, command: str, samples: dict[str, Any], tmp_path: Path
) -> None:
    setting = BY_NAME[name]
    value = samples[name]
    assert typed_value(setting, value) != typed_value(setting, setting.default_for(command)), (
        f"{name}'s example must not be its {command} default: the test could not tell it was honoured"
    )
    config = tmp_path / "config.toml"
    config.write_text(f"{name} = {_toml(value)}\n")
    from_file = capture(command, ["--config", str(config)])
    assert name in from_file.from_file and from_file.where(name) == f"config {config} key '{name}'"
    default = capture(command, [])
    got = honoured(setting, command, from_file)
    if isinstance(got, Agreeing):
        assert all(v == got[0] for v in got), f"{command}'s plans take {name} differently: {got}"
    assert got != honoured(setting, command, default), f"{command} ignores the config key {name}"
    if setting.flag:
        typed = capture(command, flag_args(setting, value))
        assert name in typed.typed
        assert honoured(setting, command, typed) == got, f"{command}: --{name} and the config key differ"
        # a typed flag wins over the file
        over = capture(command, ["--config", str(config), *flag_args(setting, value)])
        assert name in over.typed and name not in over.from_file


def test_each_unused_pair_names_a_command_of_the_setting() -> None:
    assert all(command in BY_NAME[name].commands for name, command in UNUSED)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


def test_a_flag_only_setting_is_refused_in_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("insecure_host_keys = true\n")
    with pytest.raises(UsageError) as info:
        capture("run", ["--config", str(config)])
    assert "unknown key 'insecure_host_keys'" in info.value.message


def test_a_config_key_another_command_uses_is_checked_and_left_alone(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('rate = "1gbit"\nhost = "192.0.2.7"\n')
    run = capture("run", ["--config", str(config)])
    lab = capture("lab", ["--config", str(config)])
    assert (run["rate"], run["host"]) == (None, "192.0.2.7") and (lab["rate"], lab["host"]) == ("1gbit", None)
    config.write_text("mtu = 100\n")  # out of range: refused by every command, also one that does not use it
    with pytest.raises(UsageError, match="mtu"):
        capture("run", ["--config", str(config)])


def test_a_config_files_ports_reach_a_served_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_PASSWORD", "not-a-secret")
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    config = tmp_path / "config.toml"
    config.write_text('host = "192.0.2.7"\n[ports]\nhttp = 9000\n')
    assert build_plan(capture("run", ["--config", str(config)])).target.ports["http"] == 9000


@pytest.mark.parametrize("command", ["run", "fleet", "lab"])
def test_small_none_means_no_small_file_set_for_every_command(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_PASSWORD", "not-a-secret")
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    typed = capture(command, ["--small", "none", "--sizes", "1M"])
    config = tmp_path / "config.toml"
    config.write_text('small = "none"\nsizes = "1M"\n')
    from_file = capture(command, ["--config", str(config)])
    for settings in (typed, from_file):
        assert settings["small"] == [] and all(plan.small_sets == () for plan in PLANS[command](settings))


@pytest.mark.parametrize("command", ["run", "fleet", "lab"])
def test_small_sets_may_be_joined_by_commas_as_sizes_are(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_PASSWORD", "not-a-secret")
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    wanted = ["30x64K", "100x64K", "10x1M"]
    joined = capture(command, ["--small", "30x64K, 100x64K,", "--small", "10x1M", "--sizes", "1M"])
    config = tmp_path / "config.toml"
    config.write_text('small = ["30x64K,100x64K", "10x1M"]\nsizes = "1M"\n')
    from_file = capture(command, ["--config", str(config)])
    for settings in (joined, from_file):
        assert settings["small"] == wanted
        assert all([s.name for s in plan.small_sets] == wanted for plan in PLANS[command](settings))
    # a malformed one among them is refused by name, not as the whole list
    with pytest.raises(UsageError, match="'30y64K'"):
        PLANS[command](capture(command, ["--small", "30y64K,100x64K", "--sizes", "1M"]))
    # nothing between the commas, or 'none' beside sets, is refused with the flag or key that gave it
    with pytest.raises(UsageError, match=r"^--small: empty small-file set list"):
        capture(command, ["--small", " , ", "--sizes", "1M"])
    with pytest.raises(UsageError, match=r"^--small: 'none' given beside small-file sets"):
        capture(command, ["--small", "none,100x64K", "--sizes", "1M"])
    config.write_text('small = [""]\nsizes = "1M"\n')
    with pytest.raises(UsageError, match="key 'small': empty small-file set list"):
        capture(command, ["--config", str(config)])


def test_a_fleet_takes_the_config_files_iperf3_as_run_url_does(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('iperf3 = "127.0.0.1:5201"\n')
    for command in ("run", "fleet"):
        assert capture(command, ["--config", str(config)])["iperf3"] == "127.0.0.1:5201"


def test_the_settings_are_read_only() -> None:
    settings = resolve("run", {})
    with pytest.raises(TypeError):
        settings.by_name["repeat"] = 9  # type: ignore[index]
    with pytest.raises(AttributeError):
        settings.command = "lab"  # type: ignore[misc]


def test_a_plan_counts_its_copies_and_bytes() -> None:
    flags = {"protocols": "http/curl,ftp/curl", "sizes": "1M,2M", "small": ["10x1K"], "repeat": 4}
    settings = resolve("run", flags, typed=flags)
    plan = url_plan(settings)
    assert plan.copies_per_row == 5 and plan.copies() == 2 * 2 * 5 and plan.copies(clients=1) == 10
    assert plan.files_bytes == (1 << 20) + (2 << 20) + 10 * 1024


def test_docs_config_md_is_what_the_table_renders() -> None:
    assert (ROOT / "docs" / "config.md").read_text() == config_page(), "run scripts/gen_docs.py"
    check = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stderr
    for setting in SETTINGS:
        assert (f"| `{setting.name}` |" in config_page()) == setting.config


BAD_LINK = [('rate = "fast"', "rate"), ("loss = 1.0", "loss"), ('link = "moon"', "link"), ("mtu = 100", "mtu")]


@pytest.mark.parametrize(("line", "key"), BAD_LINK)
def test_a_bad_link_option_in_a_config_file_is_refused_naming_the_key(line: str, key: str, tmp_path: Path) -> None:
    from workbench.lab.run import validate_request

    config = tmp_path / "config.toml"
    config.write_text(line + "\n")
    with pytest.raises(UsageError) as info:
        validate_request(lab_request(capture("lab", ["--config", str(config)])))
    assert f"config {config} key '{key}'" in info.value.message


def test_a_served_plan_skips_iperf3_only_when_asked(samples: dict[str, Any]) -> None:
    asked = capture("run", ["--host", "127.0.0.1", "--skip-iperf3"])
    assert build_plan(asked).iperf3 is False
    assert build_plan(capture("run", ["--host", "127.0.0.1"])).iperf3 is True
    # a fleet member of servers workbench started makes its plan from the same draft (core.fleet_member)
    member = resolve("fleet", asked.for_members(), typed=asked.given)
    assert draft_plan(member)(build_plan(asked).target).iperf3 is False


@pytest.mark.parametrize("command", ["run", "fleet"])
def test_skip_iperf3_beside_a_url_runs_iperf3_is_refused_by_run_and_fleet_alike(command: str) -> None:
    both = capture(command, ["--iperf3", "nas.local:5201", "--skip-iperf3"])
    with pytest.raises(UsageError, match="--skip-iperf3 and --iperf3 ask for opposite things"):
        url_plan(both)  # run URL's and the fleet controller's plan, made before any member starts
