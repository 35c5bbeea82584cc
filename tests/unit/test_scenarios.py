"""The lab's scenarios as data: what each variant asks of the lab, and how the lab's figures are read (no lab)."""

from __future__ import annotations

import pytest

from workbench.core.results import Baseline, Result, Run, Sample
from workbench.lab import scenarios
from workbench.lab.run import link_spec, validate_request
from workbench.shared.errors import UsageError


def test_every_scenario_has_a_valid_link_and_plan_in_both_forms() -> None:
    for story in scenarios.SCENARIOS.values():
        assert story.summary and len(story.summary) <= 110 and story.story and story.published
        for quick in (False, True):
            planned = scenarios.requests(story, {}, set(), quick)
            assert [v.name for v, _ in planned] == [v.name for v in story.variants]
            for _, request in planned:
                spec = link_spec(request)  # every link option parses and validates
                assert spec.rate_bits_per_s > 0
                if quick:
                    assert request.settings["repeat"] <= 2 and request.settings["warmup"] == 0


def test_the_small_nas_story_caps_the_server_host_and_asks_its_smbd_for_each_variant() -> None:
    planned = scenarios.requests(scenarios.find("nas-signing"), {}, set(), False)
    assert {r.preset for _, r in planned} == {"gige"} and {r.server_cpu for _, r in planned} == {0.25}
    smb = [(v.name, r.smb_server) for v, r in planned]
    assert smb[0] == ("signing offered", None) and ("signing required", "signing=required") in smb
    assert any(s and "max-dialect=2.0.2" in s for _, s in smb) and any(s and "encryption=required" in s for _, s in smb)
    for _, request in planned:
        validate_request(request)  # every variant's --smb-server parses
        assert "http/" in request.settings["protocols"] and "pysmb" not in request.settings["protocols"]


def test_the_stories_links_are_what_they_say() -> None:
    ((_, wifi),) = scenarios.requests(scenarios.find("wifi-ac-64k"), {}, set(), False)
    spec = link_spec(wifi)
    assert spec.client_window_bytes == 65536 and wifi.client_window_services == ("smb", "afp")
    assert wifi.window_sweep == "32K,64K,128K,256K"
    gige = [link_spec(r) for _, r in scenarios.requests(scenarios.find("gige-jumbo"), {}, set(), False)]
    assert [(s.mtu, s.host_buffers) for s in gige] == [(1500, "default"), (1500, "raised"), (9000, "raised")]
    ((_, tb),) = scenarios.requests(scenarios.find("thunderbolt"), {}, set(), False)
    spec = link_spec(tb)
    assert spec.kernel_link() and spec.stall is not None and spec.stall.random
    # the published iperf figures are TCP goodput: the rates are set so that goodput is 5.3 and 5.7 Gbit/s
    assert spec.up_bits_per_s * 1448 / 1538 == pytest.approx(5.3e9, rel=0.01)
    assert spec.down_bits_per_s * 1448 / 1538 == pytest.approx(5.7e9, rel=0.01)
    wg = [r for _, r in scenarios.requests(scenarios.find("wireless-g"), {}, set(), False)]
    assert {(r.settings["profile"], r.settings["compress"]) for r in wg} == {
        (p, c) for p in ("text", "random") for c in (False, True)
    }
    assert link_spec(wg[0]).rate_bits_per_s * 1448 / 1538 == pytest.approx(12.5e6, rel=0.02)


def test_typed_settings_win_over_the_story_but_link_options_are_refused() -> None:
    story = scenarios.find("gige-jumbo")
    planned = scenarios.requests(story, {"sizes": "4M", "repeat": 7}, {"sizes"}, False)
    assert all(r.settings["sizes"] == "4M" for _, r in planned)  # typed: kept
    assert all(r.settings["repeat"] == 7 for _, r in planned)  # not set by the story: the user's
    # the reduced form shrinks what the user did not type, and keeps what they did
    quick = scenarios.requests(story, {"sizes": "1G", "repeat": 5}, {"sizes", "repeat"}, True)
    assert all((r.settings["sizes"], r.settings["repeat"], r.settings["warmup"]) == ("1G", 5, 0) for _, r in quick)
    with pytest.raises(UsageError, match="--rate, --rtt"):
        scenarios.requests(story, {}, {"rate", "rtt", "sizes"}, False)
    with pytest.raises(UsageError, match="no story called 'thunder'") as refused:
        scenarios.find("thunder")
    assert all(name in refused.value.hint for name in scenarios.SCENARIOS) and "'list'" in refused.value.hint


def _row(protocol: str, client: str, direction: str, size: int, rate_bytes_per_s: float, stalls: int = 0) -> Result:
    seconds = size / rate_bytes_per_s
    intervals = (10, 10) + (0,) * (3 * stalls) + (10, 10) if stalls else ()
    return Result(protocol, client, direction, f"{size >> 20}M", size, 1,
                  samples=(Sample(size, seconds, verified=True, intervals=intervals),))  # fmt: skip


def test_the_lab_figures_are_read_from_the_runs() -> None:
    run = Run(
        id=1,
        meta={},
        baseline=Baseline(up_bytes_per_s=60e6, down_bytes_per_s=62e6),
        results=(
            _row("smb", "smbclient", "download", 64 << 20, 22e6),
            _row("smb", "pysmb", "download", 64 << 20, 16e6),
            _row("smb", "smbclient", "download", 8 << 20, 99e6),  # a smaller file: not the story's figure
            _row("http", "curl", "download", 64 << 20, 55e6),
            _row("http", "aiohttp", "download", 64 << 20, 45e6),
        ),
        window_sweep=({"window_bytes": 65536, "measured_bytes_per_s": 22.1e6},),
    )
    runs = {"as published": run}
    assert scenarios.raw_tcp("as published", "download")(runs) == pytest.approx(62e6 * 8)
    assert scenarios.copies("as published", "smb", "download")(runs) == pytest.approx(19e6 * 8)  # median
    assert scenarios.copies("as published", "http", "download", best=True)(runs) == pytest.approx(55e6 * 8)
    assert scenarios.copies("as published", "ftp", "download")(runs) is None
    assert scenarios.swept("as published", 65536)(runs) == pytest.approx(22.1e6 * 8)
    assert scenarios.swept("as published", 32768)(runs) is None
    assert scenarios.raw_tcp("another", "upload")(runs) is None
    stalled = Run(id=2, meta={}, baseline=Baseline(), results=(_row("http", "curl", "upload", 1 << 20, 1e6, 1),))
    assert scenarios.stalled_seconds("x")({"x": stalled}) == pytest.approx(0.3)
    shown = scenarios.figures(scenarios.find("wifi-ac-64k"), runs)
    assert [p.figure for p, _ in shown][:3] == ["533", "170", "170"] and shown[1][1] is None  # no AFP row here
    assert shown[2][1] == pytest.approx(22e6 * 8)


def test_every_variant_passes_the_labs_own_input_checks() -> None:
    for story in scenarios.SCENARIOS.values():
        for _, request in scenarios.requests(story, {}, set(), True):
            validate_request(request)
