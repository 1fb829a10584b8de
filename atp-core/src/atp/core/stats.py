"""Statistics over an agent's runs (design section 6): descriptive statistics with the 95%
confidence interval of the mean, stability, pass@k and pass^k, Welch's t-test, the paired
t-test and Holm's correction.

Everything here is plain Python on the standard library. Student's t distribution, the one
distribution the stdlib lacks, is computed from the regularised incomplete beta function
(a continued fraction evaluated by the modified Lentz method), and from the normal
distribution by the Cornish-Fisher expansion above 100,000 degrees of freedom; the tests hold
every figure to SciPy's on the same data (relative 1e-9), near t = 0 and at a billion degrees
of freedom too. So statistics cost microseconds, and ATP's start-up and install pay
nothing for a numerical library (importing ``scipy.special`` alone takes about 150 ms).

Edge cases give defined values, never NaN:

- one value: ``std``, ``ci_95`` and ``cv`` are ``None`` (a spread needs two runs);
- identical values (``std`` 0): the interval is the mean itself, ``cv`` is 0, stable;
- mean 0 with a spread: ``cv`` is ``None`` (undefined) and the stability level is ``None``.

A quantity that cannot leave a range (a score 0-100, a component 0-1, a count or a time at least
0) is described with that range as ``bounds``: its interval is Student's t interval clipped to
the range. The true mean lies in the range, so clipping never drops it from the interval: the
coverage is the t interval's, and an interval already inside the range is unchanged. (A logit
interval is undefined when every run scores 100 or 0, which is common; a bootstrap is random
and unreliable for the few runs a test has.) Tests of a difference (:func:`welch`,
:func:`paired`) are not clipped: a difference may be negative.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from statistics import NormalDist, fmean, median
from typing import Literal

import msgspec

Stability = Literal["stable", "moderate", "unstable", "critical"]

CONFIDENCE = 0.95
"""The level of every confidence interval ATP reports."""
ALPHA = 0.05
"""The significance level of every test ATP makes."""
STABILITY_LEVELS: tuple[tuple[float, Stability], ...] = (
    (0.05, "stable"),
    (0.15, "moderate"),
    (0.30, "unstable"),
)
"""Design 6.2: CV below 0.05 stable, below 0.15 moderate, below 0.30 unstable, else critical."""
STABILITY_MEANING: dict[Stability, str] = {
    "stable": "consistent results",
    "moderate": "acceptable variance",
    "unstable": "results may be unreliable",
    "critical": "unpredictable behaviour",
}
STABILITY_WORDS: dict[Stability, str] = {
    "stable": "stable",
    "moderate": "moderate",
    "unstable": "unstable",
    "critical": "very unstable",
}
"""How reports show a level: ``critical`` (the value in the results, kept for compatibility)
is shown as ``very unstable``, so that it is not read as a failed ``critical`` check."""
SCORE_BOUNDS = (0.0, 100.0)
"""The range of a score (a run's, a test's, a suite's)."""
COMPONENT_BOUNDS = (0.0, 1.0)
"""The range of a score component."""
METRIC_BOUNDS = (0.0, math.inf)
"""The range of a metric (counts, seconds, dollars: never negative)."""


class Stats(msgspec.Struct, kw_only=True):
    """Descriptive statistics of one quantity over a test's runs."""

    n: int
    mean: float
    std: float | None
    """The sample standard deviation (n - 1 in the denominator); ``None`` for one value."""
    min: float
    max: float
    median: float
    ci_95: tuple[float, float] | None
    """The 95% confidence interval of the mean (Student's t, n - 1 degrees of freedom,
    clipped to the quantity's bounds when it has them); ``None`` for one value."""
    cv: float | None
    """The coefficient of variation, std / |mean|: 0 when every value is the same; ``None``
    for one value or a mean of 0 with a spread."""
    stability: Stability | None
    """The level of design 6.2 for ``cv``; ``None`` where ``cv`` is."""

    @property
    def half_width(self) -> float | None:
        """Half the width of the 95% confidence interval."""
        if self.ci_95 is None:
            return None
        return (self.ci_95[1] - self.ci_95[0]) / 2


def stability(cv: float | None) -> Stability | None:
    """The stability level of a coefficient of variation (design 6.2)."""
    if cv is None:
        return None
    for bound, level in STABILITY_LEVELS:
        if cv < bound:
            return level
    return "critical"


def stability_word(level: Stability) -> str:
    """The words a report shows for a stability level (see :data:`STABILITY_WORDS`)."""
    return STABILITY_WORDS.get(level, level)


def describe(values: Sequence[float], bounds: tuple[float, float] | None = None) -> Stats:
    """The statistics of one or more finite values; ``bounds``: the range the quantity cannot
    leave (``(0, 100)`` for a score), to which the confidence interval is clipped."""
    n = len(values)
    if n == 0:
        raise ValueError("describe() needs at least one value")
    mean = fmean(values)
    low, high, middle = min(values), max(values), median(values)
    if n == 1:
        return Stats(
            n=1, mean=mean, std=None, min=low, max=high, median=middle, ci_95=None, cv=None, stability=None
        )
    if low == high:  # exactly: no rounding makes a spread out of identical values
        mean = low
        std = 0.0
    else:
        std = math.sqrt(max(sum((v - mean) ** 2 for v in values) / (n - 1), 0.0))
    half = t_quantile(1 - ALPHA / 2, n - 1) * std / math.sqrt(n)
    cv: float | None
    if std == 0.0:
        cv = 0.0
    elif mean == 0.0:
        cv = None
    else:
        cv = std / abs(mean)
    return Stats(
        n=n,
        mean=mean,
        std=std,
        min=low,
        max=high,
        median=middle,
        ci_95=clip((mean - half, mean + half), bounds),
        cv=cv,
        stability=stability(cv),
    )


def clip(interval: tuple[float, float], bounds: tuple[float, float] | None) -> tuple[float, float]:
    """``interval`` with each end moved inside ``bounds`` (unchanged without bounds)."""
    if bounds is None:
        return interval
    low, high = bounds
    return (min(max(interval[0], low), high), min(max(interval[1], low), high))


# --- pass@k and pass^k ---------------------------------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of k runs passes, estimated without bias from n runs of
    which c passed: 1 - C(n-c, k) / C(n, k)."""
    _check_nck(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The chance that all of k runs pass (pass^k), estimated without bias from n runs of
    which c passed: C(c, k) / C(n, k)."""
    _check_nck(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check_nck(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")


def k_values(n: int) -> list[int]:
    """The k for which pass@k and pass^k are reported from n runs: 1, 3, 5, 10, 20, 50, 100
    up to n, and n itself."""
    return sorted({k for k in (1, 3, 5, 10, 20, 50, 100) if k <= n} | ({n} if n >= 1 else set()))


# --- Student's t -----------------------------------------------------------------------------

_TINY = 1e-300
_EPSILON = 1e-15
_MAX_TERMS = 1000
_NORMAL = NormalDist()


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function (modified Lentz)."""
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    result = d
    for m in range(1, _MAX_TERMS + 1):
        two_m = 2 * m
        even = m * (b - m) * x / ((a + two_m - 1.0) * (a + two_m))
        d = 1.0 + even * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + even / c
        c = c if abs(c) > _TINY else _TINY
        result *= d * c
        odd = -(a + m) * (a + b + m) * x / ((a + two_m) * (a + two_m + 1.0))
        d = 1.0 + odd * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + odd / c
        c = c if abs(c) > _TINY else _TINY
        step = d * c
        result *= step
        if abs(step - 1.0) < _EPSILON:
            break
    return result


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


_LARGE_DF = 1e5
"""From this many degrees of freedom, Student's t is computed from the normal distribution by
the Cornish-Fisher expansion (to within 1e-13 of SciPy there); below it, from the beta function."""
_HALF_LOG_PI = 0.5 * math.log(math.pi)


def _log_gamma_ratio(a: float) -> float:
    """ln Γ(a + 1/2) - ln Γ(a), without the cancellation of two large log-gammas for large a."""
    if a < 1e3:
        return math.lgamma(a + 0.5) - math.lgamma(a)
    return 0.5 * math.log(a) - 1.0 / (8.0 * a) + 1.0 / (192.0 * a**3)


def _cornish_fisher(x: float, df: float) -> float:
    """The t quantile whose normal quantile is ``x`` (Abramowitz and Stegun 26.7.5, four terms)."""
    x2 = x * x
    g1 = (x2 + 1.0) * x / 4.0
    g2 = ((5.0 * x2 + 16.0) * x2 + 3.0) * x / 96.0
    g3 = (((3.0 * x2 + 19.0) * x2 + 17.0) * x2 - 15.0) * x / 384.0
    g4 = ((((79.0 * x2 + 776.0) * x2 + 1482.0) * x2 - 1920.0) * x2 - 945.0) * x / 92160.0
    return x + (g1 + (g2 + (g3 + g4 / df) / df) / df) / df


def _t_split(t: float, df: float) -> tuple[float, float]:
    """``(P(|T| >= |t|), P(|T| < |t|))``: the smaller of the two is computed directly, so each
    keeps its precision (the other is 1 minus it)."""
    t = abs(t)
    if t == 0.0:
        return 1.0, 0.0
    if math.isinf(t):
        return 0.0, 1.0
    if df >= _LARGE_DF:
        # Solve t = cornish_fisher(z) for the normal deviate z (Newton from z = t).
        z = t
        for _ in range(50):
            following = z - (_cornish_fisher(z, df) - t) / (1.0 + (3.0 * z * z + 1.0) / (4.0 * df))
            if following == z:
                break
            z = following
        z /= math.sqrt(2.0)
        return (math.erfc(z), math.erf(z)) if z > 0.5 else (1.0 - math.erf(z), math.erf(z))
    # I_x(df/2, 1/2) with x = df / (df + t^2) is the outer probability and I_{1-x}(1/2, df/2) the
    # inner one; the logarithms of x and 1 - x are taken from q = t^2 / df, never from x itself.
    a = df / 2.0
    q = t * t / df
    log_q = 2.0 * math.log(t) - math.log(df)  # q itself may underflow
    log_front = _log_gamma_ratio(a) - _HALF_LOG_PI - a * math.log1p(q) + 0.5 * (log_q - math.log1p(q))
    front = math.exp(log_front)
    x = 1.0 / (1.0 + q)
    if x < (a + 1.0) / (a + 2.5):
        outer = front * _beta_fraction(a, 0.5, x) / a
        return outer, 1.0 - outer
    inner = front * _beta_fraction(0.5, a, q / (1.0 + q)) / 0.5
    return 1.0 - inner, inner


def t_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom (the two-sided p-value)."""
    return min(1.0, _t_split(t, df)[0])


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    outer, inner = _t_split(t, df)
    if t < 0:
        return outer / 2.0
    return 0.5 + inner / 2.0


def t_density(t: float, df: float) -> float:
    """The density of Student's t with ``df`` degrees of freedom at ``t``."""
    log_norm = _log_gamma_ratio(df / 2.0) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1.0) / 2.0 * math.log1p(t * t / df))


@lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (0 < p < 1).

    Halley's method from the Cornish-Fisher approximation, on whichever of P(T > t) and
    P(0 < T < t) is the smaller (for precision), kept inside a bracket that bisection narrows
    when a step would leave it; from :data:`_LARGE_DF` degrees of freedom, the Cornish-Fisher
    expansion itself. Cached: few distinct ones are asked for."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1, not {p}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if df >= _LARGE_DF:
        return _cornish_fisher(_NORMAL.inv_cdf(p), df)
    centre = p <= 0.75
    target = p - 0.5 if centre else 1.0 - p  # both exact in binary
    low, high = 0.0, math.inf
    t = max(_cornish_fisher(_NORMAL.inv_cdf(p), df), 1e-300)
    for _ in range(200):
        outer, inner = _t_split(t, df)
        excess = (target - inner / 2.0) if centre else (outer / 2.0 - target)
        if excess == 0.0:
            return t
        if excess > 0.0:
            low = t
        else:
            high = t
        step = excess / t_density(t, df)  # Newton's step, then Halley's correction of it
        correction = 1.0 - step * (df + 1.0) * t / (2.0 * (df + t * t))
        following = t + (step / correction if correction > 0.5 else step)
        if not low < following < high:
            following = (low + high) / 2.0 if math.isfinite(high) else t * 2.0
        if abs(following - t) <= 1e-15 * following:
            return following
        t = following
    return t


# --- tests of a difference -------------------------------------------------------------------


class Sample(msgspec.Struct, frozen=True):
    """What a test of a difference needs of one side: its size, mean and sample variance."""

    n: int
    mean: float
    variance: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Sample:
        n = len(values)
        mean = fmean(values) if values else 0.0
        if n > 1 and min(values) != max(values):
            variance = sum((v - mean) ** 2 for v in values) / (n - 1)
        else:
            variance = 0.0
        return cls(n=n, mean=mean, variance=variance)

    @classmethod
    def from_stats(cls, stats: Stats) -> Sample:
        return cls(n=stats.n, mean=stats.mean, variance=(stats.std or 0.0) ** 2)


class Running:
    """The size, mean and variance of values added one at a time (Welford's method)."""

    __slots__ = ("_high", "_low", "_squares", "mean", "n")

    def __init__(self) -> None:
        self.n = 0
        self.mean = 0.0
        self._squares = 0.0
        self._low = math.inf
        self._high = -math.inf

    def add(self, value: float) -> Sample:
        self.n += 1
        step = value - self.mean
        self.mean += step / self.n
        self._squares += step * (value - self.mean)
        self._low, self._high = min(self._low, value), max(self._high, value)
        return self.sample()

    def sample(self) -> Sample:
        spread = self.n > 1 and self._low != self._high
        return Sample(
            n=self.n, mean=self.mean, variance=max(self._squares / (self.n - 1), 0.0) if spread else 0.0
        )


class Difference(msgspec.Struct, kw_only=True):
    """The difference ``current - reference`` of two means and its test."""

    delta: float
    """current mean - reference mean."""
    t: float | None
    df: float | None
    p_value: float
    ci_95: tuple[float, float]
    """The 95% confidence interval of ``delta``."""
    note: str | None = None
    """Why the test is degenerate, when it is (no variance on either side)."""


def welch_terms(current: Sample, reference: Sample) -> tuple[float, float, float | None]:
    """``(delta, se, df)`` of Welch's t-test of ``current.mean - reference.mean``: the
    difference, its standard error and the Welch-Satterthwaite degrees of freedom (``None``
    when ``se`` is 0: neither side varies). Each side needs at least 2 values."""
    if current.n < 2 or reference.n < 2:
        raise ValueError("Welch's t-test needs at least 2 values on each side")
    delta = current.mean - reference.mean
    va, vb = current.variance / current.n, reference.variance / reference.n
    se2 = va + vb
    if se2 <= 0.0:
        return delta, 0.0, None
    df = (
        se2
        * se2
        / ((va * va / (current.n - 1) if va else 0.0) + (vb * vb / (reference.n - 1) if vb else 0.0))
    )
    return delta, math.sqrt(se2), df


def welch(current: Sample, reference: Sample, confidence: float = CONFIDENCE) -> Difference:
    """Welch's t-test of ``current.mean - reference.mean`` (unequal variances, Welch-Satterthwaite
    degrees of freedom), two-sided, with the confidence interval of the difference. Each side
    needs at least 2 values."""
    delta, se, df = welch_terms(current, reference)
    if df is None:
        same = delta == 0.0
        return Difference(
            delta=delta,
            t=None,
            df=None,
            p_value=1.0 if same else 0.0,
            ci_95=(delta, delta),
            note=(
                "every run scored the same on both sides"
                if same
                else "every run scored the same on each side, and the sides differ: the difference is exact"
            ),
        )
    t = delta / se
    half = t_quantile(1 - (1 - confidence) / 2, df) * se
    return Difference(delta=delta, t=t, df=df, p_value=t_two_sided(t, df), ci_95=(delta - half, delta + half))


def paired(differences: Sequence[float], confidence: float = CONFIDENCE) -> Difference:
    """The paired t-test of the mean of ``differences`` (one per shared task) against 0."""
    n = len(differences)
    if n < 2:
        raise ValueError("the paired t-test needs at least 2 pairs")
    sample = Sample.of(differences)
    delta = sample.mean
    if sample.variance == 0.0:
        same = delta == 0.0
        return Difference(
            delta=delta,
            t=None,
            df=float(n - 1),
            p_value=1.0 if same else 0.0,
            ci_95=(delta, delta),
            note="every pair differs by the same amount" if not same else "every pair is equal",
        )
    se = math.sqrt(sample.variance / n)
    t = delta / se
    df = float(n - 1)
    half = t_quantile(1 - (1 - confidence) / 2, df) * se
    return Difference(delta=delta, t=t, df=df, p_value=t_two_sided(t, df), ci_95=(delta - half, delta + half))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (in their order): a test is
    significant after correction when its adjusted p-value is below the level."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def normal_quantile(p: float) -> float:
    return _NORMAL.inv_cdf(p)
