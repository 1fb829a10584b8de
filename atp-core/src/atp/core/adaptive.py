"""Adaptive run counts: run a test until its result is known well enough, then stop.

``runs_per_test: auto`` (or ``--runs=auto``) gives a test an :class:`Adaptive` plan. After each
finished run the runner asks :func:`decide` whether the test may stop; a decision is taken at
each *look*, the moment the test has n finished runs (n from ``min_runs`` to ``max_runs``):

- **Without a baseline** for the test: stop once the 95% confidence interval of the mean score
  is at most ``ci_width`` points either side of the mean, or at ``max_runs``.
- **With a baseline** (``--baseline``): a group-sequential comparison. At look n, Welch's
  t-test of the runs so far against the baseline's runs is significant when its p-value is
  below ``alpha_n``, the share of the 5% error rate that look may spend::

      spend(f) = 2 - 2 Φ(z / sqrt(f)),  z = 1.96       (the O'Brien-Fleming type, Lan and DeMets)
      alpha_n  = spend(n / max_runs) - spend((n - 1) / max_runs),   alpha_min = spend(min_runs / max_runs)

  The shares add up to 5% over every look up to ``max_runs``, so by the union bound the chance
  of declaring a regression (or an improvement) that is not there stays at or under 5%, however
  many looks are taken; testing each look at 5% (the naive repeated t-test) would not. This
  type spends almost nothing at the first looks (4e-7 at 3 runs of 20), where Welch's test of
  a few runs is least accurate so far out in the tail, and most of the 5% late. The test
  also stops, as *equivalent*, once the 95% interval of the difference lies within
  ``min_effect`` points either way: a change that large is ruled out. Stopping for that reason
  can only lower the error rate. At ``max_runs`` without either, it stops with no significant
  change.

  Over a suite, ``alpha`` (5%) is shared too: with Holm's correction (the default), each of the
  m adaptive tests compared with the baseline spends 5%/m (Bonferroni, which for sequential
  tests is what Holm's first step is), so a suite of unchanged tests fails at most 5% of the time.

Until a test has ``SAME_SCORE_RUNS`` (10) runs, runs that all scored the same decide nothing:
a few equal scores are no evidence that the score does not vary (a test that passes 80% of the
time passes its first three runs half the time).

The decision is a function of the scores in the order the runs finished, so ``atp report``
replays it over the stored results (which keep that order) and says the same as the live run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from statistics import NormalDist
from typing import Literal

import msgspec

from atp.core.stats import ALPHA, CONFIDENCE, Running, Sample, t_quantile, t_two_sided, welch, welch_terms

StopReason = Literal["ci_width", "regression", "improvement", "equivalent", "max_runs"]

DEFAULT_MIN_RUNS = 3
DEFAULT_MAX_RUNS = 20
DEFAULT_CI_WIDTH = 5.0
DEFAULT_MIN_EFFECT = 5.0
SAME_SCORE_RUNS = 10
"""Runs that all scored the same decide nothing before there are this many: a spread of 0 from
a few runs (three passes of a test that passes 80% of the time, half the time) is no evidence
of a spread of 0, and taking it as one would stop too early and declare false changes."""


class Adaptive(msgspec.Struct, frozen=True, kw_only=True):
    """A test's adaptive run count."""

    min_runs: int = DEFAULT_MIN_RUNS
    max_runs: int = DEFAULT_MAX_RUNS
    ci_width: float = DEFAULT_CI_WIDTH
    """The target half-width, in score points, of the 95% confidence interval of the mean."""
    min_effect: float = DEFAULT_MIN_EFFECT
    """With a baseline: the smallest change in mean score (points) worth finding; once the
    interval of the difference rules out a change this large, the test stops as equivalent."""


class Stop(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Why an adaptive test stopped, after how many runs."""

    runs: int
    reason: StopReason
    message: str
    p_value: float | None = None
    alpha: float | None = None
    """The significance level of the look that decided (with a baseline)."""


def spend(fraction: float, alpha: float = ALPHA) -> float:
    """The error rate spent by the look at ``fraction`` of the maximum runs (the O'Brien-Fleming
    type spending function of Lan and DeMets): ``2 - 2 Φ(z / sqrt(fraction))``, z the normal
    quantile of ``1 - alpha / 2``; ``alpha`` itself at ``fraction`` 1."""
    if fraction <= 0.0:
        return 0.0
    if fraction >= 1.0:
        return alpha
    return math.erfc(_z(alpha) / math.sqrt(2.0 * fraction))


@lru_cache(maxsize=64)
def _z(alpha: float) -> float:
    return NormalDist().inv_cdf(1.0 - alpha / 2.0)


def look_alpha(plan: Adaptive, n: int, alpha: float = ALPHA) -> float:
    """The significance level of the look at n finished runs."""
    if n < plan.min_runs or n > plan.max_runs:
        return 0.0
    if n == plan.min_runs:
        return spend(n / plan.max_runs, alpha)
    return spend(n / plan.max_runs, alpha) - spend((n - 1) / plan.max_runs, alpha)


def decide(
    plan: Adaptive, current: Sample, baseline: Sample | None = None, alpha: float = ALPHA
) -> Stop | None:
    """The decision at the look of ``current.n`` finished runs (their scores' size, mean and
    variance): a :class:`Stop`, or ``None`` to run on."""
    n = current.n
    if n < max(plan.min_runs, 1):
        return None
    if current.variance == 0.0 and n < min(SAME_SCORE_RUNS, plan.max_runs):
        return None  # a few equal scores (three passes of a pass/fail test) prove no precision
    if baseline is not None and baseline.n >= 2 and n >= 2:
        stop = _compared(plan, current, baseline, look_alpha(plan, n, alpha), alpha)
        if stop is not None:
            return stop
    elif n >= 2:
        half = t_quantile(1 - ALPHA / 2, n - 1) * math.sqrt(current.variance / n)
        if half <= plan.ci_width:
            return Stop(
                runs=n,
                reason="ci_width",
                message=f"95% interval ±{half:.1f} ≤ ±{plan.ci_width:g} points after {n} runs",
            )
    if n >= plan.max_runs:
        verdict = (
            "with no significant change"
            if baseline is not None and baseline.n >= 2
            else "before the interval was narrow enough"
        )
        return Stop(runs=n, reason="max_runs", message=f"reached max_runs ({plan.max_runs}) {verdict}")
    return None


def _compared(plan: Adaptive, current: Sample, baseline: Sample, level: float, alpha: float) -> Stop | None:
    """The look's decision against the baseline: a significant change at ``level``, or
    equivalence (the difference's 95% interval within ``min_effect`` points either way).

    The interval is only computed for a test that stops: it lies within ``±min_effect`` exactly
    when ``|delta| + q se < min_effect`` (q the t quantile), that is when the two-sided p-value
    of ``(min_effect - |delta|) / se`` is below 1 - 95%, which costs no quantile."""
    n = current.n
    delta, se, df = welch_terms(current, baseline)
    p_value = (1.0 if delta == 0.0 else 0.0) if df is None else t_two_sided(delta / se, df)
    if p_value < level:
        worse = delta < 0
        return Stop(
            runs=n,
            reason="regression" if worse else "improvement",
            message=(
                f"{'regression' if worse else 'improvement'} of {delta:+.1f} points decided "
                f"after {n} runs (p = {p_value:.2g} < {level:.2g}, this look's share of {alpha:.2g})"
            ),
            p_value=p_value,
            alpha=level,
        )
    margin = plan.min_effect - abs(delta)
    if margin > 0 and (df is None or t_two_sided(margin / se, df) < 1.0 - CONFIDENCE):
        low, high = welch(current, baseline).ci_95
        return Stop(
            runs=n,
            reason="equivalent",
            message=(
                f"no change of {plan.min_effect:g} points or more (95% interval of the difference "
                f"{low:+.1f} to {high:+.1f}) after {n} runs"
            ),
            p_value=p_value,
            alpha=level,
        )
    return None


def replay(
    plan: Adaptive, scores: Sequence[float], baseline: Sample | None = None, alpha: float = ALPHA
) -> Stop | None:
    """The first look that stopped, over scores in the order their runs finished: what the
    runner decided live (runs in flight when it stopped finish, and come after)."""
    running = Running()
    for score in scores:
        current = running.add(score)
        stop = decide(plan, current, baseline, alpha)
        if stop is not None:
            return stop
    return None
