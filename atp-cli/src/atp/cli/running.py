"""Running one suite for a command (``atp test``, ``atp baseline save``): prepared through
:mod:`atp.core.prepare`, run by the kernel's runner, rendered by the reporters; and the
warnings of a run on stderr."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

from atp.cli.app import (
    exit_code,
    make_reporters,
    plugins_for,
    render,
    show_tracebacks,
    split_outputs,
    warn_problems,
)
from atp.core.errors import ConfigError

if TYPE_CHECKING:
    from atp.core.config import Config
    from atp.core.executor import Executor, Job
    from atp.core.prepare import Prepared
    from atp.core.reporter import Reporter
    from atp.core.results import TestResult
    from atp.core.runner import Runner

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
    keep_workspaces: bool = False
    shard: str | None = None
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    executor: str | None = None
    address: str | None = None
    file_parts: dict[str, Path] = dataclasses.field(default_factory=dict)
    """Per suite of the run, what its output files' names take (:func:`_file_part`)."""


def setup_warnings() -> None:
    """ATP's warnings on stderr, escaped, clear of a live status line."""
    handler = WarningHandler()
    handler.setFormatter(PrintableFormatter("atp: warning: %(message)s"))
    logging.basicConfig(handlers=[handler], level=logging.WARNING)


def run_suite(suite_path: Path, config: Config, options: Options, *, several: bool) -> int:
    """Load, run and report one suite; its exit code."""
    prepared = prepare_suite(suite_path, config, options)
    reporters = reporters_for(prepared, suite_path, options, several=several)
    warn_problems(prepared.plugins.problems())
    runner = runner_for(prepared, options)
    return execute(runner, reporters)


def prepare_suite(suite_path: Path, config: Config, options: Options) -> Prepared:
    """The suite prepared to run against the agent, the tests selected as the options say
    (``--last-failed``: those that failed last time; ``--resume``: the run's own)."""
    from atp.core.prepare import prepare, suite_of

    loaded = plugins_for(config)
    suite = suite_of(config, loaded, suite_path)
    test_ids = list(options.test_ids)
    if options.last_failed:
        failed = last_failed(options.run_dir or config.run_dir, suite.name, [t.id for t in suite.tests])
        if failed:
            test_ids = [i for i in failed if i in test_ids] if test_ids else failed
    selection = None if options.resume is not None else (options.tags, test_ids)
    prepared = prepare(config, loaded, suite, options.agent_name, selection)
    warn_problems(prepared.unknown_settings())
    return prepared


def reporters_for(prepared: Prepared, suite_path: Path, options: Options, *, several: bool) -> list[Reporter]:
    """The reporters the options (else the config) name, their files checked."""
    config = prepared.config
    default_outputs = config.spec.reporting.default
    names = split_outputs(options.outputs) or split_outputs(
        [default_outputs] if isinstance(default_outputs, str) else default_outputs
    )
    inputs = [suite_path] + ([config.path] if config.path is not None else [])
    if options.baseline is not None:
        inputs.append(options.baseline)
    rename = None
    if several:
        part = _file_part(prepared.suite.name, suite_path, options.file_parts)

        def rename(file: Path) -> Path:
            return file.with_name(f"{file.stem}.{part}{file.suffix}")

    return make_reporters(
        prepared.plugins,
        names,
        options.output_file,
        (options.verbose or config.spec.reporting.verbose) and not options.quiet,
        inputs,
        rename,
        quiet=options.quiet,
        config=config.source,
    )


def runner_for(prepared: Prepared, options: Options) -> Runner:
    """The runner of a prepared suite, its options resolved: the command line over the suite
    over the config."""
    from atp.core.prepare import Asked, resolve_options
    from atp.core.resume import latest_unfinished
    from atp.core.runner import Runner

    config, suite = prepared.config, prepared.suite
    run_root = options.run_dir or config.run_dir
    parts = prepared.parts()
    reference = None
    if options.baseline is not None:
        from atp.core.baseline import read_baseline
        from atp.core.results import BaselineRef

        parts.baseline = read_baseline(options.baseline)
        correction: Literal["holm", "none"] = "none" if options.correction == "none" else "holm"
        reference = BaselineRef(
            file=str(options.baseline), correction=correction, fail_on_regression=options.fail_on_regression
        )
    resume = options.resume
    if resume == "":
        try:
            resume = str(latest_unfinished(run_root, suite.name, prepared.agent.name))
        except ConfigError as exc:
            raise NothingToResume(str(exc)) from None
    asked = Asked(
        runs=options.runs,  # type: ignore[arg-type]  # an int, "auto" or None, as RunsType gives it
        parallel=options.parallel,
        fail_fast=options.fail_fast,
        retries=options.retries,
        max_cost_usd=options.max_cost_usd,
        max_tokens=options.max_tokens,
        shard=options.shard,
        run_dir=str(run_root),
        resume=resume,
        force=options.force,
        baseline=reference,
        parallel_from_workers=options.parallel is None and config.spec.defaults.parallel_workers is None,
        keep_workspaces=options.keep_workspaces,
    )
    run_options = resolve_options(prepared, asked)
    if options.executor is not None or options.address is not None:
        parts.executor, parts.job = executor_for(prepared, options)
    return Runner(prepared.plugins, suite, prepared.selected, prepared.agent, run_options, parts)


def execute(runner: Runner, reporters: list[Reporter]) -> int:
    """Run the suite with the reporters following it, render its results; its exit code."""
    from asyncio import CancelledError

    import anyio

    from atp.cli.main import debugging
    from atp.core.runner import Interrupted
    from atp.core.text import printable

    loaded = runner.plugins
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
    from atp.core.bounds import MAX_BUDGET_USD, MAX_COUNT, number_in, shown_number

    cost, tokens = options.max_cost_usd, options.max_tokens
    if cost is not None and number_in(cost, 0, MAX_BUDGET_USD, low_open=True) is None:
        raise ConfigError(
            f"--max-cost-usd must be a number of dollars above 0 and at most {MAX_BUDGET_USD:g}, "
            f"not {shown_number(cost)}"
        )
    if tokens is not None and number_in(tokens, 1, MAX_COUNT, integer=True) is None:
        raise ConfigError(f"--max-tokens must be a whole number from 1 to 1e15, not {shown_number(tokens)}")
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


def executor_for(prepared: Prepared, options: Options) -> tuple[Executor, Job]:
    """The executor ``--executor`` names, with its settings (the config's ``executors.<name>``
    and ``--address``), and the job its workers load."""
    import os

    import msgspec

    from atp.core.executor import Job

    if options.executor is None:
        raise ConfigError("--address goes with --executor (the cluster it names is an executor's)")
    config, suite = prepared.config, prepared.suite
    executor_cls = prepared.plugins.executor(options.executor)
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
        agent=prepared.agent.name,
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
