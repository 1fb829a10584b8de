"""``atp test``: run suites against an agent and report the results."""

from __future__ import annotations

from pathlib import Path

import click

from atp.cli.app import (
    BoundedFloat,
    RunsType,
    check_verbosity,
    debug_option,
    suite_config_option,
    verbosity_options,
)
from atp.cli.running import (
    JUDGE_SETTINGS,
    SEVERITY,
    NothingToResume,
    Options,
    check_resume_options,
    run_suite,
    setup_warnings,
)
from atp.core.bounds import MAX_BUDGET_USD, MAX_COUNT
from atp.core.errors import ConfigError


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
    "--keep-workspaces",
    is_flag=True,
    help="Keep every run's working folder in the run directory (by default a passed run's is removed; docs/suites.md).",
)
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
    type=BoundedFloat(0, MAX_BUDGET_USD, low_open=True),
    help="Stop starting runs once the agents and evaluators have spent this much (USD).",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(1, MAX_COUNT),
    help="Stop starting runs once the agents and evaluators have spent this many tokens.",
)
@click.option(
    "--executor",
    help="Make the runs on an executor plugin's workers instead of here (like 'dask'; docs/cluster.md).",
)
@click.option("--address", help="With --executor: where its cluster is (like tcp://10.0.0.5:8786).")
@verbosity_options
@suite_config_option("the suite")
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

    options = Options(**values)  # type: ignore[arg-type]
    check_verbosity(options.verbose, options.quiet)
    check_resume_options(options)
    suites = find_suites([*suite_paths, *paths])
    config = load_config(config_path, suites=suites)
    if options.no_judge_cache:
        config.evaluator_overrides.setdefault(JUDGE_SETTINGS, {})["cache"] = False
    if options.resume and len(suites) > 1:
        raise ConfigError(
            f"--resume={options.resume} goes on with one run, but {len(suites)} suites were found: name "
            f"the one suite it is of (atp test SUITE --resume=DIR)"
        )
    setup_warnings()
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
