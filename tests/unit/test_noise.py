"""Is a change between two runs beyond noise: the Student t distribution, Welch's test on log rates, the
verdict rules (too few samples, zero scatter, the minimum change) and the false-positive rate in simulation."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from workbench.core.noise import (
    FASTER,
    SLOWER,
    TOO_FEW,
    WITHIN_NOISE,
    Change,
    compare_rates,
    describe,
    regularized_incomplete_beta,
    student_t_cdf,
    student_t_quantile,
    student_t_two_sided_p,
)

RATE = 100e6  # bytes per second; the tests scale around it, the test is scale-free in the logs


def _rates(centre: float, relative: tuple[float, ...]) -> list[float]:
    return [centre * (1.0 + r) for r in relative]


# --- the Student t distribution ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "x", "expected"),
    [
        (1.0, 1.0, 0.3, 0.3),  # uniform
        (2.5, 1.0, 0.4, 0.4**2.5),  # I_x(a, 1) = x^a
        (1.0, 3.5, 0.2, 1.0 - 0.8**3.5),  # I_x(1, b) = 1 - (1 - x)^b
        (0.5, 0.5, 0.25, 2.0 / math.pi * math.asin(0.5)),  # arcsine distribution
        (3.0, 2.0, 0.0, 0.0),
        (3.0, 2.0, 1.0, 1.0),
    ],
)
def test_incomplete_beta_closed_forms(a: float, b: float, x: float, expected: float) -> None:
    assert regularized_incomplete_beta(a, b, x) == pytest.approx(expected, abs=1e-12)


def test_incomplete_beta_symmetry() -> None:
    for a, b, x in [(2.0, 5.0, 0.3), (7.5, 0.5, 0.9), (30.0, 0.5, 0.97)]:
        assert regularized_incomplete_beta(a, b, x) == pytest.approx(1.0 - regularized_incomplete_beta(b, a, 1.0 - x))


def test_t_cdf_closed_forms() -> None:
    # df = 1 is the Cauchy distribution; df = 2 has CDF 1/2 + t / (2 sqrt(2 + t^2))
    for t in (-5.0, -1.0, 0.0, 0.3, 1.0, 12.0):
        assert student_t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)
        assert student_t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-12)
    assert student_t_cdf(math.inf, 3) == 1.0
    assert student_t_cdf(-math.inf, 3) == 0.0


def test_t_two_sided_p_known_value() -> None:
    assert student_t_two_sided_p(2.0, 5) == pytest.approx(0.1019, abs=5e-5)
    assert student_t_two_sided_p(-2.0, 5) == pytest.approx(0.1019, abs=5e-5)
    assert 2 * (1 - student_t_cdf(2.0, 5)) == pytest.approx(0.1019, abs=5e-5)
    assert student_t_two_sided_p(0.0, 5) == 1.0


@pytest.mark.parametrize(
    ("df", "expected"),
    [(1, 12.706), (2, 4.303), (4, 2.776), (10, 2.228), (30, 2.042), (1e6, 1.960)],
)
def test_t_quantile_975(df: float, expected: float) -> None:
    q = student_t_quantile(0.975, df)
    assert q == pytest.approx(expected, abs=5e-4)
    assert student_t_quantile(0.025, df) == pytest.approx(-q)
    assert student_t_cdf(q, df) == pytest.approx(0.975, abs=1e-12)


def test_t_quantile_fractional_df_and_far_tail() -> None:
    # Welch's df is not whole: the quantile lies between those of its neighbours
    assert student_t_quantile(0.975, 4) > student_t_quantile(0.975, 4.5) > student_t_quantile(0.975, 5)
    assert student_t_quantile(0.9995, 1) == pytest.approx(636.619, abs=1e-3)
    assert student_t_quantile(0.5, 7) == 0.0


@pytest.mark.parametrize(
    "call",
    [
        lambda: student_t_quantile(0.0, 3),
        lambda: student_t_quantile(1.0, 3),
        lambda: student_t_quantile(0.9, 0),
        lambda: student_t_cdf(1.0, -1),
        lambda: regularized_incomplete_beta(1.0, 1.0, 1.5),
        lambda: compare_rates([1.0, 2.0], [1.0, 2.0], confidence=1.0),
        lambda: compare_rates([1.0, 2.0], [1.0, 2.0], min_change=-0.1),
    ],
)
def test_bad_arguments_are_refused(call: Callable[[], object]) -> None:
    with pytest.raises(ValueError):
        call()


# --- compare_rates -------------------------------------------------------------------------------------------


def test_identical_samples_are_within_noise() -> None:
    samples = _rates(RATE, (-0.03, 0.01, 0.0, 0.02, -0.01))
    change = compare_rates(samples, list(samples))
    assert change.verdict == WITHIN_NOISE
    assert change.ratio == pytest.approx(1.0)
    assert change.p_value == pytest.approx(1.0)
    assert change.low is not None and change.high is not None
    assert change.low < 1.0 < change.high
    assert change.method == "Welch's t-test on log rates, 95 %"


def test_six_percent_slower_with_one_percent_noise_is_slower() -> None:
    quiet = (-0.01, -0.005, 0.0, 0.005, 0.01)
    change = compare_rates(_rates(RATE, quiet), _rates(0.94 * RATE, quiet))
    assert change.verdict == SLOWER
    assert change.ratio == pytest.approx(0.94)
    assert change.low is not None and change.high is not None
    assert change.low < 0.94 < change.high < 1.0
    assert change.p_value is not None and change.p_value < 1e-5
    assert (change.n_before, change.n_after) == (5, 5)


def test_six_percent_faster_with_one_percent_noise_is_faster() -> None:
    quiet = (-0.01, -0.005, 0.0, 0.005, 0.01)
    change = compare_rates(_rates(RATE, quiet), _rates(1.06 * RATE, quiet[::-1]))
    assert change.verdict == FASTER
    assert change.low is not None and change.high is not None
    assert 1.0 < change.low < 1.06 < change.high


def test_six_percent_with_ten_percent_noise_and_three_samples_is_within_noise() -> None:
    noisy = (-0.1, 0.0, 0.1)
    change = compare_rates(_rates(RATE, noisy), _rates(0.94 * RATE, noisy))
    assert change.verdict == WITHIN_NOISE
    assert change.ratio == pytest.approx(0.94)
    assert change.low is not None and change.high is not None
    assert change.low < 1.0 < change.high
    assert change.p_value is not None and change.p_value > 0.05


def test_interval_is_welch_on_logs() -> None:
    before = [90e6, 100e6, 95e6, 105e6]
    after = [110e6, 111e6, 109e6]
    la, lb = [math.log(v) for v in before], [math.log(v) for v in after]
    va, vb = _var(la) / len(la), _var(lb) / len(lb)
    df = (va + vb) ** 2 / (va**2 / (len(la) - 1) + vb**2 / (len(lb) - 1))
    diff = sum(lb) / len(lb) - sum(la) / len(la)
    margin = student_t_quantile(0.975, df) * math.sqrt(va + vb)
    change = compare_rates(before, after)
    assert change.ratio == pytest.approx(math.exp(diff))
    assert change.low == pytest.approx(math.exp(diff - margin))
    assert change.high == pytest.approx(math.exp(diff + margin))
    assert change.p_value == pytest.approx(student_t_two_sided_p(diff / math.sqrt(va + vb), df))
    # a ratio interval: symmetric in the logs, not around the ratio
    assert change.ratio / change.low == pytest.approx(change.high / change.ratio)


def _var(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / (len(values) - 1)


def test_interval_excludes_one_exactly_when_p_is_below_alpha() -> None:
    rng = random.Random(7)
    for _ in range(100):
        before = [rng.lognormvariate(math.log(RATE), 0.05) for _ in range(rng.randint(2, 8))]
        after = [rng.lognormvariate(math.log(RATE * 1.04), 0.05) for _ in range(rng.randint(2, 8))]
        change = compare_rates(before, after, min_change=0.0)
        assert change.low is not None and change.high is not None and change.p_value is not None
        if abs(change.p_value - 0.05) > 1e-9:
            assert (change.low > 1.0 or change.high < 1.0) == (change.p_value < 0.05)


def test_confidence_widens_the_interval() -> None:
    before, after = _rates(RATE, (-0.02, 0.0, 0.02)), _rates(RATE, (-0.01, 0.03, 0.01))
    c90, c99 = compare_rates(before, after, confidence=0.90), compare_rates(before, after, confidence=0.99)
    assert c99.low is not None and c99.high is not None and c90.low is not None and c90.high is not None
    assert c99.low < c90.low < c90.high < c99.high
    assert c90.method == "Welch's t-test on log rates, 90 %"


def test_tiny_consistent_change_on_a_quiet_path_is_within_noise() -> None:
    quiet = (-0.0005, 0.0, 0.0005, 0.0002, -0.0002)
    before, after = _rates(RATE, quiet), _rates(1.005 * RATE, quiet)
    change = compare_rates(before, after)
    assert change.low is not None and change.low > 1.0  # real to the test ...
    assert change.verdict == WITHIN_NOISE  # ... but under the 2 % that matters
    assert compare_rates(before, after, min_change=0.0).verdict == FASTER


@pytest.mark.parametrize(
    ("before", "after"),
    [([RATE], [RATE * 0.9]), ([RATE], [RATE, RATE * 0.9]), ([RATE, RATE * 1.1], [RATE * 0.9])],
)
def test_fewer_than_two_samples_a_side_is_too_few(before: list[float], after: list[float]) -> None:
    change = compare_rates(before, after)
    assert change.verdict == TOO_FEW
    assert change.ratio is not None
    assert (change.low, change.high, change.p_value) == (None, None, None)


def test_one_sample_each_still_gives_the_ratio() -> None:
    change = compare_rates([RATE], [0.9 * RATE])
    assert change.ratio == pytest.approx(0.9)
    assert change == Change(change.ratio, None, None, None, 1, 1, TOO_FEW, "Welch's t-test on log rates, 95 %")


def test_no_usable_samples_gives_no_ratio() -> None:
    change = compare_rates([], [RATE, RATE])
    assert (change.ratio, change.verdict, change.n_before, change.n_after) == (None, TOO_FEW, 0, 2)


def test_non_positive_and_non_finite_rates_are_ignored() -> None:
    change = compare_rates([RATE, 0.0, -5.0, RATE * 1.01, math.nan], [RATE * 0.99, math.inf, RATE])
    assert (change.n_before, change.n_after) == (2, 2)
    assert change.verdict == WITHIN_NOISE
    assert compare_rates([RATE, 0.0], [RATE, RATE]).verdict == TOO_FEW


def test_zero_variance_both_sides_equal_values() -> None:
    change = compare_rates([RATE] * 3, [RATE] * 4)
    assert (change.ratio, change.low, change.high, change.p_value) == (1.0, 1.0, 1.0, 1.0)
    assert change.verdict == WITHIN_NOISE


def test_zero_variance_both_sides_different_values_is_real() -> None:
    change = compare_rates([RATE] * 3, [0.9 * RATE] * 3)
    assert change.verdict == SLOWER
    assert change.ratio == pytest.approx(0.9)
    assert change.low == change.high == change.ratio
    assert change.p_value == 0.0
    # still subject to the minimum change
    assert compare_rates([RATE] * 3, [1.01 * RATE] * 3).verdict == WITHIN_NOISE


def test_zero_variance_one_side_takes_the_other_sides_spread() -> None:
    after = _rates(0.94 * RATE, (-0.01, -0.005, 0.0, 0.005, 0.01))
    change = compare_rates([RATE] * 4, after)
    assert change.verdict == SLOWER
    logs = [math.log(v) for v in after]
    se = math.sqrt(_var(logs) / len(logs))
    diff = sum(logs) / len(logs) - math.log(RATE)
    assert change.high == pytest.approx(math.exp(diff + student_t_quantile(0.975, len(logs) - 1) * se))
    # and the mirror: the noisy side before
    assert compare_rates(after, [RATE] * 4).verdict == FASTER


# --- describe ------------------------------------------------------------------------------------------------


def test_describe() -> None:
    method = "Welch's t-test on log rates, 95 %"
    assert describe(Change(0.939, 0.902, 0.977, 0.001, 5, 5, SLOWER, method)) == "-6.1 % (-9.8 ... -2.3 %), slower"
    assert describe(Change(1.012, 0.96, 1.067, 0.6, 5, 5, WITHIN_NOISE, method)) == (
        "+1.2 % (-4.0 ... +6.7 %), within noise"
    )
    # a change that rounds to zero reads +0.0, never -0.0
    assert describe(Change(0.9996, 0.999, 1.0002, 0.3, 3, 3, WITHIN_NOISE, method)) == (
        "+0.0 % (-0.1 ... +0.0 %), within noise"
    )
    assert describe(Change(0.9, None, None, None, 1, 1, TOO_FEW, method)) == (
        "-10.0 % (1 before, 1 after), too few samples"
    )
    assert describe(Change(None, None, None, None, 0, 3, TOO_FEW, method)) == (
        "no comparison (0 before, 3 after), too few samples"
    )
    assert describe(compare_rates([RATE] * 2, [RATE] * 2)).isascii()


# --- simulations ---------------------------------------------------------------------------------------------


def _draw(rng: random.Random, centre: float, sigma: float, n: int) -> list[float]:
    return [rng.lognormvariate(math.log(centre), sigma) for _ in range(n)]


def test_false_positive_rate_same_distribution() -> None:
    rng = random.Random(1)
    pairs = 200
    called = sum(
        compare_rates(_draw(rng, RATE, 0.05, 5), _draw(rng, RATE, 0.05, 5)).verdict != WITHIN_NOISE
        for _ in range(pairs)
    )
    assert called / pairs <= 0.08


def test_interval_coverage_is_near_nominal() -> None:
    # Without the minimum change, "interval excludes 1" under no change must happen about 5 % of the time:
    # a t quantile or df that is off shows here as a rate well away from 5 %, too few or too many.
    rng = random.Random(2)
    pairs = 1000
    excluded = 0
    for _ in range(pairs):
        n_before, n_after = rng.randint(2, 8), rng.randint(2, 8)
        before = _draw(rng, RATE, 0.05, n_before)
        after = _draw(rng, RATE, rng.choice((0.02, 0.05, 0.10)), n_after)  # unequal noise: Welch's case
        change = compare_rates(before, after, min_change=0.0)
        assert change.low is not None and change.high is not None
        excluded += change.low > 1.0 or change.high < 1.0
    assert 0.03 <= excluded / pairs <= 0.08


def test_power_six_percent_change_one_percent_noise() -> None:
    rng = random.Random(3)
    pairs = 200
    slower = sum(
        compare_rates(_draw(rng, RATE, 0.01, 5), _draw(rng, 0.94 * RATE, 0.01, 5)).verdict == SLOWER
        for _ in range(pairs)
    )
    assert slower / pairs >= 0.98
