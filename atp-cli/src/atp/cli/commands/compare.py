"""``atp compare``: run one suite against several agents, interleaved, and compare their scores.

    atp compare --agents=A,B --suite=suite.yaml --runs=10

Each agent runs in a :class:`~atp.core.runner.Runner` of its own (so each has its own run
directory, which ``atp report`` renders), all of them at once in one event loop. Their runs are
*interleaved*: run k of a test goes to every agent before any agent starts run k + 1, so that a
drift in something the agents share (an API, a model, the machine's load) hits them alike
(:mod:`atp.core.interleave` does it, through the runners' public pacing seam). Two things pace
the runners, without changing them:

- a gate on each runner's schedule: an agent may take its j-th run only when every agent still
  running has taken its (j - 1)-th (every agent's schedule lists the same runs in the same order);
- one capacity limiter over every agent's runs, first come first served: ``--parallel`` runs in
  flight at once in all; with ``--parallel=1`` the agents take turns, run by run.

Ctrl-C (or SIGTERM) is watched once for all the runners: each stops its runs in flight, keeps
its finished results in its run directory and says so.

The figures come from :mod:`atp.core.comparison`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from atp.cli.app import RunsType, debug_option, suite_config_option, write_output
from atp.cli.running import setup_warnings
from atp.cli.tables import p_text, table
from atp.core.text import printable

if TYPE_CHECKING:
    from atp.core.comparison import AgentComparison, AgentScore, PairResult, PairTest
    from atp.core.interleave import Outcome
    from atp.core.results import SuiteResults
    from atp.core.runner import Runner

AUTO_REFUSED = (
    "adaptive comparison of several agents is not supported yet: 'atp compare' needs a fixed number "
    "of runs per test"
)
MARK = "*"
"""After a per-test difference: significant after Holm's correction."""


# --- the command -------------------------------------------------------------------------------


@click.command("compare")
@click.option(
    "--agents",
    "agent_names",
    required=True,
    multiple=True,
    help="The agents to compare, by name: A,B[,C...] (at least 2).",
)
@click.option(
    "--suite",
    "suite_path",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="The suite to run against each agent (a YAML file).",
)
@click.option(
    "--runs",
    type=RunsType(),
    help="Runs per test for every agent, overriding the suite (a fixed number: 'auto' is not supported here).",
)
@click.option(
    "--parallel",
    type=click.IntRange(1, 1024),
    help="How many runs may be in flight at once, over all agents (default: the config's, else 1).",
)
@click.option(
    "--tags", multiple=True, help="Select by tags: smoke,core = either; smoke+fast = both; !slow = not slow."
)
@click.option("--test", "test_ids", multiple=True, help="Run only the test with this id (repeatable).")
@click.option(
    "--output",
    "output",
    type=click.Choice(["console", "json"]),
    default="console",
    show_default=True,
    help="A table on the console, or the comparison as JSON.",
)
@click.option(
    "--output-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="With --output=json: the file to write (default: standard output).",
)
@click.option(
    "--run-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Where run directories go (default: .atp/runs); each agent gets one.",
)
@click.option(
    "-q",
    "--quiet",
    is_flag=True,
    help="No start line (what is compared, where the runs go): only the comparison and warnings.",
)
@suite_config_option("the suite")
@debug_option
def compare_command(
    agent_names: tuple[str, ...],
    suite_path: Path,
    runs: int | str | None,
    parallel: int | None,
    tags: tuple[str, ...],
    test_ids: tuple[str, ...],
    output: str,
    output_file: Path | None,
    run_dir: Path | None,
    quiet: bool,
    config_path: Path | None,
) -> int:
    """Run the suite against each agent, their runs interleaved (run k of a test goes to every
    agent before run k + 1), and compare their scores: per test, each agent's mean with its 95%
    confidence interval and each pair by Welch's t-test; overall, each pair by the paired t-test
    over the tests' mean scores; Holm's correction over each family of tests.

    Each agent's runs are kept in a run directory of their own (atp report renders it).

    Exit code 0 when the comparison ran (whether or not the agents differ), 2 for a usage,
    config or suite error, 3 when a plugin failed, 130/143 when interrupted (the finished runs
    are kept, and compared).
    """
    names = _agent_names(agent_names, runs, output, output_file)
    setup_warnings()
    runners, in_flight, suite_path_text, start = _runners(
        names, suite_path, runs, parallel, (tags, test_ids), output_file, run_dir, config_path
    )
    if not quiet:
        click.echo(start, err=True)
    code, outcomes = _run(runners, in_flight)
    results: list[SuiteResults] = []
    for outcome in outcomes:
        store = outcome.runner.store
        if outcome.results is not None:
            results.append(outcome.results)
        elif store is not None and store.directory.is_dir():
            results.append(store.results())
    if code is not None and (len(results) < len(runners) or not any(r.summary.runs for r in results)):
        _kept(runners, "interrupted")
        return code
    _report(runners, results, output, output_file, suite_path_text)
    if code is not None:
        _kept(runners, "interrupted")
        return code
    return 0


def _agent_names(
    agent_names: tuple[str, ...], runs: int | str | None, output: str, output_file: Path | None
) -> list[str]:
    names = [name.strip() for value in agent_names for name in value.split(",") if name.strip()]
    if len(names) < 2:
        raise click.UsageError("--agents names the agents to compare: at least 2, like --agents=A,B")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise click.UsageError(f"--agents names {', '.join(map(repr, repeated))} more than once")
    if runs == "auto":
        raise click.UsageError(f"--runs=auto: {AUTO_REFUSED}; give a number, like --runs=10")
    if output_file is not None and output != "json":
        raise click.UsageError("--output-file takes --output=json")
    return names


def _runners(
    names: list[str],
    suite_path: Path,
    runs: int | str | None,
    parallel: int | None,
    selection: tuple[tuple[str, ...], tuple[str, ...]],
    output_file: Path | None,
    run_dir: Path | None,
    config_path: Path | None,
) -> tuple[list[Runner], int, str, str]:
    """A runner for each agent, prepared the same way (:mod:`atp.core.prepare`), paced together;
    the line that says what is compared, how, and where its runs go."""
    from atp.cli.app import check_output_file, plugins_for, warn_problems
    from atp.core.config import load_config
    from atp.core.errors import ConfigError
    from atp.core.interleave import interleaving
    from atp.core.prepare import Asked, prepare, resolve_options, suite_of
    from atp.core.runner import Runner

    config = load_config(config_path, suites=[suite_path])
    if output_file is not None and str(output_file) != "-":
        check_output_file(output_file, [suite_path] + ([config.path] if config.path is not None else []))
        if not output_file.parent.is_dir():
            raise ConfigError(
                f"--output-file {output_file}: the directory {output_file.parent} does not exist"
            )
    loaded = plugins_for(config)
    suite = suite_of(config, loaded, suite_path)
    prepared = [prepare(config, loaded, suite, name, selection) for name in names]
    selected = prepared[0].selected
    if runs is None:
        adaptive = [t.id for t in selected if t.auto and t.skip is None]
        if adaptive:
            shown = ", ".join(map(repr, adaptive[:5])) + (
                f" and {len(adaptive) - 5} more" if len(adaptive) > 5 else ""
            )
            raise ConfigError(
                f"{suite_path}: {shown} {'runs' if len(adaptive) == 1 else 'run'} with runs_per_test: auto; "
                f"{AUTO_REFUSED}. Give a number with --runs=N"
            )
    warn_problems(loaded.problems())
    run_root = run_dir or config.run_dir
    asked = Asked(runs=runs if isinstance(runs, int) else None, parallel=parallel, run_dir=str(run_root))
    in_flight = parallel or config.spec.defaults.parallel_workers or 1
    pacing = interleaving(in_flight)
    runners = []
    for each in prepared:
        parts = each.parts()
        parts.pacing = pacing
        options = resolve_options(each, asked)
        runners.append(Runner(loaded, suite, each.selected, each.agent, options, parts))
    planned = sum(runners[0].plan.runs_of(t) for t in selected if t.skip is None)
    start = printable(
        f"Comparing {', '.join(names)} on suite {suite.name}: {_count(len(selected), 'test')}, "
        f"{_count(planned, 'run')} per agent, interleaved, {in_flight} at a time; runs go to {run_root}"
    )
    return runners, in_flight, str(suite_path), start


def _run(runners: list[Runner], in_flight: int) -> tuple[int | None, list[Outcome]]:
    """Run the runners interleaved; the exit code when they were stopped, and their outcomes.
    An agent that could not run stops the comparison with its error."""
    from asyncio import CancelledError

    import anyio

    from atp.core.interleave import Outcome, run_interleaved

    code: int | None = None
    outcomes = [Outcome(r) for r in runners]
    try:
        done = anyio.run(run_interleaved, runners, runners[0].pacing)
    except (KeyboardInterrupt, CancelledError):  # Ctrl-C before the runners listened for it
        return 130, outcomes
    outcomes = done.outcomes
    if done.signal_number is not None:
        code = 128 + done.signal_number
    elif any(o.interrupted is not None for o in outcomes):
        code = 128 + next(o.interrupted.signal_number for o in outcomes if o.interrupted is not None)
    errors = [o.error for o in outcomes if o.error is not None]
    if errors and code is None:
        _discard_unused(runners)
        _kept(runners, "the comparison was stopped", quiet=True)
        raise errors[0]
    return code, outcomes


def _report(
    runners: list[Runner], results: list[SuiteResults], output: str, output_file: Path | None, suite_path: str
) -> None:
    from atp.core.comparison import compare_agents

    comparison = compare_agents(
        results, [str(r.store.directory) if r.store is not None else None for r in runners]
    )
    _warn_errors(results)
    if output == "json":
        from atp.core.comparison import encode_comparison

        data = encode_comparison(comparison)
        if output_file is None or str(output_file) == "-":
            click.echo(data.decode(), nl=False)
        else:
            write_output(output_file, data)
            click.echo(_console(comparison, suite_path))
            click.echo(printable(f"json comparison written to {output_file}"), err=True)
    else:
        click.echo(_console(comparison, suite_path))
    for problem in comparison.problems:
        click.echo(f"atp: warning: {printable(problem)}", err=True)


def _finished(runner: Runner) -> int:
    from atp.core.errors import AtpError
    from atp.core.results import RunStore

    if runner.store is None or not runner.store.directory.is_dir():
        return 0
    try:
        return len(RunStore.open(runner.store.directory).read_results())
    except AtpError:
        return 0


def _discard_unused(runners: list[Runner]) -> None:
    """Remove the run directories in which no run finished: when an agent cannot start, the
    others never take a run (as ``atp test`` leaves no run directory of an agent that could not
    start)."""
    from atp.core.tree import remove_tree

    for runner in runners:
        if runner.store is not None and runner.store.directory.is_dir() and not _finished(runner):
            remove_tree(runner.store.directory)


def _kept(runners: list[Runner], why: str, *, quiet: bool = False) -> None:
    """Where each agent's finished runs are."""
    kept = [
        (r.agent.name, r.store.directory, _finished(r))
        for r in runners
        if r.store is not None and r.store.directory.is_dir()
    ]
    if not kept:
        if not quiet:
            click.echo(f"{why.capitalize()}: no run finished", err=True)
        return
    click.echo(printable(f"{why.capitalize()}: finished runs are kept in"), err=True)
    for name, directory, count in kept:
        click.echo(printable(f"  {name}: {directory} ({_count(count, 'run')})"), err=True)


def _warn_errors(results: list[SuiteResults]) -> None:
    for result in results:
        errors = sum(1 for t in result.tests for run in t.runs if run.outcome == "error")
        if errors:
            click.echo(
                printable(
                    f"atp: warning: agent {result.agent!r}: {_count(errors, 'run')} could not be evaluated "
                    f"(errors score 0 and are compared as such); see atp report"
                ),
                err=True,
            )


# --- the console table ---------------------------------------------------------------------


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _mean(score: AgentScore) -> str:
    """``mean ± half width (n)``; where the interval was clipped to 0-100 (it is no longer
    centred on the mean), ``mean [low, high] (n)``."""
    if score.mean is None:
        return "—"
    spread = ""
    if score.ci_95 is not None and score.half_width is not None:
        low, high = score.ci_95
        if abs((high - score.mean) - (score.mean - low)) > 1e-9 * max(1.0, abs(score.mean)):
            spread = f" [{low:.1f}, {high:.1f}]"
        else:
            spread = f" ± {score.half_width:.1f}"
    return f"{score.mean:.1f}{spread} ({score.n})"


def _delta(pair: PairTest | PairResult) -> str:
    if pair.p_value is None:
        return "—" if pair.delta is None else f"{pair.delta:+.1f} ?"
    return f"{pair.delta or 0.0:+.1f}{' ' + MARK if pair.significant else ''}"


def _console(comparison: AgentComparison, suite_file: str) -> str:

    agents = comparison.agents
    lines = ["ATP Agent Comparison", "====================", ""]
    lines.append(printable(f"Suite:  {comparison.suite} ({suite_file})"))
    lines.append(printable(f"Agents: {', '.join(agents)} (runs interleaved)"))
    lines.append("Runs:")
    width = max(len(a) for a in agents)
    for run in comparison.runs:
        state = (
            f", stopped by {run.stopped_by}"
            if run.stopped_by
            else (", interrupted" if run.interrupted else "")
        )
        lines.append(
            printable(
                f"  {run.agent.ljust(width)}  {run.run_dir or run.run_id}  ({_count(run.runs, 'run')}{state})"
            )
        )
    lines.append("")
    pairs = [(p.a, p.b) for p in comparison.overall]
    header = ["Test", *agents, *(f"{a} - {b}" for a, b in pairs)]
    right = frozenset(range(len(agents) + 1, len(header)))
    rows = [header]
    for row in comparison.tests:
        rows.append([row.id, *(_mean(s) for s in row.scores), *(_delta(p) for p in row.pairs)])
    rows.append(
        [
            "(mean over tests)",
            *(_mean(s) for s in comparison.agent_totals),
            *(_delta(p) for p in comparison.overall),
        ]
    )
    lines.extend(printable(line) for line in table(rows, right))
    family = sum(1 for row in comparison.tests for p in row.pairs if p.p_value is not None)
    lines.append("")
    lines.append(
        f"  Scores: mean ± half-width of the 95% confidence interval (n). Differences: {MARK} significant "
        f"after Holm's correction over the {_count(family, 'per-test comparison')} (Welch's t-test, "
        f"p < {comparison.alpha:g}); ? not compared. The last row: each agent's mean over the tests' "
        f"mean scores, and the overall difference (below)"
    )
    lines.append("")
    lines.extend(_overall_lines(comparison))
    notes = [
        f"  {row.id}, {p.a} - {p.b}: {p.reason}" for row in comparison.tests for p in row.pairs if p.reason
    ] + [f"  overall, {p.a} - {p.b}: {p.reason}" for p in comparison.overall if p.reason]
    if notes:
        lines.append("")
        lines.append("Notes:")
        lines.extend(printable(note) for note in notes)
    if comparison.interrupted:
        lines.append("")
        lines.append("The runs were interrupted: the agents are compared on the runs that finished.")
    return "\n".join(lines)


def _overall_lines(comparison: AgentComparison) -> list[str]:
    """The overall comparison: each pair by the paired t-test over the tests' mean scores."""
    from atp.core.comparison import verdict_text

    lines: list[str] = []
    decided = sum(1 for p in comparison.overall if p.p_value is not None)
    lines.append(
        f"Overall: paired t-test over the tests' mean scores, Holm-corrected over {_count(decided, 'pair')}"
    )
    overall_rows = [["Pair", "Tests", "Mean diff", "95% CI", "p", "p (Holm)", "Verdict"]]
    for pair in comparison.overall:
        verdict = verdict_text(pair)
        per_test = [
            f"{name} better on {count}"
            for name, count in ((pair.a, pair.a_better_tests), (pair.b, pair.b_better_tests))
            if count
        ]
        if per_test:
            verdict += f" (per test: {', '.join(per_test)} of {pair.compared_tests})"
        overall_rows.append(
            [
                f"{pair.a} - {pair.b}",
                str(pair.tests),
                "—" if pair.delta is None else f"{pair.delta:+.1f}",
                f"[{pair.ci_95[0]:+.1f}, {pair.ci_95[1]:+.1f}]" if pair.ci_95 is not None else "—",
                p_text(pair.p_value),
                p_text(pair.p_holm),
                verdict,
            ]
        )
    lines.extend(printable(line) for line in table(overall_rows, frozenset({1, 2, 4, 5})))
    return lines
