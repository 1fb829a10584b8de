"""Every statistic of ``atp.core.stats`` against values computed independently of it: SciPy's own
functions on the same data, and small examples worked by hand (the arithmetic is in the
comments), plus brute-force enumerations where one is possible (pass@k, Holm's procedure).

Tolerances: figures of Student's t agree with SciPy to a relative 1e-9 (a quantile within 1e-3
of p = 0.5, whose value is near 0, to an absolute 1e-9); figures computed by the same
arithmetic from the same data (means, variances, a Welch test from summary statistics or from
the raw scores) to 1e-12.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from fractions import Fraction
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atp.core.stats import (
    ALPHA,
    CONFIDENCE,
    STABILITY_LEVELS,
    STABILITY_MEANING,
    STABILITY_WORDS,
    Difference,
    Running,
    Sample,
    Stats,
    describe,
    holm,
    incomplete_beta,
    k_values,
    normal_quantile,
    paired,
    pass_at_k,
    pass_hat_k,
    stability,
    stability_word,
    t_cdf,
    t_density,
    t_quantile,
    t_two_sided,
    welch,
)

try:  # test-only dependencies: the hand-worked tests below run without them
    import numpy as np
    from scipy import special
    from scipy import stats as sps
except ImportError:  # pragma: no cover - depends on the environment
    np = special = sps = None  # type: ignore[assignment]

needs_scipy = pytest.mark.skipif(sps is None, reason="needs SciPy and NumPy (test-only dependencies)")

REL = 1e-9
"""Relative tolerance of every figure of Student's t against SciPy."""
SAME = 1e-12
"""Tolerance of figures computed two ways from the same data."""
T_975_3 = 3.182446305284263
"""t(0.975, 3), from tables (and scipy.stats.t.ppf(0.975, 3))."""

DFS = (1, 1.5, 2, 3, 5, 7.3, 10, 19, 30, 99, 1000)
TS = (0.0, 1e-4, 1e-3, 0.01, 0.1, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.0, 10.0, 15.0, 20.0, 30.0, 40.0)
PS = (
    1e-7,
    1e-5,
    1e-3,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.4,
    0.499,
    0.4995,
    0.5,
    0.5005,
    0.501,
    0.6,
    0.75,
    0.9,
    0.95,
    0.975,
    0.99,
    0.995,
    0.999,
    1 - 1e-5,
    1 - 1e-7,
)


def close(ours: float, reference: float, rel: float = REL, absolute: float = 0.0) -> bool:
    return math.isclose(ours, reference, rel_tol=rel, abs_tol=absolute)


def quantile_close(p: float, ours: float, reference: float) -> bool:
    """Relative 1e-9, except for p within 1e-3 of 0.5 (quantiles near 0): absolute 1e-9."""
    if abs(p - 0.5) <= 1e-3 * (1 + 1e-9):  # 0.501 - 0.5 is 0.0010000000000000009 in binary
        return abs(ours - reference) <= 1e-9
    return close(ours, reference)


def _density_at_0(df: float) -> float:
    return math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)


NEAR_0 = 1e-5
"""Below this |t| the references are the series of the cdf at 0, not SciPy."""


def cdf_reference(t: float, df: float) -> float:
    """P(T <= t): ``scipy.stats.t.cdf``, except for |t| <= 1e-5, where the series at 0,
    1/2 + f(0) t (1 - (df + 1) t^2 / (6 df)) + O(t^5), is exact to double precision. There SciPy
    itself is off at 1 df: ``t.cdf(1e-8, 1)`` is 0.500000004743187 and ``t.cdf(1e-9, 1)`` 0.5,
    where 1/2 + atan(t)/pi gives 0.5000000031830989 and 0.5000000003183099."""
    if abs(t) <= NEAR_0:
        return 0.5 + _density_at_0(df) * t * (1 - (df + 1) * t * t / (6 * df))
    return float(sps.t.cdf(t, df))


def two_sided_reference(t: float, df: float) -> float:
    """P(|T| >= |t|), with the same series near 0 (1 - 2 f(0) |t| (...))."""
    if abs(t) <= NEAR_0:
        return 1 - 2 * _density_at_0(df) * abs(t) * (1 - (df + 1) * t * t / (6 * df))
    return min(1.0, 2 * float(sps.t.sf(abs(t), df)))


def finite_json(value: msgspec.Struct) -> dict[str, Any]:
    """The JSON msgspec writes for ``value``, decoded; fails on NaN or Infinity anywhere (msgspec
    writes both as null, so every null is checked against the struct too)."""

    def refuse(constant: str) -> float:
        raise AssertionError(f"JSON holds {constant}")

    decoded: dict[str, Any] = json.loads(msgspec.json.encode(value), parse_constant=refuse)

    def walk(item: Any) -> None:
        if isinstance(item, float):
            assert math.isfinite(item)
        elif isinstance(item, list):
            for element in item:
                walk(element)
        elif isinstance(item, dict):
            for element in item.values():
                walk(element)

    walk(decoded)
    for name, field in decoded.items():
        if field is None:  # a null in the JSON must be a documented None, not a NaN or an inf
            assert getattr(value, name) is None, name
    return decoded


# --- describe ---------------------------------------------------------------------------------


def test_describe_hand_worked():
    # [1, 2, 3, 4]: mean 10/4 = 2.5; squares of deviations 2.25 + 0.25 + 0.25 + 2.25 = 5,
    # sample variance 5/3, std sqrt(5/3) = 1.2909944487358056; median (2 + 3)/2 = 2.5;
    # sem = std/sqrt(4) = 0.6454972243679028; half width t(0.975, 3) * sem
    # = 3.182446305284263 * 0.6454972243679028 = 2.0542602567605...; cv = std/2.5 = 0.5164 -> critical.
    s = describe([1, 2, 3, 4])
    assert s.n == 4
    assert s.mean == 2.5
    assert s.std == pytest.approx(math.sqrt(5 / 3), rel=SAME)
    assert (s.min, s.max, s.median) == (1, 4, 2.5)
    half = T_975_3 * math.sqrt(5 / 3) / 2
    assert s.ci_95 is not None
    assert s.ci_95[0] == pytest.approx(2.5 - half, rel=REL)
    assert s.ci_95[1] == pytest.approx(2.5 + half, rel=REL)
    assert s.half_width == pytest.approx(half, rel=REL)
    assert s.half_width == pytest.approx(2.0542602567605, rel=1e-12)
    assert s.cv == pytest.approx(math.sqrt(5 / 3) / 2.5, rel=SAME)
    assert s.stability == "critical"


def test_describe_hand_worked_odd_count_and_negative_mean():
    # [-3, -1, -2]: mean -2, deviations -1, 1, 0 -> variance 2/2 = 1, std 1; median -2;
    # cv = 1/|-2| = 0.5 (the absolute value of the mean) -> critical;
    # interval -2 +- t(0.975, 2) * 1/sqrt(3), t(0.975, 2) = 4.302652729749464
    # (closed form for 2 df: t = (2p - 1)/sqrt(2p(1 - p)) = 0.95/sqrt(0.04875)).
    s = describe([-3, -1, -2])
    assert (s.mean, s.std, s.min, s.max, s.median) == (-2, 1, -3, -1, -2)
    assert s.cv == 0.5
    t2 = 0.95 / math.sqrt(2 * 0.975 * 0.025)
    assert t2 == pytest.approx(4.302652729749464, rel=1e-14)
    assert s.half_width == pytest.approx(t2 / math.sqrt(3), rel=REL)


def _dataset(seed: int, n: int) -> list[float]:
    rng = random.Random(seed)
    kind = seed % 3
    if kind == 0:  # continuous
        return [rng.gauss(50, rng.uniform(0.5, 20)) for _ in range(n)]
    if kind == 1:  # integer scores 0-100 with ties
        return [float(min(100, max(0, round(rng.gauss(70, 15))))) for _ in range(n)]
    return [rng.expovariate(0.1) - 5 for _ in range(n)]  # skewed, of either sign


DESCRIBE_CASES = [(seed, n) for seed, n in enumerate((2, 2, 3, 3, 4, 5, 7, 10, 13, 20, 31, 50, 100, 500))]


@needs_scipy
@pytest.mark.parametrize(("seed", "n"), DESCRIBE_CASES)
def test_describe_against_numpy_and_scipy(seed: int, n: int):
    values = _dataset(seed, n)
    assert min(values) != max(values)  # a spread (identical values are tested below)
    s = describe(values)
    a = np.asarray(values)
    assert s.n == n
    assert s.mean == pytest.approx(float(np.mean(a)), rel=SAME, abs=SAME)
    assert s.std == pytest.approx(float(np.std(a, ddof=1)), rel=SAME)
    assert s.min == float(np.min(a))
    assert s.max == float(np.max(a))
    assert s.median == float(np.median(a))
    low, high = sps.t.interval(0.95, n - 1, loc=float(np.mean(a)), scale=float(sps.sem(a)))
    assert s.ci_95 is not None
    assert s.half_width == pytest.approx((high - low) / 2, rel=REL)
    assert s.ci_95[0] == pytest.approx(low, rel=REL, abs=REL * s.half_width)
    assert s.ci_95[1] == pytest.approx(high, rel=REL, abs=REL * s.half_width)
    assert s.cv == pytest.approx(float(np.std(a, ddof=1)) / abs(float(np.mean(a))), rel=SAME)
    assert s.stability == stability(s.cv)


@pytest.mark.parametrize(
    ("cv", "level"),
    [
        (0.0, "stable"),
        (math.nextafter(0.05, 0), "stable"),
        (0.05, "moderate"),
        (math.nextafter(0.15, 0), "moderate"),
        (0.15, "unstable"),
        (math.nextafter(0.30, 0), "unstable"),
        (0.30, "critical"),
        (1.0, "critical"),
        (1e6, "critical"),
        (None, None),
    ],
)
def test_stability_levels_of_design_6_2(cv: float | None, level: str | None):
    assert stability(cv) == level


def test_stability_thresholds_and_meanings():
    assert STABILITY_LEVELS == ((0.05, "stable"), (0.15, "moderate"), (0.30, "unstable"))
    assert set(STABILITY_MEANING) == {"stable", "moderate", "unstable", "critical"}


def test_the_highest_level_is_shown_as_very_unstable_not_critical():
    """``critical`` stays the value in the results; what a report shows cannot be read as an
    assertion's ``critical: true``."""
    assert set(STABILITY_WORDS) == set(STABILITY_MEANING)
    assert stability_word("critical") == "very unstable"
    assert [stability_word(level) for level in ("stable", "moderate", "unstable")] == [
        "stable",
        "moderate",
        "unstable",
    ]
    assert not any("critical" in word for word in STABILITY_WORDS.values())


def test_a_bounded_interval_is_clipped_to_the_bounds():
    # 100, 100, 70: mean 90, std sqrt(300) = 17.32; half t(0.975, 2) * 17.32 / sqrt(3)
    # = 4.3027 * 10 = 43.03: Student's t gives [46.97, 133.03], past 100.
    raw = describe([100, 100, 70])
    assert raw.ci_95 is not None and raw.ci_95[1] == pytest.approx(133.027, abs=1e-3)
    clipped = describe([100, 100, 70], (0.0, 100.0))
    assert clipped.ci_95 == (raw.ci_95[0], 100.0)
    assert clipped.ci_95[0] == pytest.approx(46.973, abs=1e-3)
    assert (clipped.mean, clipped.std, clipped.cv, clipped.stability) == (
        raw.mean,
        raw.std,
        raw.cv,
        raw.stability,
    )
    # at the other end, and both ends at once
    low = describe([0, 0, 30], (0.0, 100.0))
    assert low.ci_95 is not None and low.ci_95[0] == 0.0 and low.ci_95[1] == pytest.approx(53.027, abs=1e-3)
    both = describe([0, 100], (0.0, 100.0))
    assert both.ci_95 == (0.0, 100.0)
    # a metric: 0 and up
    metric = describe([1, 1, 40], (0.0, math.inf))
    assert metric.ci_95 is not None and metric.ci_95[0] == 0.0 and metric.ci_95[1] > 40


def test_an_interval_inside_its_bounds_is_the_t_interval():
    values = [80, 85, 90, 75, 88]
    assert describe(values, (0.0, 100.0)).ci_95 == describe(values).ci_95
    assert describe([100, 100, 100], (0.0, 100.0)).ci_95 == (100.0, 100.0)
    assert describe([55.0], (0.0, 100.0)).ci_95 is None


@pytest.mark.parametrize(
    ("values", "level"),
    [
        # [m - s, m, m + s] has sample std exactly s (variance 2 s^2 / 2); with m = 20 the cv
        # s/20 lands on each boundary exactly: 1/20 = 0.05, 3/20 = 0.15, 6/20 = 0.30.
        ([19, 20, 21], "moderate"),
        ([17, 20, 23], "unstable"),
        ([14, 20, 26], "critical"),
        # inside each level: [100, 101] cv 0.707/100.5 = 0.007; [100, 110] 7.07/105 = 0.067;
        # [100, 130] 21.2/115 = 0.18; [100, 200] 70.7/150 = 0.47
        ([100, 101], "stable"),
        ([100, 110], "moderate"),
        ([100, 130], "unstable"),
        ([100, 200], "critical"),
    ],
)
def test_describe_stability_at_and_between_the_boundaries(values: list[float], level: str):
    s = describe(values)
    if len(values) == 3:
        assert s.cv in (0.05, 0.15, 0.30)  # exactly the boundary
    assert s.stability == level


def test_describe_one_value():
    s = describe([7.25])
    assert (s.n, s.mean, s.min, s.max, s.median) == (1, 7.25, 7.25, 7.25, 7.25)
    assert s.std is None
    assert s.ci_95 is None
    assert s.cv is None
    assert s.stability is None
    assert s.half_width is None
    decoded = finite_json(s)
    assert decoded == {
        "n": 1,
        "mean": 7.25,
        "std": None,
        "min": 7.25,
        "max": 7.25,
        "median": 7.25,
        "ci_95": None,
        "cv": None,
        "stability": None,
    }


@pytest.mark.parametrize("value", [0.1, 42.0, -3.7, 1e-300, 1e300, 0.0])
@pytest.mark.parametrize("n", [2, 3, 10, 101])
def test_describe_identical_values(value: float, n: int):
    # 0.1 ten times: a naive mean (sum/n) is 0.09999999999999999, and the deviations from it are
    # not 0; the statistics of identical values are exact.
    s = describe([value] * n)
    assert s.mean == value
    assert s.std == 0.0
    assert s.ci_95 == (value, value)
    assert s.half_width == 0.0
    assert s.cv == 0.0
    assert s.stability == "stable"
    assert (s.min, s.max, s.median) == (value, value, value)
    decoded = finite_json(s)
    assert decoded["std"] == 0.0
    assert decoded["cv"] == 0.0
    assert decoded["ci_95"] == [value, value]
    assert decoded["stability"] == "stable"


def test_describe_all_zeros():
    s = describe([0.0, 0.0, 0.0, 0.0])
    assert (s.mean, s.std, s.cv, s.stability) == (0.0, 0.0, 0.0, "stable")
    assert s.ci_95 == (0.0, 0.0)
    decoded = finite_json(s)
    assert (decoded["std"], decoded["cv"], decoded["stability"]) == (0.0, 0.0, "stable")


@pytest.mark.parametrize("values", [[-1.0, 1.0], [-2.0, 0.0, 2.0], [-5.0, -1.0, 1.0, 5.0]])
def test_describe_mean_zero_with_a_spread(values: list[float]):
    # [-1, 1]: mean 0, std sqrt(2): std/|mean| is undefined -> cv None, stability None;
    # the interval is still defined: 0 +- t(0.975, 1) * sqrt(2)/sqrt(2) = +-12.706204736174707.
    s = describe(values)
    assert s.mean == 0.0
    assert s.std is not None and s.std > 0
    assert s.cv is None
    assert s.stability is None
    assert s.ci_95 is not None and s.ci_95[0] == -s.ci_95[1] < 0
    if values == [-1.0, 1.0]:
        assert s.std == pytest.approx(math.sqrt(2), rel=SAME)
        assert s.ci_95[1] == pytest.approx(12.706204736174707, rel=REL)
    decoded = finite_json(s)
    assert decoded["cv"] is None
    assert decoded["stability"] is None
    assert all(math.isfinite(x) for x in decoded["ci_95"])


def test_describe_empty_raises():
    with pytest.raises(ValueError):
        describe([])


def test_describe_is_a_stats_struct():
    s = describe([1.0, 2.0])
    assert isinstance(s, Stats)
    assert msgspec.json.decode(msgspec.json.encode(s), type=Stats) == s


# --- Student's t --------------------------------------------------------------------------------


def test_t_hand_worked_closed_forms():
    # 1 df is the Cauchy distribution: cdf 1/2 + atan(t)/pi, so P(|T| >= 1) = 1 - 2 * (pi/4)/pi
    # = 0.5 and the p quantile is tan(pi (p - 1/2)).
    assert t_two_sided(1.0, 1) == pytest.approx(0.5, rel=1e-14)
    for t in (-30.0, -2.0, -0.3, 0.7, 5.0):
        assert t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, rel=REL)
    for p in (0.01, 0.2, 0.8, 0.975):
        assert t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=REL)
    # 2 df: cdf 1/2 + t / (2 sqrt(2 + t^2)); quantile (2p - 1)/sqrt(2p(1 - p))
    for t in (-10.0, -1.0, 0.25, 3.0):
        assert t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), rel=REL)
    for p in (0.05, 0.3, 0.9, 0.995):
        assert t_quantile(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=REL)
    # tables: t(0.975, 3) = 3.182446305284263, and its two-sided p-value is exactly 0.05
    assert t_quantile(0.975, 3) == pytest.approx(T_975_3, rel=1e-12)
    assert t_two_sided(T_975_3, 3) == pytest.approx(0.05, rel=1e-12)
    assert t_two_sided(0.0, 5) == 1.0
    assert t_cdf(0.0, 5) == 0.5
    assert t_quantile(0.5, 5) == 0.0
    assert t_two_sided(math.inf, 3) == 0.0
    assert t_two_sided(-math.inf, 3) == 0.0


@pytest.mark.parametrize("p", [0.0, 1.0, -0.5, 1.5])
def test_t_quantile_outside_0_1_raises(p: float):
    with pytest.raises(ValueError):
        t_quantile(p, 3)


@needs_scipy
@pytest.mark.parametrize("df", DFS)
def test_t_two_sided_and_cdf_against_scipy(df: float):
    wrong = []
    for t in TS:
        for signed in (t, -t):
            reference = two_sided_reference(signed, df)
            if not close(t_two_sided(signed, df), reference):
                wrong.append(("two-sided", signed, t_two_sided(signed, df), reference))
            reference = cdf_reference(signed, df)
            if not close(t_cdf(signed, df), reference):
                wrong.append(("cdf", signed, t_cdf(signed, df), reference))
    assert not wrong


@needs_scipy
@pytest.mark.parametrize("df", DFS)
def test_t_quantile_against_scipy(df: float):
    wrong = [
        (p, t_quantile(p, df), float(sps.t.ppf(p, df)))
        for p in PS
        if not quantile_close(p, t_quantile(p, df), float(sps.t.ppf(p, df)))
    ]
    assert not wrong
    quantiles = [t_quantile(p, df) for p in PS]
    assert quantiles == sorted(quantiles)


@needs_scipy
@pytest.mark.parametrize("df", DFS)
def test_t_density_against_scipy(df: float):
    for t in TS:
        for signed in (t, -t):
            assert t_density(signed, df) == pytest.approx(float(sps.t.pdf(signed, df)), rel=REL)


@needs_scipy
def test_normal_quantile_against_scipy():
    for p in (1e-7, 0.025, 0.3, 0.5, 0.9, 0.975, 1 - 1e-7):
        assert normal_quantile(p) == pytest.approx(float(sps.norm.ppf(p)), rel=REL, abs=1e-15)


@needs_scipy
@pytest.mark.parametrize("a", [0.05, 0.5, 1.0, 2.5, 7.3, 50.0, 500.0])
def test_incomplete_beta_against_scipy(a: float):
    wrong = []
    for b in (0.05, 0.5, 1.0, 2.5, 7.3, 50.0, 500.0):
        for x in (1e-10, 1e-4, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.9999, 1 - 1e-10):
            reference = float(special.betainc(a, b, x))
            ours = incomplete_beta(a, b, x)
            if not close(ours, reference, absolute=1e-300):
                wrong.append((a, b, x, ours, reference))
    assert not wrong


def test_incomplete_beta_hand_worked():
    # I_x(1, 1) = x; I_x(a, 1) = x^a; I_x(1, b) = 1 - (1 - x)^b; I_{1/2}(a, a) = 1/2 by symmetry;
    # I_0 = 0 and I_1 = 1.
    for x in (0.001, 0.2, 0.5, 0.77, 0.999):
        assert incomplete_beta(1, 1, x) == pytest.approx(x, rel=1e-13)
        assert incomplete_beta(3.5, 1, x) == pytest.approx(x**3.5, rel=1e-12)
        assert incomplete_beta(1, 4, x) == pytest.approx(1 - (1 - x) ** 4, rel=1e-12)
    for a in (0.3, 1.0, 2.0, 17.5, 300.0):
        assert incomplete_beta(a, a, 0.5) == pytest.approx(0.5, rel=1e-12)
    assert incomplete_beta(2, 3, 0.0) == 0.0
    assert incomplete_beta(2, 3, 1.0) == 1.0


def test_the_series_at_0_against_closed_forms():
    # the reference used near 0, checked against the exact cdfs of 1, 2 and 3 df
    exact = {
        1: lambda t: 0.5 + math.atan(t) / math.pi,
        2: lambda t: 0.5 + t / (2 * math.sqrt(2 + t * t)),
        3: lambda t: 0.5 + (t / (math.sqrt(3) * (1 + t * t / 3)) + math.atan(t / math.sqrt(3))) / math.pi,
    }
    for df, cdf in exact.items():
        for t in (1e-9, 1e-8, 3e-7, 1e-5, -1e-6):
            series = 0.5 + _density_at_0(df) * t * (1 - (df + 1) * t * t / (6 * df))
            assert series == pytest.approx(cdf(t), rel=1e-15)


@needs_scipy
@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    df=st.floats(min_value=1, max_value=500, allow_nan=False),
    t=st.floats(min_value=-50, max_value=50, allow_nan=False),
)
def test_t_distribution_property_against_scipy(df: float, t: float):
    assert close(t_two_sided(t, df), two_sided_reference(t, df))
    assert close(t_cdf(t, df), cdf_reference(t, df))


@needs_scipy
@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    df=st.floats(min_value=1, max_value=500, allow_nan=False),
    p=st.floats(min_value=1e-7, max_value=1 - 1e-7, allow_nan=False),
)
def test_t_quantile_property_against_scipy(df: float, p: float):
    assert quantile_close(p, t_quantile(p, df), float(sps.t.ppf(p, df)))


@pytest.mark.parametrize("df", [1, 2, 3, 7.3, 30, 1000])
def test_t_near_zero(df: float):
    # A t statistic very close to 0 (two means equal to within a hair): the p-value is
    # 1 - 2 f(0) |t| + O(|t|^3) and the cdf 1/2 + f(0) t + O(t^3), f(0) the density at 0; the
    # quantile of p just above 1/2 is (p - 1/2)/f(0) + O((p - 1/2)^3). All must keep their
    # precision. (SciPy is no reference here: see cdf_reference.)
    f0 = _density_at_0(df)
    wrong = []
    for t in (1e-9, 1e-8, 1e-7, 1e-6, 1e-5):
        cdf = 0.5 + f0 * t * (1 - (df + 1) * t * t / (6 * df))
        if not close(t_cdf(t, df), cdf):
            wrong.append(("cdf", t, t_cdf(t, df), cdf))
        if not close(t_two_sided(t, df), 2 * (1 - cdf)):
            wrong.append(("two-sided", t, t_two_sided(t, df), 2 * (1 - cdf)))
    for offset in (1e-9, 1e-8, 1e-7, 1e-6):
        p = 0.5 + offset
        quantile = (p - 0.5) / f0  # p - 0.5 is exact in binary
        if not quantile_close(p, t_quantile(p, df), quantile):
            wrong.append(("quantile", p, t_quantile(p, df), quantile))
    assert not wrong


@needs_scipy
@pytest.mark.parametrize("df", [1e4, 1e5, 1e6, 9.9e6, 2e7, 1e9])
def test_t_at_very_large_df_against_scipy(df: float):
    wrong = []
    for t in (0.1, 1.0, 2.0, 4.0, 6.0, 10.0):
        reference = 2 * float(sps.t.sf(t, df))
        if not close(t_two_sided(t, df), reference):
            wrong.append(("two-sided", t, t_two_sided(t, df), reference))
    for p in (0.975, 0.9999999):
        if not close(t_quantile(p, df), float(sps.t.ppf(p, df))):
            wrong.append(("quantile", p, t_quantile(p, df), float(sps.t.ppf(p, df))))
    assert not wrong


# --- Welch's t-test ---------------------------------------------------------------------------


def test_welch_hand_worked():
    # a = [1, 2, 3, 4]: mean 2.5, variance 5/3; b = [2, 4, 6]: mean 4, variance (4 + 0 + 4)/2 = 4.
    # va = (5/3)/4 = 5/12, vb = 4/3 = 16/12, se^2 = 21/12 = 1.75; delta = -1.5;
    # t = -1.5/sqrt(1.75) = -1.1338934190276817;
    # df = 1.75^2 / ((5/12)^2/3 + (4/3)^2/2) = 3.0625 / (25/432 + 384/432) = 3.0625 * 432/409
    #    = 1323/409 = 3.2347188264058682.
    d = welch(Sample.of([1, 2, 3, 4]), Sample.of([2, 4, 6]))
    assert d.delta == -1.5
    assert d.t == pytest.approx(-1.5 / math.sqrt(1.75), rel=SAME)
    assert d.df == pytest.approx(1323 / 409, rel=SAME)
    assert d.note is None
    half = t_quantile(0.975, 1323 / 409) * math.sqrt(1.75)
    assert d.ci_95[0] == pytest.approx(-1.5 - half, rel=SAME)
    assert d.ci_95[1] == pytest.approx(-1.5 + half, rel=SAME)
    # scipy.stats.ttest_ind([1, 2, 3, 4], [2, 4, 6], equal_var=False): pvalue 0.33382370007750106,
    # confidence_interval(0.95) (-5.542327954923024, 2.5423279549230244)
    assert d.p_value == pytest.approx(0.33382370007750106, rel=REL)
    assert d.ci_95 == pytest.approx((-5.542327954923024, 2.5423279549230244), rel=REL)


def _welch_sides(seed: int) -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(seed)
    n1, n2 = int(rng.integers(2, 51)), int(rng.integers(2, 51))
    a = rng.normal(rng.uniform(40, 60), rng.uniform(0.5, 20), n1)
    b = rng.normal(rng.uniform(40, 60), rng.uniform(0.5, 20), n2)
    if seed % 4 == 0:  # integer scores with ties
        a, b = np.round(a), np.round(b)
    return [float(x) for x in a], [float(x) for x in b]


WELCH_SEEDS = range(40)


@needs_scipy
@pytest.mark.parametrize("seed", WELCH_SEEDS)
def test_welch_against_scipy(seed: int):
    a, b = _welch_sides(seed)
    assert min(a) != max(a) and min(b) != max(b)  # no degenerate side with these seeds
    d = welch(Sample.of(a), Sample.of(b))
    result = sps.ttest_ind(a, b, equal_var=False)
    assert d.t == pytest.approx(float(result.statistic), rel=1e-11)
    assert d.df == pytest.approx(float(result.df), rel=1e-11)
    assert close(d.p_value, float(result.pvalue))
    assert d.delta == pytest.approx(float(np.mean(a) - np.mean(b)), rel=SAME, abs=SAME)
    ci = result.confidence_interval(0.95)
    half = (float(ci.high) - float(ci.low)) / 2
    assert (d.ci_95[1] - d.ci_95[0]) / 2 == pytest.approx(half, rel=REL)
    assert d.ci_95[0] == pytest.approx(float(ci.low), rel=REL, abs=REL * half)
    assert d.ci_95[1] == pytest.approx(float(ci.high), rel=REL, abs=REL * half)
    assert d.note is None


@needs_scipy
@pytest.mark.parametrize("seed", range(0, 40, 4))
def test_welch_from_summary_statistics(seed: int):
    a, b = _welch_sides(seed)
    raw = welch(Sample.of(a), Sample.of(b))
    sa, sb = describe(a), describe(b)
    assert sa.std is not None and sb.std is not None
    by_hand = welch(
        Sample(len(a), sa.mean, float(np.var(a, ddof=1))), Sample(len(b), sb.mean, float(np.var(b, ddof=1)))
    )
    from_stats = welch(Sample.from_stats(sa), Sample.from_stats(sb))
    for other in (by_hand, from_stats):
        assert other.delta == pytest.approx(raw.delta, rel=SAME, abs=SAME)
        assert other.t == pytest.approx(raw.t, rel=SAME)
        assert other.df == pytest.approx(raw.df, rel=SAME)
        assert other.p_value == pytest.approx(raw.p_value, rel=SAME)
        assert other.ci_95 == pytest.approx(raw.ci_95, rel=SAME)
    reference = sps.ttest_ind_from_stats(sa.mean, sa.std, len(a), sb.mean, sb.std, len(b), equal_var=False)
    assert from_stats.t == pytest.approx(float(reference.statistic), rel=1e-11)
    assert close(from_stats.p_value, float(reference.pvalue))


@needs_scipy
@pytest.mark.filterwarnings("ignore:Precision loss occurred")  # SciPy's, on the constant side
def test_welch_other_confidence_and_one_constant_side():
    a, b = [61.0, 64.5, 58.0, 70.25, 66.0], [50.0, 50.0, 50.0, 50.0]
    result = sps.ttest_ind(a, b, equal_var=False)
    d = welch(Sample.of(a), Sample.of(b), confidence=0.99)
    # one constant side: the Welch-Satterthwaite df is that of the other, n - 1 = 4
    assert d.df == pytest.approx(4.0, rel=SAME)
    assert d.df == pytest.approx(float(result.df), rel=SAME)
    assert close(d.p_value, float(result.pvalue))
    ci = result.confidence_interval(0.99)
    assert d.ci_95 == pytest.approx((float(ci.low), float(ci.high)), rel=REL)


def test_welch_degenerate_sides():
    same = welch(Sample.of([70.0, 70.0, 70.0]), Sample.of([70.0, 70.0]))
    assert (same.delta, same.t, same.df, same.p_value, same.ci_95) == (0.0, None, None, 1.0, (0.0, 0.0))
    assert same.note
    apart = welch(Sample.of([80.0, 80.0, 80.0]), Sample.of([70.0, 70.0]))
    assert (apart.delta, apart.t, apart.df, apart.p_value, apart.ci_95) == (
        10.0,
        None,
        None,
        0.0,
        (10.0, 10.0),
    )
    assert apart.note
    assert apart.note != same.note
    for d in (same, apart):
        assert isinstance(d, Difference)
        finite_json(d)


@pytest.mark.parametrize(
    ("current", "reference"),
    [
        (Sample.of([1.0]), Sample.of([1.0, 2.0])),
        (Sample.of([1.0, 2.0]), Sample.of([3.0])),
        (Sample.of([]), Sample.of([1.0, 2.0])),
        (Sample(1, 5.0, 0.0), Sample(10, 5.0, 1.0)),
    ],
)
def test_welch_needs_two_values_a_side(current: Sample, reference: Sample):
    with pytest.raises(ValueError):
        welch(current, reference)


@needs_scipy
def test_sample_and_running_against_numpy():
    rng = random.Random(11)
    values = [rng.gauss(10, 3) for _ in range(37)]
    sample = Sample.of(values)
    assert sample.n == 37
    assert sample.mean == pytest.approx(float(np.mean(values)), rel=SAME)
    assert sample.variance == pytest.approx(float(np.var(values, ddof=1)), rel=SAME)
    running = Running()
    for i, value in enumerate(values, 1):
        now = running.add(value)
        assert now.n == i
        assert now.mean == pytest.approx(float(np.mean(values[:i])), rel=SAME)
        assert now.variance == pytest.approx(float(np.var(values[:i], ddof=1)) if i > 1 else 0.0, rel=1e-10)
    final = running.sample()
    assert (final.n, final.mean, final.variance) == (
        37,
        pytest.approx(sample.mean, rel=SAME),
        pytest.approx(sample.variance, rel=1e-10),
    )
    constant = Running()
    for _ in range(5):
        constant.add(0.1)
    assert constant.sample().variance == 0.0
    assert Sample.of([0.1] * 5).variance == 0.0


# --- the paired t-test --------------------------------------------------------------------------


def test_paired_hand_worked():
    # differences [1, 2, 3, 4]: mean 2.5, std sqrt(5/3), se = sqrt(5/3)/2 = 0.6454972243679028,
    # t = 2.5/se = sqrt(15) = 3.872983346207417, df 3, interval 2.5 +- 3.182446305284263 * se.
    # For 3 df, P(|T| >= t) = 1 - (2/pi) (atan(u) + u/(1 + u^2)) with u = t/sqrt(3) = sqrt(5):
    # 1 - (2/pi)(atan(sqrt 5) + sqrt(5)/6) = 1 - 0.63662 * (1.1502620 + 0.3726780) = 0.0304663.
    d = paired([1, 2, 3, 4])
    assert d.delta == 2.5
    assert d.t == pytest.approx(math.sqrt(15), rel=SAME)
    assert d.df == 3.0
    half = T_975_3 * math.sqrt(5 / 3) / 2
    assert d.ci_95 == pytest.approx((2.5 - half, 2.5 + half), rel=REL)
    p_value = 1 - 2 / math.pi * (math.atan(math.sqrt(5)) + math.sqrt(5) / 6)
    assert p_value == pytest.approx(0.0304663, rel=1e-5)
    assert d.p_value == pytest.approx(p_value, rel=REL)
    assert d.note is None


@needs_scipy
@pytest.mark.parametrize("seed", range(15))
def test_paired_against_scipy(seed: int):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(2, 51))
    b = rng.normal(60, 15, n)
    a = b + rng.normal(rng.uniform(-5, 5), rng.uniform(0.5, 8), n)
    if seed % 3 == 0:
        a, b = np.round(a), np.round(b)
    differences = [float(x) for x in a - b]
    assert min(differences) != max(differences)  # not degenerate with these seeds
    d = paired(differences)
    result = sps.ttest_rel(a, b)
    assert d.t == pytest.approx(float(result.statistic), rel=1e-10)
    assert d.df == float(result.df) == n - 1
    assert close(d.p_value, float(result.pvalue))
    ci = result.confidence_interval(0.95)
    half = (float(ci.high) - float(ci.low)) / 2
    assert (d.ci_95[1] - d.ci_95[0]) / 2 == pytest.approx(half, rel=REL)
    assert d.ci_95[0] == pytest.approx(float(ci.low), rel=REL, abs=REL * half)
    assert d.ci_95[1] == pytest.approx(float(ci.high), rel=REL, abs=REL * half)


def test_paired_degenerate_and_too_short():
    equal = paired([0.0, 0.0, 0.0])
    assert (equal.delta, equal.t, equal.p_value, equal.ci_95, equal.df) == (0.0, None, 1.0, (0.0, 0.0), 2.0)
    assert equal.note
    shifted = paired([2.5, 2.5, 2.5, 2.5])
    assert (shifted.delta, shifted.t, shifted.p_value, shifted.ci_95) == (2.5, None, 0.0, (2.5, 2.5))
    assert shifted.note and shifted.note != equal.note
    tenth = paired([0.1] * 10)  # identical values whose naive mean is not 0.1
    assert (tenth.p_value, tenth.ci_95, tenth.t) == (0.0, (tenth.delta, tenth.delta), None)
    for d in (equal, shifted, tenth):
        finite_json(d)
    with pytest.raises(ValueError):
        paired([1.0])
    with pytest.raises(ValueError):
        paired([])


# --- Holm ---------------------------------------------------------------------------------------


def _holm_rejects(p_values: list[float], alpha: float) -> set[int]:
    """Holm's step-down procedure itself: in increasing order of p, reject while
    p_(j) <= alpha / (m - j) (j from 0), and stop at the first that is not."""
    m = len(p_values)
    rejected: set[int] = set()
    for j, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        if p_values[index] > alpha / (m - j):
            break
        rejected.add(index)
    return rejected


def test_holm_hand_worked():
    # p = [0.01, 0.04, 0.03, 0.005], m = 4; in increasing order:
    #   0.005 * 4 = 0.02, 0.01 * 3 = 0.03, 0.03 * 2 = 0.06, 0.04 * 1 = 0.04 -> running max 0.06
    # so, in the given order: [0.03, 0.06, 0.06, 0.02].
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02], rel=1e-12)
    # capped at 1: [0.5, 0.6] -> 0.5 * 2 = 1.0, max(1.0, 0.6 * 1) = 1.0
    assert holm([0.5, 0.6]) == [1.0, 1.0]
    # [0.7, 0.001, 0.6]: 0.001 * 3 = 0.003, 0.6 * 2 = 1.2 -> capped at 1, max(1, 0.7 * 1) = 1
    assert holm([0.7, 0.001, 0.6]) == pytest.approx([1.0, 0.003, 1.0], rel=1e-12)
    # not capped: [0.4, 0.001, 0.9] -> 0.003, 0.4 * 2 = 0.8, max(0.8, 0.9 * 1) = 0.9
    assert holm([0.4, 0.001, 0.9]) == pytest.approx([0.8, 0.003, 0.9], rel=1e-12)
    # ties: [0.02, 0.02, 0.5] -> 0.02 * 3 = 0.06, max(0.06, 0.02 * 2) = 0.06, max(0.06, 0.5) = 0.5
    assert holm([0.02, 0.02, 0.5]) == pytest.approx([0.06, 0.06, 0.5], rel=1e-12)
    assert holm([0.03]) == [0.03]
    assert holm([]) == []
    assert holm([0.0, 1.0]) == [0.0, 1.0]


def test_holm_against_the_step_down_procedure():
    rng = random.Random(5)
    for _ in range(200):
        m = rng.randint(1, 12)
        p = [rng.choice([rng.random(), rng.random() ** 4, 0.01, 0.05]) for _ in range(m)]
        adjusted = holm(p)
        assert len(adjusted) == m
        assert all(p[i] <= adjusted[i] <= 1.0 for i in range(m))
        order = sorted(range(m), key=lambda i: p[i])
        # monotone in the order of p, and equal p get equal adjusted values
        assert [adjusted[i] for i in order] == sorted(adjusted)
        for i, j in itertools.combinations(range(m), 2):
            if p[i] == p[j]:
                assert adjusted[i] == adjusted[j]
        # the adjusted p is the least level at which the procedure rejects the hypothesis (and an
        # adjusted p of 1 means no level below 1 does)
        for i in range(m):
            assert i not in _holm_rejects(p, adjusted[i] * (1 - 1e-9))
            if adjusted[i] < 1.0:
                assert i in _holm_rejects(p, adjusted[i] * (1 + 1e-12))
        # rejected below alpha after correction <=> the procedure rejects at alpha
        assert {i for i in range(m) if adjusted[i] <= ALPHA} == _holm_rejects(p, ALPHA)


def test_holm_against_statsmodels():
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    rng = random.Random(9)
    for _ in range(50):
        p = [rng.random() ** 3 for _ in range(rng.randint(1, 15))]
        assert holm(p) == pytest.approx(list(multitest.multipletests(p, method="holm")[1]), rel=1e-12)


# --- pass@k and pass^k --------------------------------------------------------------------------


def test_pass_at_k_hand_worked():
    # n = 5, c = 2, k = 2: 1 - C(3, 2)/C(5, 2) = 1 - 3/10 = 0.7; pass^2 = C(2, 2)/C(5, 2) = 1/10.
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7, rel=1e-15)
    assert pass_hat_k(5, 2, 2) == pytest.approx(0.1, rel=1e-15)
    # k = 1 is the pass rate c/n either way
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4, rel=1e-15)
    assert pass_hat_k(5, 2, 1) == pytest.approx(0.4, rel=1e-15)
    # more draws than failures (4 > 5 - 2): some draw passes for sure; more than c: not all pass
    assert pass_at_k(5, 2, 4) == 1.0
    assert pass_hat_k(5, 2, 3) == 0.0
    # n = 10, c = 3, k = 5: 1 - C(7, 5)/C(10, 5) = 1 - 21/252 = 11/12; pass^5 = 0
    assert pass_at_k(10, 3, 5) == pytest.approx(11 / 12, rel=1e-15)
    # all pass / none pass
    assert (pass_at_k(4, 4, 3), pass_hat_k(4, 4, 3)) == (1.0, 1.0)
    assert (pass_at_k(4, 0, 3), pass_hat_k(4, 0, 3)) == (0.0, 0.0)


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_by_enumeration(n: int):
    for c in range(n + 1):
        outcomes = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            draws = list(itertools.combinations(outcomes, k))
            some = Fraction(sum(any(d) for d in draws), len(draws))
            every = Fraction(sum(all(d) for d in draws), len(draws))
            assert pass_at_k(n, c, k) == pytest.approx(float(some), rel=1e-15, abs=1e-15)
            assert pass_hat_k(n, c, k) == pytest.approx(float(every), rel=1e-15, abs=1e-15)


@pytest.mark.parametrize(
    ("n", "c", "k"),
    [(5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6), (0, 0, 1), (0, 0, 0), (-1, 0, 1), (3, 1, -2)],
)
def test_pass_at_k_invalid(n: int, c: int, k: int):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


@pytest.mark.parametrize(
    ("n", "ks"),
    [
        (0, []),
        (1, [1]),
        (2, [1, 2]),
        (3, [1, 3]),
        (4, [1, 3, 4]),
        (5, [1, 3, 5]),
        (10, [1, 3, 5, 10]),
        (12, [1, 3, 5, 10, 12]),
        (50, [1, 3, 5, 10, 20, 50]),
        (100, [1, 3, 5, 10, 20, 50, 100]),
        (150, [1, 3, 5, 10, 20, 50, 100, 150]),
    ],
)
def test_k_values(n: int, ks: list[int]):
    assert k_values(n) == ks


def test_levels():
    assert (CONFIDENCE, ALPHA) == (0.95, 0.05)
