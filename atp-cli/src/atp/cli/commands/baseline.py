"""``atp baseline``: save a baseline of an agent's scores on a suite, and compare a run with
one: a stored run, or the suite run now (design sections 6.1 and 10).

    atp baseline save --suite=suite.yaml --agent=my-agent --runs=5 --output=baseline.json
    atp baseline save --from=.atp/runs/<run-id> --output=baseline.json
    atp baseline compare --baseline=baseline.json [.atp/runs/<run-id>]
    atp baseline compare --agent=my-agent --suite=suite.yaml --baseline=baseline.json

A suite is run the way ``atp test`` runs it (:mod:`atp.cli.running`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import msgspec

from atp.cli.app import (
    RunsType,
    check_verbosity,
    debug_option,
    suite_config_option,
    verbosity_options,
    write_output,
)
from atp.cli.tables import p_text, table
from atp.core.hookspecs import hookimpl
from atp.core.text import printable

if TYPE_CHECKING:
    from atp.cli.running import Options
    from atp.core.baseline import Baseline, BaselineComparison, BaselineTest, TestComparison
    from atp.core.config import Config
    from atp.core.results import RunHeader, SuiteResults

MIN_RUNS = 2
"""A comparison needs at least this many runs of a test on each side."""
LISTED = 10
"""How many test names a warning lists before it says how many more."""


@click.group("baseline")
def baseline_command() -> None:
    """Save a baseline of an agent's scores on a suite, or compare a run with one.

    \b
    Save:     atp baseline save --suite=suite.yaml --agent=my-agent --runs=5 --output=baseline.json
    Compare:  atp baseline compare --baseline=baseline.json [RUN_DIR]
    Run and compare: atp baseline compare --agent=my-agent --suite=suite.yaml --baseline=baseline.json
    In a run: atp test --suite=suite.yaml --agent=my-agent --baseline=baseline.json
    """


# --- atp baseline save -------------------------------------------------------------------------


class _RunDirectory:
    """A lifecycle plugin that learns the run directory of the suite being run."""

    def __init__(self) -> None:
        self.directory: Path | None = None

    @hookimpl
    def atp_suite_started(self, header: RunHeader, directory: Path) -> None:
        self.directory = directory


@baseline_command.command(
    "save", short_help="Run a suite (or take a stored run) and write the baseline of its scores."
)
@click.option(
    "--suite",
    "suite_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The suite to run (a YAML file).",
)
@click.option(
    "--agent", "agent_name", help="The agent to run it against, by name (optional when only one is defined)."
)
@click.option(
    "--from",
    "from_dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Save the baseline of this stored run directory instead of running the suite.",
)
@click.option(
    "--output",
    "output",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="The baseline file to write (replaced if it exists).",
)
@click.option(
    "--runs",
    type=RunsType(),
    help="Runs per test, overriding the suite (5 or more make a useful baseline); 'auto' runs each test until its score is known well enough.",
)
@click.option("--parallel", type=click.IntRange(1, 1024), help="How many runs may be in flight at once.")
@click.option(
    "--run-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Where run directories go (default: .atp/runs).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Save the baseline of a run that was interrupted all the same (its tests may have fewer runs than planned).",
)
@verbosity_options
@suite_config_option("the suite")
@debug_option
def save_command(
    suite_path: Path | None,
    agent_name: str | None,
    from_dir: Path | None,
    output: Path,
    runs: int | str | None,
    parallel: int | None,
    run_dir: Path | None,
    force: bool,
    verbose: bool,
    quiet: bool,
    config_path: Path | None,
) -> int:
    """Run a suite (or take a stored run, with --from) and write the baseline of its scores:
    each test's runs, mean, standard deviation and 95% confidence interval.

    Exit code 0 when the baseline was written (also when tests failed: a baseline records
    scores), 2 for a usage, config, suite or file error, 130/143 when the run was interrupted.
    """
    from atp.cli.running import Options
    from atp.core.errors import AtpError
    from atp.core.results import RunStore

    check_verbosity(verbose, quiet)
    if from_dir is not None:
        given = [
            name
            for name, value in (
                ("--suite", suite_path),
                ("--agent", agent_name),
                ("--runs", runs),
                ("--parallel", parallel),
                ("--run-dir", run_dir),
            )
            if value is not None
        ]
        if given:
            raise click.UsageError(f"--from takes a stored run; {', '.join(given)} would run the suite again")
        _check_output(output, [from_dir / "run.json", from_dir / "results.jsonl"])
        store = RunStore.open(from_dir)
        results = store.results()
        _warn(store.problems)
        if (results.interrupted or results.stopped_by is not None) and not force:
            raise AtpError(
                f"the run in {from_dir} was interrupted{_stopped(results)}: its tests may have fewer runs "
                f"than planned. Run the suite again, or save this run anyway with --force"
            )
        return _save(results, output, store.directory)
    if suite_path is None:
        raise click.UsageError("name the suite to run with --suite=FILE, or a stored run with --from=RUN_DIR")
    options = Options(
        agent_name=agent_name, runs=runs, parallel=parallel, run_dir=run_dir, verbose=verbose, quiet=quiet
    )
    return _run_and_save(suite_path, output, options, force, config_path)


def _run_and_save(
    suite_path: Path, output: Path, options: Options, force: bool, config_path: Path | None
) -> int:
    from atp.core.config import load_config
    from atp.core.results import RunStore

    config = load_config(config_path, suites=[suite_path])
    _check_output(output, [suite_path] + ([config.path] if config.path is not None else []))
    code, directory = _run_now(suite_path, config, options)
    if directory is None:  # stopped before the run directory was made
        return code
    store = RunStore.open(directory)
    results = store.results()
    if (code in (130, 143) or results.interrupted or results.stopped_by is not None) and not force:
        click.echo(
            printable(
                f"atp: the run was interrupted{_stopped(results)}: no baseline written. Its finished runs "
                f"are in {directory}; save them anyway with "
                f"'atp baseline save --from={directory} --force --output={output}'"
            ),
            err=True,
        )
        return code if code in (130, 143) else 1
    written = _save(results, output, directory)
    return code if code in (2, 3) else written  # a reporter that failed still says so


def _run_now(suite_path: Path, config: Config, options: Options) -> tuple[int, Path | None]:
    """Run the suite as ``atp test`` does: its exit code and its run directory (``None`` when
    it stopped before the directory was made)."""
    from atp.cli.app import plugins
    from atp.cli.running import run_suite, setup_warnings

    setup_warnings()
    found = _RunDirectory()
    loaded = plugins()
    name = loaded.register(found, name=f"atp-baseline-run-{id(found)}")
    try:
        code = run_suite(suite_path, config, options, several=False)
    finally:
        loaded.unregister(name)
    return code, found.directory


def _stopped(results: SuiteResults) -> str:
    return f" (stopped by {results.stopped_by})" if results.stopped_by else ""


def _check_output(output: Path, inputs: Sequence[Path]) -> None:
    """Refuse an ``--output`` that cannot be written or would overwrite an input, before any run."""
    from atp.core.errors import ConfigError

    if output.is_dir():
        raise ConfigError(f"--output {output} is a directory; name a file in it")
    parent = output.parent
    if not parent.is_dir():
        raise ConfigError(f"--output {output}: the directory {parent} does not exist")
    for path in inputs:
        same = False
        with contextlib.suppress(OSError):
            same = output.exists() and path.exists() and output.samefile(path)
        if same:
            raise ConfigError(f"--output {output} is the input file {path}; it would be overwritten")


def _save(results: SuiteResults, output: Path, directory: Path) -> int:
    from atp.core.baseline import encode_baseline
    from atp.core.errors import AtpError
    from atp.core.results import baseline_of

    baseline = baseline_of(results)
    if not baseline.tests:
        raise AtpError(f"no test of the run in {directory} finished a run: there is no baseline to save")
    few = [test_id for test_id, test in baseline.tests.items() if test.n_runs < MIN_RUNS]
    if few:
        _warn(
            [
                f"{_names(few)} {'has' if len(few) == 1 else 'have'} fewer than {MIN_RUNS} runs: a comparison "
                f"needs at least {MIN_RUNS} runs per test; save with --runs=5 or more"
            ]
        )
    not_run = [t.id for t in results.tests if t.id not in baseline.tests]
    if not_run:
        _warn(
            [f"{_names(not_run)} did not run and {'is' if len(not_run) == 1 else 'are'} not in the baseline"]
        )
    write_output(output, encode_baseline(baseline))
    failed = [t.id for t in results.tests if t.status in ("failed", "error")]
    click.echo(printable(f"Baseline of {_count(len(baseline.tests), 'test')} written to {output}"))
    if failed:
        click.echo(
            printable(
                f"{_count(len(failed), 'test')} of the run failed ({_names(failed, quote=False)}); "
                f"the baseline records their scores all the same"
            )
        )
    return 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _names(ids: Sequence[str], *, quote: bool = True) -> str:
    shown = [repr(i) if quote else i for i in ids[:LISTED]]
    more = f" and {len(ids) - LISTED} more" if len(ids) > LISTED else ""
    label = "test" if len(ids) == 1 else "tests"
    return f"{label} {', '.join(shown)}{more}" if quote else f"{', '.join(shown)}{more}"


def _warn(problems: Sequence[str]) -> None:
    for problem in problems:
        click.echo(f"atp: warning: {printable(problem)}", err=True)


# --- atp baseline compare ----------------------------------------------------------------------


class ComparisonReport(msgspec.Struct, kw_only=True):
    """What ``atp baseline compare --output=json`` writes."""

    format: str = "atp-baseline-comparison"
    version: str = "1.0"
    run_id: str
    run_dir: str
    suite: str
    agent: str
    comparison: Any
    """The :class:`~atp.core.baseline.BaselineComparison`."""
    failing_regressions: int
    """The regressions that count under ``comparison.correction``."""
    exit_code: int
    tests: dict[str, Any] = msgspec.field(default_factory=dict)
    """Each test's :class:`~atp.core.baseline.TestComparison`, by id."""


@dataclasses.dataclass(frozen=True)
class Comparing:
    """How ``atp baseline compare`` compares and reports."""

    baseline_path: Path
    correction: str
    fail_on_regression: bool
    output: str
    output_file: Path | None

    @property
    def to_stdout(self) -> bool:
        """Whether the JSON comparison goes to standard output."""
        return self.output == "json" and (self.output_file is None or str(self.output_file) == "-")


@baseline_command.command(
    "compare",
    short_help="Compare a run with a baseline file, test by test: a stored run, or the suite run now.",
)
@click.argument("run_dir", required=False, type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--baseline",
    "baseline_path",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="The baseline file (atp baseline save).",
)
@click.option(
    "--suite",
    "suite_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Run this suite now, as atp test does, and compare its run (instead of a stored RUN_DIR).",
)
@click.option(
    "--agent",
    "agent_name",
    help="With --suite: the agent to run it against (optional when only one is defined).",
)
@click.option(
    "--runs",
    type=RunsType(),
    help="With --suite: runs per test, overriding the suite (a comparison needs 2 or more); 'auto' runs each test until its score is known well enough.",
)
@click.option(
    "--parallel", type=click.IntRange(1, 1024), help="With --suite: how many runs may be in flight at once."
)
@click.option(
    "--run-dir",
    "runs_root",
    type=click.Path(path_type=Path, file_okay=False),
    help="With --suite: where run directories go (default: .atp/runs).",
)
@click.option(
    "--correction",
    type=click.Choice(["holm", "none"]),
    default="holm",
    show_default=True,
    help="Which verdict fails: Holm's (corrected for many tests) or each test's own.",
)
@click.option(
    "--fail-on-regression",
    type=click.BOOL,
    default=True,
    show_default=True,
    help="Whether a regression fails the comparison (exit code 1).",
)
@click.option(
    "--output",
    "output",
    type=click.Choice(["console", "json"]),
    default="console",
    show_default=True,
    help="A table on the console, or JSON.",
)
@click.option(
    "--output-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="With --output=json: the file to write (default: standard output).",
)
@verbosity_options
@suite_config_option("--suite, when given")
@debug_option
def compare_command(
    run_dir: Path | None,
    baseline_path: Path,
    suite_path: Path | None,
    agent_name: str | None,
    runs: int | str | None,
    parallel: int | None,
    runs_root: Path | None,
    correction: str,
    fail_on_regression: bool,
    output: str,
    output_file: Path | None,
    verbose: bool,
    quiet: bool,
    config_path: Path | None,
) -> int:
    """Compare a run with a baseline: each test's scores by Welch's t-test, with Holm's
    correction over the tests. The run is the stored one in RUN_DIR (default: the newest run
    of the baseline's suite in .atp/runs), or, with --suite, the suite run now against --agent
    as atp test runs it (its report shown as it runs; on stderr with --output=json).

    Exit code 0 when no test regressed (or --fail-on-regression=false), 1 when one did, 2 for a
    usage or file error, or when nothing could be compared (a baseline of another suite);
    130/143 when the run of --suite was interrupted.
    """
    from atp.core.baseline import read_baseline
    from atp.core.config import load_config
    from atp.core.results import RunStore

    if output_file is not None and output != "json":
        raise click.UsageError("--output-file takes --output=json")
    check_verbosity(verbose, quiet)
    how = Comparing(baseline_path, correction, fail_on_regression, output, output_file)
    if suite_path is None:
        given = _given(
            ("--agent", agent_name),
            ("--runs", runs),
            ("--parallel", parallel),
            ("--run-dir", runs_root),
            ("--verbose", verbose or None),
            ("--quiet", quiet or None),
        )
        if given:
            raise click.UsageError(
                f"{', '.join(given)} name{'s' if len(given) == 1 else ''} how to run a suite: give it with --suite=FILE"
            )
        baseline = read_baseline(baseline_path)
        if run_dir is None:
            run_dir = RunStore.latest(load_config(config_path).run_dir, baseline.suite)
        return _compare(run_dir, baseline, how)
    if run_dir is not None:
        raise click.UsageError("compare a stored run (RUN_DIR) or a suite run now (--suite=FILE), not both")
    if isinstance(runs, int) and runs < MIN_RUNS:
        raise click.UsageError(
            f"--runs={runs}: a comparison needs at least {MIN_RUNS} runs per test; run with --runs=5 or more"
        )
    from atp.cli.running import Options

    baseline = read_baseline(baseline_path)  # a broken baseline file fails before anything runs
    config = load_config(config_path, suites=[suite_path])
    if output_file is not None and not how.to_stdout:
        _check_output(output_file, [baseline_path, suite_path, *([config.path] if config.path else [])])
    options = Options(
        agent_name=agent_name,
        runs=runs,
        parallel=parallel,
        run_dir=runs_root,
        verbose=verbose,
        quiet=quiet,
    )  # (no baseline in the run itself: the comparison below is the one shown)
    with contextlib.redirect_stdout(sys.stderr) if how.to_stdout else contextlib.nullcontext():
        code, directory = _run_now(suite_path, config, options)
    if directory is None or code in (130, 143):
        return code  # stopped: its finished runs are kept (atp baseline compare RUN_DIR compares them)
    compared = _compare(directory, baseline, how)
    return code if code in (2, 3) else compared  # a reporter that failed still says so


def _given(*options: tuple[str, object]) -> list[str]:
    """The names of the options given a value (not ``None``)."""
    return [name for name, value in options if value is not None]


def _compare(run_dir: Path, baseline: Baseline, how: Comparing) -> int:
    """Compare the stored run in ``run_dir`` with ``baseline`` and report it; the exit code."""
    from atp.cli.main import EXIT_FAILED, EXIT_OK, EXIT_USAGE
    from atp.core.results import BaselineRef, RunStore, build_suite_results

    if how.output_file is not None and not how.to_stdout:
        _check_output(how.output_file, [how.baseline_path, run_dir / "run.json", run_dir / "results.jsonl"])
    store = RunStore.open(run_dir)
    header = store.read_header()
    header.baseline = BaselineRef(
        file=str(how.baseline_path),
        correction="none" if how.correction == "none" else "holm",
        fail_on_regression=how.fail_on_regression,
    )
    results = build_suite_results(header, store.read_results(), store.problems, baseline)
    summary = results.baseline
    assert summary is not None  # a baseline was given
    # the run's own header may say otherwise; this command's options decide
    summary.file = str(how.baseline_path)
    summary.correction = header.baseline.correction
    summary.fail_on_regression = how.fail_on_regression
    tests = {t.id: t.baseline for t in results.tests if t.baseline is not None}
    failing = summary.failing_regressions
    if summary.problems:
        code = EXIT_USAGE
    elif failing and how.fail_on_regression:
        code = EXIT_FAILED
    else:
        code = EXIT_OK
    if how.output == "json":
        report = ComparisonReport(
            run_id=results.run_id,
            run_dir=str(run_dir),
            suite=results.suite,
            agent=results.agent,
            comparison=msgspec.structs.asdict(summary),  # every field, defaults too
            failing_regressions=failing,
            exit_code=code,
            tests={test_id: msgspec.structs.asdict(c) for test_id, c in tests.items()},
        )
        data = msgspec.json.format(msgspec.json.encode(report), indent=2) + b"\n"
        if how.to_stdout:
            click.echo(data.decode(), nl=False)
        else:
            assert how.output_file is not None
            write_output(how.output_file, data)
            _print_comparison(results, run_dir, baseline, summary, tests)
            click.echo(printable(f"json comparison written to {how.output_file}"), err=True)
    else:
        _print_comparison(results, run_dir, baseline, summary, tests)
    _warn(results.problems)
    if results.interrupted or results.stopped_by is not None:
        _warn(
            [
                f"the run in {run_dir} was interrupted{_stopped(results)}: its tests are compared on the runs it finished"
            ]
        )
    return code


VERDICT_MARKS = {
    "regression": "✗ regression",
    "improvement": "↑ improvement",
    "no_change": "no change",
    "not_compared": "not compared",
}
COLUMNS = ("Test", "Baseline", "Current", "Delta", "Delta %", "95% CI of delta", "p", "p (Holm)", "Verdict")
RIGHT = frozenset({3, 4, 6, 7})
"""The columns aligned right (numbers of one kind)."""


def _print_comparison(
    results: SuiteResults,
    run_dir: Path,
    baseline: Baseline,
    summary: BaselineComparison,
    tests: dict[str, TestComparison],
) -> None:
    """The comparison as a plain-text table, with what was not compared and why."""
    holm = summary.correction == "holm"
    saved = (
        f", saved {summary.created_at:%Y-%m-%d %H:%M %Z}".rstrip() if summary.created_at is not None else ""
    )
    lines = [
        "ATP Baseline Comparison",
        "=======================",
        "",
        printable(f"Baseline: {summary.file} (suite {baseline.suite}, agent {baseline.agent or '?'}{saved})"),
        printable(f"Run:      {run_dir} (suite {results.suite}, agent {results.agent})"),
        "",
    ]
    current_std = {t.id: t.statistics.score.std for t in results.tests if t.statistics is not None}
    rows = [
        _row(test_id, comparison, baseline.tests.get(test_id), current_std.get(test_id), holm)
        for test_id, comparison in tests.items()
    ]
    if rows:
        lines.extend(table([list(COLUMNS), *rows], RIGHT))
    else:
        lines.append("No test of the run finished a run: nothing to compare.")
    lines.append("")
    lines.append(_summary_line(summary, tests))
    notes = [(i, c) for i, c in tests.items() if c.verdict == "not_compared"]
    if notes:
        lines.append("")
        lines.append("Not compared:")
        lines.extend(printable(f"  {i}: {c.reason or 'no reason given'}") for i, c in notes)
    remarks = [(i, c) for i, c in tests.items() if c.verdict != "not_compared" and c.reason]
    if remarks:
        lines.append("")
        lines.append("Notes:")
        lines.extend(printable(f"  {i}: {c.reason}") for i, c in remarks)
    if summary.not_in_run:
        lines.append("")
        lines.append(printable(f"In the baseline but not in this run: {', '.join(summary.not_in_run)}"))
    if summary.problems:
        lines.append("")
        lines.append("Problems:")
        lines.extend(printable(f"  {problem}") for problem in summary.problems)
    lines.append("")
    lines.append(_result_line(summary))
    click.echo("\n".join(lines))


def _row(
    test_id: str,
    comparison: TestComparison,
    reference: BaselineTest | None,
    current_std: float | None,
    holm: bool,
) -> list[str]:
    baseline_std = None
    if reference is not None:
        sample = reference.sample()
        baseline_std = sample.variance**0.5 if sample is not None and sample.n >= MIN_RUNS else reference.std
    verdict = comparison.verdict_holm if holm and comparison.verdict_holm is not None else comparison.verdict
    shown = VERDICT_MARKS[verdict]
    if holm and comparison.verdict != verdict and comparison.verdict in ("regression", "improvement"):
        shown += f" (uncorrected: {comparison.verdict.replace('_', ' ')})"
    if comparison.method == "sequential":
        shown += " (sequential)"
    if comparison.changed:
        shown += " (test changed)"
    return [
        printable(test_id),
        _mean(comparison.baseline_mean, baseline_std, comparison.baseline_runs),
        _mean(comparison.current_mean, current_std, comparison.current_runs),
        _number(comparison.delta, signed=True),
        _number(comparison.delta_percent, signed=True, suffix="%"),
        f"[{comparison.ci_95[0]:+.1f}, {comparison.ci_95[1]:+.1f}]" if comparison.ci_95 is not None else "—",
        p_text(comparison.p_value),
        p_text(comparison.p_holm),
        shown,
    ]


def _mean(mean: float | None, std: float | None, n: int) -> str:
    if mean is None:
        return "—"
    spread = f" ± {std:.1f}" if std is not None else ""
    return f"{mean:.1f}{spread} ({n})"


def _number(value: float | None, *, signed: bool = False, suffix: str = "") -> str:
    if value is None:
        return "—"
    return f"{value:+.1f}{suffix}" if signed else f"{value:.1f}{suffix}"


def _summary_line(summary: BaselineComparison, tests: dict[str, TestComparison]) -> str:
    holm = summary.correction == "holm"

    regressions, improvements = (
        (summary.regressions_holm, summary.improvements_holm)
        if holm
        else (summary.regressions, summary.improvements)
    )
    other_regressions, other_improvements = (
        (summary.regressions, summary.improvements)
        if holm
        else (summary.regressions_holm, summary.improvements_holm)
    )
    not_compared = sum(1 for c in tests.values() if c.verdict == "not_compared")
    no_change = sum(1 for c in tests.values() if (c.verdict_holm if holm else c.verdict) == "no_change")
    main = (
        f"{_count(regressions, 'regression')}, {improvements} improvement{'' if improvements == 1 else 's'}, "
        f"{no_change} no significant change, {not_compared} not compared"
    )
    if holm:
        how = (
            f"Holm-corrected over {_count(summary.compared, 'compared test')}; without the correction: "
            f"{_count(other_regressions, 'regression')}, {other_improvements} "
            f"improvement{'' if other_improvements == 1 else 's'}"
        )
    else:
        how = (
            f"each test's own p < 0.05, uncorrected; Holm-corrected: {_count(other_regressions, 'regression')}, "
            f"{other_improvements} improvement{'' if other_improvements == 1 else 's'}"
        )
    return f"Summary: {main} ({how})"


def _result_line(summary: BaselineComparison) -> str:
    failing = summary.failing_regressions
    if summary.problems:
        return "Result: nothing compared (see the problems above)"
    if not failing:
        return "Result: no regression"
    if not summary.fail_on_regression:
        return f"Result: {_count(failing, 'regression')} (not failing: --fail-on-regression=false)"
    return f"Result: FAILED, {_count(failing, 'regression')}"
