"""``atp test``: run suites against an agent and report the results."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import click

from atp.cli.app import (
    RunsType,
    check_verbosity,
    config_option,
    debug_option,
    exit_code,
    make_reporters,
    plugins_for,
    render,
    show_tracebacks,
    split_outputs,
    verbosity_options,
    warn_problems,
)
from atp.core.errors import ConfigError

if TYPE_CHECKING:
    from atp.core.config import Config
    from atp.core.executor import Executor, Job
    from atp.core.results import TestResult
    from atp.core.runner import Runner
    from atp.core.suite import Suite

JUDGE_SETTINGS = "llm_judge"
"""Where the LLM judge's settings are (``evaluators.llm_judge``), for ``--no-judge-cache``."""

SEVERITY = (130, 143, 4, 3, 2, 1, 5, 0)
"""Exit codes from the most to the least severe: several suites exit with the worst."""


class PrintableFormatter(logging.Formatter):
    """ATP's warnings for a terminal: control characters in them (an agent's, a file name's)
    are shown escaped."""

    def format(self, record: logging.LogRecord) -> str:
        from atp.core.text import printable

        return printable(super().format(record), newlines=True)


class WarningHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Warnings on stderr; a live status line on the terminal is cleared first, so a warning
    never lands in the middle of it (the line is redrawn after)."""

    clear: list[object] = []

    def emit(self, record: logging.LogRecord) -> None:
        for reporter in self.clear:
            erase = getattr(reporter, "erase_status", None)
            if callable(erase):
                try:
                    erase()
                except Exception:
                    pass
        super().emit(record)


@dataclasses.dataclass
class Options:
    """What ``atp test`` was asked for, the same for every suite it runs (``atp baseline save``
    makes one too: every field not given has the default ``atp test`` has)."""

    agent_name: str | None = None
    tags: tuple[str, ...] = ()
    test_ids: tuple[str, ...] = ()
    runs: int | str | None = None
    baseline: Path | None = None
    correction: str = "holm"
    fail_on_regression: bool = True
    parallel: int | None = None
    outputs: tuple[str, ...] = ()
    output_file: Path | None = None
    run_dir: Path | None = None
    verbose: bool = False
    quiet: bool = False
    fail_fast: bool = False
    last_failed: bool = False
    no_judge_cache: bool = False
    retries: int | None = None
    resume: str | None = None
    """``--resume``: ``""`` for the latest unfinished run of the suite and agent, else a run
    directory."""
    force: bool = False
    shard: str | None = None
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    executor: str | None = None
    address: str | None = None
    file_parts: dict[str, Path] = dataclasses.field(default_factory=dict)
    """Per suite of the run, what its output files' names take (:func:`_file_part`)."""


@click.command("test")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--suite",
    "suite_paths",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="A suite YAML file (repeatable; same as naming it as PATH).",
)
@click.option("--agent", "agent_name", help="The agent to test, by name (optional when only one is defined).")
@click.option(
    "--tags", multiple=True, help="Select by tags: smoke,core = either; smoke+fast = both; !slow = not slow."
)
@click.option("--test", "test_ids", multiple=True, help="Run only the test with this id (repeatable).")
@click.option(
    "--runs",
    type=RunsType(),
    help="Runs per test, overriding the suite; 'auto' runs each test until its score is known well enough (docs/statistics.md).",
)
@click.option("--parallel", type=click.IntRange(1, 1024), help="How many runs may be in flight at once.")
@click.option("-x", "--fail-fast", is_flag=True, help="Stop at the first run that does not pass.")
@click.option(
    "--lf",
    "--last-failed",
    "last_failed",
    is_flag=True,
    help="Run only the tests that failed in the suite's latest run (all of them if none did).",
)
@click.option(
    "--baseline",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Compare with this baseline file (atp baseline save) and report regressions.",
)
@click.option(
    "--correction",
    type=click.Choice(["holm", "none"]),
    default="holm",
    show_default=True,
    help="With --baseline: which verdict fails the run, Holm's (corrected for many tests) or each test's own.",
)
@click.option(
    "--fail-on-regression",
    type=click.BOOL,
    default=True,
    show_default=True,
    help="With --baseline: whether a regression fails the run (exit code 1).",
)
@click.option(
    "--output",
    "outputs",
    multiple=True,
    help="Reporter: console (default), json, junit, html or a plugin's; NAME:FILE writes a file (repeatable).",
)
@click.option(
    "--output-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="File for the file-writing reporter given none (like --output=json).",
)
@click.option(
    "--run-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Where run directories go (default: .atp/runs).",
)
@click.option(
    "--no-judge-cache",
    is_flag=True,
    help="Ask the LLM judge again instead of reusing its cached judgements (docs/llm-judge.md).",
)
@click.option(
    "--retries",
    type=click.IntRange(0, 100),
    help="Try a run again this many times when it meets a fault of the infrastructure (agent unreachable, HTTP 429/502/503/504); never after an agent's own failure.",
)
@click.option(
    "--resume",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[=RUN_DIR]",
    help="Go on with an unfinished run: only the runs its directory lacks are made (default: the latest unfinished run of the suite and agent). Write --resume=DIR.",
)
@click.option(
    "--force", is_flag=True, help="With --resume: go on even though the suite's tests changed since."
)
@click.option(
    "--shard",
    metavar="K/N",
    help="Make only the K-th of N balanced shares of the runs (for N parallel CI jobs; combine with 'atp merge').",
)
@click.option(
    "--max-cost-usd",
    type=click.FloatRange(0, min_open=True),
    help="Stop starting runs once the agents and evaluators have spent this much (USD).",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(1),
    help="Stop starting runs once the agents and evaluators have spent this many tokens.",
)
@click.option(
    "--executor",
    help="Make the runs on an executor plugin's workers instead of here (like 'dask'; docs/cluster.md).",
)
@click.option("--address", help="With --executor: where its cluster is (like tcp://10.0.0.5:8786).")
@verbosity_options
@config_option
@debug_option
def test_command(
    paths: tuple[Path, ...],
    suite_paths: tuple[Path, ...],
    config_path: Path | None,
    **values: object,
) -> int:
    """Run the suites in PATHS (files, or folders searched for *.yaml files with a
    'test_suite' key; default: the working directory) against an agent.

    Exit code 0 when every selected test passed, 1 when any failed, 2 for a usage, config or
    suite error, 3 when a plugin failed, 4 for an internal error, 130/143 when interrupted
    (finished results are kept and reported).
    """
    from atp.cli.discover import find_suites
    from atp.core.config import load_config

    options = Options(**values)
    check_verbosity(options.verbose, options.quiet)
    check_resume_options(options)
    config = load_config(config_path)
    if options.no_judge_cache:
        config.evaluator_overrides.setdefault(JUDGE_SETTINGS, {})["cache"] = False
    suites = find_suites([*suite_paths, *paths])
    if options.resume and len(suites) > 1:
        raise ConfigError(
            f"--resume={options.resume} goes on with one run, but {len(suites)} suites were found: name "
            f"the one suite it is of (atp test SUITE --resume=DIR)"
        )
    handler = WarningHandler()
    handler.setFormatter(PrintableFormatter("atp: warning: %(message)s"))
    logging.basicConfig(handlers=[handler], level=logging.WARNING)
    codes = []
    for suite_path in suites:
        try:
            code = run_suite(suite_path, config, options, several=len(suites) > 1)
        except NothingToResume as exc:
            if len(suites) == 1:
                raise
            from atp.core.text import printable

            click.echo(printable(f"atp: {exc}"), err=True)
            code = 0
        codes.append(code)
        if code in (130, 143) or (options.fail_fast and code != 0):
            break
    if len(suites) > 1:
        passed = sum(1 for c in codes if c == 0)
        click.echo(
            f"Suites: {passed} of {len(suites)} passed"
            + (f", {len(suites) - len(codes)} not run" if len(codes) < len(suites) else "")
        )
    return min(codes, key=SEVERITY.index)


def run_suite(suite_path: Path, config: Config, options: Options, *, several: bool) -> int:
    """Load, run and report one suite; its exit code."""
    from asyncio import CancelledError

    import anyio

    from atp.cli.main import debugging
    from atp.core.config import agent_definitions, choose_agent, masker_for, resolve_agent
    from atp.core.runner import Interrupted, Runner
    from atp.core.suite import Fallback, TagFilter, load_suite, select_tests
    from atp.core.text import printable

    loaded = plugins_for(config)
    defaults = config.spec.defaults
    suite = load_suite(
        suite_path,
        loaded.evaluators,
        Fallback(runs_per_test=defaults.runs_per_test, timeout_seconds=defaults.timeout_seconds),
        loaded.services,
    )
    tag_filter = TagFilter.parse(options.tags) if options.tags else None
    test_ids = list(options.test_ids)
    run_root = options.run_dir or config.run_dir
    if options.last_failed:
        failed = last_failed(run_root, suite.name, [t.id for t in suite.tests])
        if failed:
            test_ids = [i for i in failed if i in test_ids] if test_ids else failed
    selected, deselected = select_tests(suite.tests, tag_filter, test_ids)
    if options.resume is not None:  # the run's own selection, from its directory
        selected, deselected = list(suite.tests), 0
    if not selected:
        known = sorted({tag for t in suite.tests for tag in t.tags})
        raise ConfigError(
            f"no test in {suite_path} matches the selection (tags in the suite: {', '.join(known) or 'none'})"
        )
    agent = resolve_agent(choose_agent(agent_definitions(config, suite), options.agent_name), loaded.adapters)
    used_evaluators = [
        loaded.evaluator(t) for t in sorted({a.type for test in selected for a in test.assertions})
    ]
    for evaluator_cls in used_evaluators:
        # an unset ${VAR} or a wrong setting fails before any run
        config.check_evaluator_settings(evaluator_cls.settings_name(), evaluator_cls.Settings)
    known = set(loaded.evaluators) | {cls.settings_name() for cls in loaded.evaluators.values()}
    unknown = sorted(set(config.spec.evaluators) - known)
    if unknown:
        warn_problems(
            [
                f"the config has settings for {', '.join(map(repr, unknown))}, which no installed "
                f"evaluator checks (installed: {', '.join(sorted(loaded.evaluators))})"
            ]
        )
    default_outputs = config.spec.reporting.default
    names = split_outputs(options.outputs) or split_outputs(
        [default_outputs] if isinstance(default_outputs, str) else default_outputs
    )
    inputs = [suite_path] + ([config.path] if config.path is not None else [])
    if options.baseline is not None:
        inputs.append(options.baseline)
    rename = None
    if several:
        part = _file_part(suite.name, suite_path, options.file_parts)

        def rename(file: Path) -> Path:
            return file.with_name(f"{file.stem}.{part}{file.suffix}")

    reporters = make_reporters(
        loaded,
        names,
        options.output_file,
        (options.verbose or config.spec.reporting.verbose) and not options.quiet,
        inputs,
        rename,
        quiet=options.quiet,
    )
    warn_problems(loaded.problems())
    runner = Runner(
        loaded,
        suite,
        selected,
        agent,
        run_root=run_root,
        masker=masker_for(config, agent, used_evaluators),
        parallel=options.parallel or defaults.parallel_workers or 1,
        runs=options.runs,
        deselected=deselected,
        fail_fast=options.fail_fast,
        evaluator_settings=config.evaluator_settings,
        secrets=config.secrets,
        max_events=config.spec.limits.max_events,
        max_event_bytes=config.spec.limits.max_event_bytes,
        max_log_bytes=config.spec.limits.max_log_bytes,
    )
    if options.baseline is not None:
        from atp.core.baseline import read_baseline
        from atp.core.results import BaselineRef

        runner.baseline = read_baseline(options.baseline)
        runner.baseline_ref = BaselineRef(
            file=str(options.baseline),
            correction="none" if options.correction == "none" else "holm",
            fail_on_regression=options.fail_on_regression,
        )
    reliability(runner, config, suite, options, run_root)
    registered = [loaded.register(r, name=f"atp-cli-reporter-{r.name}-{id(r)}") for r in reporters]
    WarningHandler.clear = list(reporters)
    code: int | None = None
    try:
        results = anyio.run(runner.run)
    except Interrupted as stop:
        code = 128 + stop.signal_number  # 130 for Ctrl-C, 143 for SIGTERM
    except (KeyboardInterrupt, CancelledError):  # Ctrl-C before the runner listened for it
        code = 130
    finally:
        for name in registered:
            loaded.unregister(name)
    if code is not None:
        if runner.store is None or not (runner.store.directory / "run.json").is_file():
            return code  # stopped before its agent (or cluster) was ready: no run directory is left
        results = runner.store.results()
        click.echo(printable(f"Interrupted: finished runs are kept in {runner.store.directory}"), err=True)
    assert runner.store is not None
    failed = render(reporters, results, runner.store)
    if debugging():
        show_tracebacks(results)
    if code is not None:
        return code
    return failed if failed is not None else exit_code(results)


class NothingToResume(ConfigError):
    """A bare ``--resume`` found no unfinished run of a suite (with several suites, the others
    are still resumed)."""


def check_resume_options(options: Options) -> None:
    """``--resume`` goes on with the run's own selection; ``--force`` needs ``--resume``; a
    budget is a number."""
    import math

    cost = options.max_cost_usd
    if cost is not None and not (math.isfinite(cost) and cost <= 1e9):
        raise ConfigError(f"--max-cost-usd must be a number of dollars above 0 and at most 1e9, not {cost}")
    if options.resume is None:
        if options.force:
            raise ConfigError("--force goes with --resume (it resumes a run whose suite changed)")
        return
    given = [
        name
        for name, value in (
            ("--tags", options.tags), ("--test", options.test_ids), ("--runs", options.runs),
            ("--last-failed", options.last_failed), ("--shard", options.shard), ("--baseline", options.baseline),
        )
        if value
    ]  # fmt: skip
    if given:
        raise ConfigError(
            f"--resume goes on with the run's own tests, runs and baseline; drop {', '.join(given)}"
        )
    if options.resume and Path(options.resume).is_file():
        raise ConfigError(
            f"--resume {options.resume}: that is a file, not a run directory; name the suite before "
            f"--resume (atp test {options.resume} --resume), or write --resume=RUN_DIR"
        )


def reliability(runner: Runner, config: Config, suite: Suite, options: Options, run_root: Path) -> None:
    """Retries, budget, rate limit, quarantine, shard and resume for a suite's runner, from
    the command line over the suite over the config (docs/reliability.md)."""
    from atp.core.results import Budget, Shard
    from atp.core.resume import latest_unfinished
    from atp.core.retry import DEFAULT_BACKOFF_SECONDS
    from atp.core.shard import durations_basis, parse_shard, partition

    defaults = config.spec.defaults
    for value in (options.retries, suite.retries, defaults.retries):
        if value is not None:
            runner.retries = value
            break
    runner.retry_backoff = defaults.retry_backoff_seconds or DEFAULT_BACKOFF_SECONDS
    max_cost = options.max_cost_usd if options.max_cost_usd is not None else config.spec.budget.max_cost_usd
    max_tokens = options.max_tokens if options.max_tokens is not None else config.spec.budget.max_tokens
    if max_cost is not None or max_tokens is not None:
        runner.set_budget(Budget(max_cost_usd=max_cost, max_tokens=max_tokens))
    runner.set_rate_limit(runner.agent.rate_limit)
    ids = {t.id for t in suite.tests}
    runner.quarantine = frozenset(suite.quarantine) | frozenset(config.quarantined() & ids)
    if options.shard is not None:
        index, count = parse_shard(options.shard)
        basis, durations = durations_basis(run_root, suite.name)
        shares = partition(runner.tests, count, runner.runs_of, runner.plan_of, durations)
        runner.shard = Shard(index=index, count=count, basis=basis, order=[t.id for t in runner.tests])
        runner.shares = shares[index - 1]
    if options.resume is not None:
        if options.resume:
            runner.resume = Path(options.resume)
        else:
            try:
                runner.resume = latest_unfinished(run_root, suite.name, runner.agent.name)
            except ConfigError as exc:
                raise NothingToResume(str(exc)) from None
        runner.force = options.force
    if options.executor is not None or options.address is not None:
        runner.executor, runner.job = executor_for(runner, config, suite, options)
        runner.parallel_from_workers = (
            options.parallel is None and config.spec.defaults.parallel_workers is None
        )


def executor_for(runner: Runner, config: Config, suite: Suite, options: Options) -> tuple[Executor, Job]:
    """The executor ``--executor`` names, with its settings (the config's ``executors.<name>``
    and ``--address``), and the job its workers load."""
    import os

    import msgspec

    from atp.core.executor import Job

    if options.executor is None:
        raise ConfigError("--address goes with --executor (the cluster it names is an executor's)")
    executor_cls = runner.plugins.executor(options.executor)
    raw = dict(config.spec.executors.get(options.executor) or {})
    if options.address is not None:
        raw["address"] = options.address
    try:
        settings = msgspec.convert(raw, executor_cls.Settings)
    except msgspec.ValidationError as exc:
        raise ConfigError(
            f"executor {options.executor!r}: {exc} (settings: executors.{options.executor} and --address)"
        ) from None
    job = Job(
        suite_path=os.path.abspath(suite.path) if suite.path else "",
        config_path=os.path.abspath(config.path) if config.path else None,
        agent=runner.agent.name,
        evaluator_overrides=config.evaluator_overrides,
    )
    return executor_cls(settings), job


def last_failed(run_root: Path, suite: str, known: list[str]) -> list[str]:
    """The ids of the tests that failed or errored (or did not finish) in the latest run of
    ``suite``; none when that run passed or there is none (then every test runs)."""
    from atp.core.errors import AtpError
    from atp.core.results import RunStore
    from atp.core.text import printable

    try:
        directory = RunStore.latest(run_root, suite)
        results = RunStore.open(directory).results()
    except AtpError:
        click.echo(
            printable(f"--last-failed: no earlier run of suite {suite!r}; running every test"), err=True
        )
        return []
    failed = [t.id for t in results.tests if t.id in known and _to_rerun(t)]
    if not failed:
        click.echo(printable(f"--last-failed: nothing failed in {directory}; running every test"), err=True)
    return failed


def _to_rerun(test: TestResult) -> bool:
    """Failed, errored, or not run to the end (a suite's own ``skip`` is not rerun)."""
    if test.status in ("failed", "error"):
        return True
    if test.status == "skipped":
        return (test.skip_reason or "").startswith("not run")
    return len(test.runs) < test.planned_runs


def _file_part(name: str, path: Path, taken: dict[str, Path]) -> str:
    """What goes into the names of a suite's output files when several suites run: its name
    made safe for a file name, with ``-2``, ``-3``... when another suite of the run has it."""
    import re

    base = re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:80] or "suite"
    part, number = base, 1
    while taken.get(part, path) != path:
        number += 1
        part = f"{base}-{number}"
    taken[part] = path
    return part
