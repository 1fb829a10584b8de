"""Baselines and regressions (design section 10): a saved picture of how an agent scored on a
suite, and the per-test comparison of a later run with it.

The baseline file is design 10.1's format, extended with each run's score, outcome and metrics
and with fingerprints of the suite's tests::

    {"format": "atp-baseline", "version": "1.0", "created_at": "...", "suite": "...",
     "agent": "...", "suite_fingerprint": "...",
     "tests": {"basic": {"mean_score": 85.2, "std": 3.1, "n_runs": 5, "ci_95": [82.1, 88.3],
                         "fingerprint": "...", "runs": [{"score": 84.0, "passed": true,
                         "metrics": {"total_tokens": 1200}}, ...]}}}

A file with only design 10.1's fields is read too (its comparisons use the summary statistics).

Each test is compared with Welch's t-test (from the raw scores when both sides have them, from
the summary statistics otherwise; the two give the same figures), two-sided: a *regression* is
p < 0.05 with a lower mean, an *improvement* p < 0.05 with a higher one. Over many tests, Holm's
correction is applied too, so that 50 unchanged tests do not raise alarms by chance; both
verdicts are kept. A test compared under an adaptive run count takes the verdict of its
sequential rule (:mod:`atp.core.adaptive`). What cannot be compared (another suite, a test on
one side only, fewer than 2 runs on a side) is said, and given no p-value.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal

import msgspec

from atp.core import files
from atp.core.adaptive import Adaptive, Stop
from atp.core.bounds import number_in, shown_bound, shown_number
from atp.core.errors import AtpError
from atp.core.protocol import MAX_METRIC
from atp.core.stats import ALPHA, Difference, Sample, holm, welch

BASELINE_FORMAT = "atp-baseline"
BASELINE_VERSION = "1.0"
MAX_BASELINE_RUNS = 1_000_000
"""The most runs a test of a baseline may have (``n_runs``)."""
MAX_CI = 1_000_000.0
"""How far from 0 an end of a test's ``ci_95`` in a baseline may be (the interval of a mean of
scores 0 to 100 from two runs reaches about -600 and 700)."""

Verdict = Literal["regression", "improvement", "no_change", "not_compared"]
Correction = Literal["holm", "none"]


class BaselineRun(msgspec.Struct, kw_only=True, omit_defaults=True):
    score: float
    passed: bool | None = None
    metrics: dict[str, float] = msgspec.field(default_factory=dict)


class BaselineTest(msgspec.Struct, kw_only=True, omit_defaults=True):
    mean_score: float
    std: float | None = None
    n_runs: int
    ci_95: tuple[float, float] | None = None
    fingerprint: str | None = None
    runs: list[BaselineRun] = msgspec.field(default_factory=list)

    def sample(self) -> Sample | None:
        """The sample a comparison uses: the raw scores when the file has them, else the
        summary statistics; ``None`` when neither gives a spread (n < 2, no std)."""
        if len(self.runs) == self.n_runs and self.runs:
            return Sample.of([run.score for run in self.runs])
        if self.std is None:
            return None
        return Sample(n=self.n_runs, mean=self.mean_score, variance=self.std**2)


class Baseline(msgspec.Struct, kw_only=True):
    format: str = BASELINE_FORMAT
    version: str = BASELINE_VERSION
    created_at: datetime | None = None
    suite: str
    agent: str | None = None
    suite_fingerprint: str | None = None
    run_id: str | None = None
    tests: dict[str, BaselineTest] = msgspec.field(default_factory=dict)


_decoder = msgspec.json.Decoder(Baseline)


def read_baseline(path: Path) -> Baseline:
    """A baseline file; a missing, unreadable or malformed one is an :class:`AtpError`."""
    try:
        data = files.read_bytes(path)
    except OSError as exc:
        raise AtpError(f"cannot read the baseline {path}: {files.reason(exc)}") from None
    try:
        baseline = _decoder.decode(data)
    except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError) as exc:
        raise AtpError(f"{path} is not an ATP baseline file: {exc}") from None
    if baseline.format != BASELINE_FORMAT:
        raise AtpError(f"{path} is not an ATP baseline file (its format is {baseline.format!r})")
    if baseline.version.split(".", 1)[0] != BASELINE_VERSION.split(".", 1)[0]:
        raise AtpError(f"{path} is a baseline of version {baseline.version}; ATP reads version 1.x")
    problem = out_of_bounds(baseline)
    if problem is not None:
        raise AtpError(f"{path} is not a baseline ATP can use: {problem}")
    return baseline


def out_of_bounds(baseline: Baseline) -> str | None:
    """The first number of ``baseline`` beyond its bound, named by its field and value; ``None``
    when every number is within. Scores, their means and standard deviations are 0 to 100,
    ``n_runs`` (and the runs listed) 1 to :data:`MAX_BASELINE_RUNS`, the ends of ``ci_95``
    within :data:`MAX_CI`, metrics 0 to 10^15: a file edited (or made by another tool) with NaN,
    a std of 1e200 or 10^18 runs would otherwise overflow the comparison, or make a drop of 50
    points look like no change."""
    for test_id, test in baseline.tests.items():
        where = f"tests.{test_id}"
        if len(test.runs) > MAX_BASELINE_RUNS:
            return f"{where}.runs lists {len(test.runs)} runs (at most {MAX_BASELINE_RUNS})"
        fields: list[tuple[str, object, float, float, bool]] = [
            ("mean_score", test.mean_score, 0, 100, False),
            ("std", test.std, 0, 100, False),
            ("n_runs", test.n_runs, 1, MAX_BASELINE_RUNS, True),
        ]
        if test.ci_95 is not None:
            fields += [(f"ci_95[{i}]", end, -MAX_CI, MAX_CI, False) for i, end in enumerate(test.ci_95)]
        for index, run in enumerate(test.runs):
            fields.append((f"runs[{index}].score", run.score, 0, 100, False))
            fields.extend(
                (f"runs[{index}].metrics.{name}", value, 0, MAX_METRIC, False)
                for name, value in run.metrics.items()
            )
        for field, value, low, high, integer in fields:
            if value is not None and number_in(value, low, high, integer=integer) is None:
                kind = "an integer" if integer else "a number"
                return f"{where}.{field} = {shown_number(value)} is out of bounds ({kind} from {shown_bound(low)} to {shown_bound(high)})"
    return None


def encode_baseline(baseline: Baseline) -> bytes:
    return msgspec.json.format(msgspec.json.encode(baseline), indent=2) + b"\n"


class TestComparison(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One test of a run compared with the baseline."""

    __test__ = False

    verdict: Verdict
    verdict_holm: Verdict | None = None
    """The verdict after Holm's correction over every test compared by a p-value."""
    method: Literal["welch", "welch-summary", "sequential"] | None = None
    baseline_mean: float | None = None
    current_mean: float | None = None
    baseline_runs: int = 0
    current_runs: int = 0
    delta: float | None = None
    delta_percent: float | None = None
    """The change relative to the baseline's mean; ``None`` when that mean is 0."""
    ci_95: tuple[float, float] | None = None
    """The 95% confidence interval of the difference of the means."""
    p_value: float | None = None
    p_holm: float | None = None
    reason: str | None = None
    """Why the test was not compared, or what to know about the comparison."""
    changed: bool = False
    """The test's definition is not the one the baseline was made with."""


class BaselineComparison(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A run compared with a baseline."""

    file: str | None = None
    suite: str
    agent: str | None = None
    created_at: datetime | None = None
    correction: Correction = "holm"
    """Which verdict fails the build: Holm's (the default) or each test's own."""
    fail_on_regression: bool = True
    """Whether a regression fails the run (exit code 1)."""
    regressions: int = 0
    improvements: int = 0
    regressions_holm: int = 0
    improvements_holm: int = 0
    compared: int = 0
    not_in_run: list[str] = msgspec.field(default_factory=list)
    """Tests of the baseline that this run did not run."""
    problems: list[str] = msgspec.field(default_factory=list)

    @property
    def failing_regressions(self) -> int:
        return self.regressions_holm if self.correction == "holm" else self.regressions


def sequential_alpha(compared: int, correction: Correction) -> float:
    """The error rate each adaptive test compared with a baseline may spend: 5%, or with Holm's
    correction over ``compared`` such tests, 5%/``compared`` (Bonferroni: Holm's first step)."""
    return ALPHA / compared if correction == "holm" and compared > 1 else ALPHA


class Compared(msgspec.Struct, kw_only=True):
    """What the comparison needs of one test of the run."""

    id: str
    scores: list[float]
    """In the order the runs finished."""
    fingerprint: str | None = None
    adaptive: Adaptive | None = None
    stop: Stop | None = None
    """An adaptive test's stop: the sequential rule replayed over ``scores`` (with this
    baseline and the share of 5% :func:`sequential_alpha` gives it) by the caller, who knows
    how many adaptive tests the run planned; ``None`` when the rule never stopped it."""


def _not_compared(reason: str, baseline: BaselineTest | None, current: Sequence[float]) -> TestComparison:
    return TestComparison(
        verdict="not_compared",
        verdict_holm="not_compared",
        baseline_mean=baseline.mean_score if baseline is not None else None,
        baseline_runs=baseline.n_runs if baseline is not None else 0,
        current_mean=sum(current) / len(current) if current else None,
        current_runs=len(current),
        reason=reason,
    )


def _verdict(difference: Difference, significant: bool) -> Verdict:
    if not significant:
        return "no_change"
    return "regression" if difference.delta < 0 else "improvement"


def compare_test(test: Compared, reference: BaselineTest | None) -> TestComparison:
    """One test against its baseline entry (Holm's correction is applied over the suite by
    :func:`compare`)."""
    scores = test.scores
    if reference is None:
        return _not_compared("not in the baseline", None, scores)
    sample = reference.sample()
    if len(scores) < 2 or sample is None or sample.n < 2:
        sides = []
        if sample is None or sample.n < 2:
            sides.append(f"the baseline has {reference.n_runs} run{'s' if reference.n_runs != 1 else ''}")
        if len(scores) < 2:
            sides.append(f"this run has {len(scores)}")
        advice = "run with --runs=2 or more" if len(scores) < 2 else "save the baseline with --runs=2 or more"
        return _not_compared(
            f"a comparison needs at least 2 runs on each side ({' and '.join(sides)}); {advice}",
            reference,
            scores,
        )
    current = Sample.of(scores)
    difference = welch(current, sample)
    raw = bool(reference.runs) and len(reference.runs) == reference.n_runs
    method: Literal["welch", "welch-summary", "sequential"] = "welch" if raw else "welch-summary"
    verdict = _verdict(difference, difference.p_value < ALPHA)
    reason = difference.note
    if test.adaptive is not None:
        stop = test.stop
        method = "sequential"
        verdict = "no_change"
        if stop is not None and stop.reason == "regression":
            verdict = "regression"
        elif stop is not None and stop.reason == "improvement":
            verdict = "improvement"
        if stop is not None:
            reason = stop.message
    changed = bool(test.fingerprint and reference.fingerprint and test.fingerprint != reference.fingerprint)
    if changed:
        note = "the test changed since the baseline was saved (its task, checks, limits or scoring differ)"
        reason = f"{reason}; {note}" if reason else note
    return TestComparison(
        verdict=verdict,
        method=method,
        baseline_mean=sample.mean,
        current_mean=current.mean,
        baseline_runs=sample.n,
        current_runs=current.n,
        delta=difference.delta,
        delta_percent=(difference.delta / sample.mean * 100.0) if sample.mean != 0 else None,
        ci_95=difference.ci_95,
        p_value=difference.p_value,
        reason=reason,
        changed=changed,
    )


def compare(
    baseline: Baseline,
    suite: str,
    tests: Sequence[Compared],
    *,
    file: str | None = None,
    correction: Correction = "holm",
    fail_on_regression: bool = True,
) -> tuple[BaselineComparison, dict[str, TestComparison]]:
    """Every test of a run against the baseline: the summary and each test's comparison."""
    summary = BaselineComparison(
        file=file,
        suite=baseline.suite,
        agent=baseline.agent,
        created_at=baseline.created_at,
        correction=correction,
        fail_on_regression=fail_on_regression,
    )
    if baseline.suite != suite:
        summary.problems.append(
            f"the baseline is of another suite ({baseline.suite!r}; this run is of {suite!r}): nothing was "
            f"compared. Save a baseline of this suite with 'atp baseline save'"
        )
        reason = f"the baseline is of another suite ({baseline.suite!r})"
        return summary, {t.id: _not_compared(reason, None, t.scores) for t in tests}
    results = {t.id: compare_test(t, baseline.tests.get(t.id)) for t in tests}
    ran = {t.id for t in tests}
    summary.not_in_run = [test_id for test_id in baseline.tests if test_id not in ran]
    family = [test_id for test_id, c in results.items() if c.p_value is not None and c.method != "sequential"]
    for test_id, adjusted in zip(family, holm([results[i].p_value or 0.0 for i in family]), strict=True):
        comparison = results[test_id]
        comparison.p_holm = adjusted
        comparison.verdict_holm = (
            "no_change" if comparison.verdict == "no_change" or adjusted >= ALPHA else comparison.verdict
        )
    for comparison in results.values():
        if comparison.verdict_holm is None:
            comparison.verdict_holm = comparison.verdict
        if comparison.verdict != "not_compared":
            summary.compared += 1
        summary.regressions += comparison.verdict == "regression"
        summary.improvements += comparison.verdict == "improvement"
        summary.regressions_holm += comparison.verdict_holm == "regression"
        summary.improvements_holm += comparison.verdict_holm == "improvement"
    return summary, results
