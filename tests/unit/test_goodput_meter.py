"""The lab link's goodput meter (--goodput-duration): what the setting accepts is what the meter measures in full,
a round with no time after its warm-up is an error rather than a division by zero, and a skipped meter is said
on the link's line instead of leaving its figure silently out. (Out-of-range values through the command line
and the config file: tests/unit/test_bad_inputs.py.)"""

from __future__ import annotations

import inspect

import pytest

from tests.synthetic_runs import lab_run
from workbench.cli.summary import link_line
from workbench.core.settings import BY_NAME
from workbench.lab import Lab
from workbench.lab.measure import GOODPUT_LOAD_MAX_S, _rate_after_warmup_bits_per_s
from workbench.shared.errors import UsageError, WorkbenchError

SKIPPED = "goodput meter skipped (--goodput-duration 0)"


def test_the_longest_duration_accepted_fits_the_meters_bound_with_its_warmup() -> None:
    setting = BY_NAME["goodput_duration"]
    assert setting.range is not None
    warmup_s = inspect.signature(Lab.measure_goodput_bits_per_s).parameters["warmup"].default  # what a run uses
    assert setting.range.high + warmup_s <= GOODPUT_LOAD_MAX_S  # never cut short by the meter's own bound
    setting.check(setting.range.high)


@pytest.mark.parametrize("seconds", [0.01, 0.49, 9.5, 60.0, -1.0])
def test_a_duration_the_meter_cannot_honour_is_refused_in_one_line(seconds: float) -> None:
    with pytest.raises(UsageError) as refused:
        BY_NAME["goodput_duration"].check(seconds)
    assert refused.value.message == f"--goodput-duration must be 0, or a number of seconds 0.5..9, not {seconds!r}"


@pytest.mark.parametrize("seconds", [0.0, 0.5, 3.0, 9.0])
def test_zero_and_half_a_second_to_nine_are_accepted(seconds: float) -> None:
    BY_NAME["goodput_duration"].check(seconds)


def test_a_round_with_no_time_after_its_warmup_is_an_error_not_a_division_by_zero() -> None:
    one_read_after = [(100.0, 1 << 20), (100.4, 2 << 20), (101.05, 3 << 20)]  # only the last read is timed
    with pytest.raises(WorkbenchError, match="no time left to measure after its 1 s warm-up"):
        _rate_after_warmup_bits_per_s(one_read_after, 1.0)
    two_reads_after = [*one_read_after, (101.55, 4 << 20)]
    assert _rate_after_warmup_bits_per_s(two_reads_after, 1.0) == pytest.approx(8 * (1 << 20) / 0.5)


def test_a_skipped_meter_is_said_on_the_links_line_and_leaves_no_figure() -> None:
    measured = lab_run().link
    assert measured is not None
    skipped = {**measured, "goodput_bytes_per_s": None, "goodput_duration_s": 0.0}  # as a lab run records it
    line = link_line(skipped)
    assert line.count(SKIPPED) == 1 and "goodput measured" not in line
    measured_line = link_line({**measured, "goodput_duration_s": 3.0})
    assert "goodput measured 497 Mbit/s" in measured_line and SKIPPED not in measured_line
    failed = link_line({**skipped, "goodput_duration_s": 3.0})  # asked for, but the meter failed: nothing claimed
    older = link_line({k: v for k, v in skipped.items() if k != "goodput_duration_s"})  # a run before the setting
    assert SKIPPED not in failed and SKIPPED not in older
    why = link_line({**skipped, "goodput_duration_s": 3.0, "goodput_error": "the meter read no bytes"})
    assert "goodput not measured: the meter read no bytes" in why and SKIPPED not in why
