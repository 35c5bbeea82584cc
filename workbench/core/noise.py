"""Is the change in a row's throughput between two runs beyond noise?

`workbench compare A B` holds each row's repeated timed copies of run A ("before") against those of run B
("after"). The test is Welch's t-test on the natural logarithms of the rates, not on the rates themselves:

- Throughput noise is multiplicative (a busy disk or a lossy link costs a share of the rate, not a fixed
  number of bytes per second), so the logs of the rates are closer to normal with equal spread at any speed.
- The difference of the mean logs, exponentiated, is the ratio after/before of the geometric means. The
  change is therefore reported as a ratio (1.06 is 6 % faster), and its confidence interval is a ratio
  interval, exp(difference ± t·se), which is asymmetric around the ratio as a ratio interval should be.
- Welch's form does not assume both runs are equally noisy: a run on a quiet evening and one on a busy
  morning are not. Its degrees of freedom come from the Welch–Satterthwaite approximation.

The Student t distribution is computed here (regularized incomplete beta by continued fraction, quantile by
bisection) so the package needs no numerical library for a few dozen samples.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

FASTER = "faster"
SLOWER = "slower"
WITHIN_NOISE = "within noise"
TOO_FEW = "too few samples"

# The continued fraction converges in O(sqrt(max(a, b))) terms; Welch's degrees of freedom are at most
# n_before + n_after - 2, so a few hundred terms suffice. The cap is generous so that the functions stay
# right for large df too (e.g. df = 1e6, the normal limit), rather than failing where callers never go.
_CF_MAX_TERMS = 20_000
_CF_EPS = 1e-15
_CF_TINY = 1e-300  # stands in for a zero denominator in Lentz's method, which would otherwise divide by 0


@dataclass(frozen=True)
class Change:
    """The change of one row's rate from `before` to `after`.

    `ratio` is after/before of the geometric means (above 1 is faster); `low` and `high` bound it with the
    requested confidence. All three are None when a side has no usable sample; `low`, `high` and `p_value`
    are None when a side has fewer than two (one value has no spread to compare against). `n_before` and
    `n_after` count the samples used, after dropping non-positive and non-finite ones.
    """

    ratio: float | None
    low: float | None
    high: float | None
    p_value: float | None
    n_before: int
    n_after: int
    verdict: str  # FASTER, SLOWER, WITHIN_NOISE or TOO_FEW
    method: str


def _lentz_step(numerator: float, c: float, d: float) -> tuple[float, float, float]:
    """One term of the modified Lentz method: the new C and D, and the factor the fraction's value takes."""
    d = 1.0 + numerator * d
    if abs(d) < _CF_TINY:
        d = _CF_TINY
    c = 1.0 + numerator / c
    if abs(c) < _CF_TINY:
        c = _CF_TINY
    d = 1.0 / d
    return c, d, d * c


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b), evaluated by the modified Lentz method.

    Lentz's method evaluates the fraction front to back, keeping two running ratios instead of the
    numerators and denominators themselves, which would overflow; a denominator that reaches zero is
    replaced by a tiny number. It converges fast for x < (a + 1) / (a + b + 2), which the caller ensures.
    """
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    if abs(d) < _CF_TINY:
        d = _CF_TINY
    d = 1.0 / d
    h = d
    for m in range(1, _CF_MAX_TERMS + 1):
        m2 = 2 * m
        # even step: d_{2m} = m (b - m) x / ((a + 2m - 1)(a + 2m))
        c, d, step = _lentz_step(m * (b - m) * x / ((a + m2 - 1.0) * (a + m2)), c, d)
        h *= step
        # odd step: d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1))
        c, d, step = _lentz_step(-(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0)), c, d)
        h *= step
        if abs(step - 1.0) < _CF_EPS:
            return h
    raise ArithmeticError(f"incomplete beta did not converge for a={a}, b={b}, x={x}")


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, for a, b > 0 and 0 <= x <= 1."""
    if a <= 0 or b <= 0:
        raise ValueError(f"a and b must be positive, got a={a}, b={b}")
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must be in [0, 1], got {x}")
    if x == 0.0:
        return 0.0
    if x == 1.0:
        return 1.0
    # x^a (1-x)^b / (a B(a, b)) in logs: the powers alone under- or overflow for large a or b
    log_front = a * math.log(x) + b * math.log1p(-x) - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
    front = math.exp(log_front)
    # The fraction converges quickly only on one side of the mean of the beta distribution; on the other
    # side, use the symmetry I_x(a, b) = 1 - I_{1-x}(b, a).
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_continued_fraction(a, b, x) / a
    return 1.0 - front * _beta_continued_fraction(b, a, 1.0 - x) / b


def _two_sided_tail(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with df degrees of freedom."""
    if math.isinf(t):
        return 0.0
    t2 = t * t
    # P(|T| >= |t|) = I_{df/(df+t^2)}(df/2, 1/2); written so that a large t keeps its relative precision
    return regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t2))


def student_t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t distribution with df > 0 degrees of freedom (df need not be whole)."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    if math.isnan(t):
        raise ValueError("t is NaN")
    half_tail = _two_sided_tail(t, df) / 2.0
    return 1.0 - half_tail if t > 0 else half_tail


def student_t_two_sided_p(t: float, df: float) -> float:
    """The two-sided p-value of a t statistic: P(|T| >= |t|)."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    if math.isnan(t):
        raise ValueError("t is NaN")
    return _two_sided_tail(t, df)


def student_t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p, for 0 < p < 1 and df > 0, found by bisection on the CDF.

    Bisection rather than Newton: the CDF is monotone, so bisection cannot overshoot into the flat tails
    where Newton's steps blow up at df = 1, and ~60 halvings are cheap at the sizes this module sees.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be strictly between 0 and 1, got {p}")
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -student_t_quantile(1.0 - p, df)
    low, high = 0.0, 1.0
    while student_t_cdf(high, df) < p:  # widen until the bracket holds the quantile
        low, high = high, high * 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if mid in (low, high):  # the bracket is down to adjacent floats
            break
        if student_t_cdf(mid, df) < p:
            low = mid
        else:
            high = mid
        if high - low <= 1e-13 * high:
            break
    return (low + high) / 2.0


def _usable_logs(rates: Sequence[float]) -> list[float]:
    """The logs of the rates that can be a throughput: a zero or negative rate (a failed or unmeasured
    copy) and a NaN or infinite one have no logarithm to average, and say nothing about the noise."""
    return [math.log(rate) for rate in rates if math.isfinite(rate) and rate > 0]


def _verdict(ratio: float, low: float, high: float, min_change: float) -> str:
    excludes_no_change = low > 1.0 or high < 1.0
    # A hair of tolerance so that a change of exactly min_change, rounded through log and exp, counts.
    large_enough = abs(ratio - 1.0) >= min_change - 1e-12
    if excludes_no_change and large_enough:
        return FASTER if ratio > 1.0 else SLOWER
    return WITHIN_NOISE


def compare_rates(
    before: Sequence[float],
    after: Sequence[float],
    confidence: float = 0.95,
    min_change: float = 0.02,
) -> Change:
    """Compare one row's rates (bytes per second, one per timed copy) of two runs.

    The verdict is `faster` or `slower` only when the confidence interval of the ratio excludes 1 and the
    ratio itself is at least `min_change` away from 1 (|ratio - 1| >= min_change). The second condition is
    there because statistical significance is not the same as mattering: on a very quiet path (say 0.1 %
    scatter) a 0.5 % change is real to the test, yet it is smaller than what a different file cache state,
    CPU frequency or server build moves a copy by between runs, which the samples of one run cannot show.
    Calling it `faster` would make every comparison of a quiet path a list of meaningless changes.

    Each side needs at least two usable samples (positive, finite); with fewer the verdict is
    `too few samples`, still with the ratio of the geometric means when each side has at least one.

    Both sides without scatter (every sample of a side the same value, as happens when the rate is
    quantized by a shaper or a coarse timer): the standard error is 0 and the t statistic has no meaning.
    The samples then show no noise at all, so a difference between the sides is taken as real: the interval
    collapses to the ratio and the p-value is 0 (1 when the two values are equal), and `min_change` still
    decides whether the change is worth a `faster` or `slower`. One side without scatter is no special case:
    Welch's test takes the other side's spread and degrees of freedom.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence}")
    if min_change < 0:
        raise ValueError(f"min_change must not be negative, got {min_change}")
    method = f"Welch's t-test on log rates, {confidence * 100:g} %"
    logs_before = _usable_logs(before)
    logs_after = _usable_logs(after)
    n_before, n_after = len(logs_before), len(logs_after)

    def change(ratio: float | None, low: float | None, high: float | None, p: float | None, verdict: str) -> Change:
        return Change(ratio, low, high, p, n_before, n_after, verdict, method)

    if n_before == 0 or n_after == 0:
        return change(None, None, None, None, TOO_FEW)
    mean_before = statistics.fmean(logs_before)
    mean_after = statistics.fmean(logs_after)
    difference = mean_after - mean_before
    ratio = math.exp(difference)
    if n_before < 2 or n_after < 2:
        return change(ratio, None, None, None, TOO_FEW)

    # statistics.variance computes exactly, so identical samples give exactly 0, not a rounding residue
    share_before = statistics.variance(logs_before, mean_before) / n_before  # squared standard error per side
    share_after = statistics.variance(logs_after, mean_after) / n_after
    squared_se = share_before + share_after
    if squared_se == 0.0:
        p_value = 1.0 if difference == 0.0 else 0.0
        return change(ratio, ratio, ratio, p_value, _verdict(ratio, ratio, ratio, min_change))

    se = math.sqrt(squared_se)
    # Welch–Satterthwaite: the df of a t whose variance matches that of the sum of two unequal variances.
    # A side with zero variance adds 0 above and below, leaving the other side's n - 1.
    df = squared_se**2 / (share_before**2 / (n_before - 1) + share_after**2 / (n_after - 1))
    p_value = student_t_two_sided_p(difference / se, df)
    margin = student_t_quantile((1.0 + confidence) / 2.0, df) * se
    low, high = math.exp(difference - margin), math.exp(difference + margin)
    return change(ratio, low, high, p_value, _verdict(ratio, low, high, min_change))


def _percent(ratio: float) -> str:
    value = round((ratio - 1.0) * 100.0, 1)
    return f"{value + 0.0:+.1f}"  # + 0.0 turns a rounded -0.0 into 0.0, so no change never reads "-0.0"


def describe(change: Change) -> str:
    """A short ASCII text of a change, e.g. "-6.1 % (-9.8 ... -2.3 %), slower"."""
    if change.ratio is None:
        return f"no comparison ({change.n_before} before, {change.n_after} after), {change.verdict}"
    if change.low is None or change.high is None:
        return f"{_percent(change.ratio)} % ({change.n_before} before, {change.n_after} after), {change.verdict}"
    return f"{_percent(change.ratio)} % ({_percent(change.low)} ... {_percent(change.high)} %), {change.verdict}"
