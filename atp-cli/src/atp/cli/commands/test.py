"""``atp test``: run a suite against an agent and report the results."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from atp.cli.app import (
    config_option,
    exit_code,
    make_reporters,
    plugins,
    render,
    split_outputs,
    warn_problems,
)


class PrintableFormatter(logging.Formatter):
    """ATP's warnings for a terminal: control characters in them (an agent's, a file name's)
    are shown escaped."""

    def format(self, record: logging.LogRecord) -> str:
        from atp.core.text import printable

        return printable(super().format(record), newlines=True)


@click.command("test")
@click.option("--suite", "suite_path", required=True, type=click.Path(path_type=Path, dir_okay=False), help="The suite YAML file.")
@click.option("--agent", "agent_name", help="The agent to test, by name (optional when only one is defined).")
@click.option("--tags", multiple=True, help="Run tests with any of these tags: smoke,core; exclude with !slow.")
@click.option("--test", "test_ids", multiple=True, help="Run only the test with this id (repeatable).")
@click.option("--runs", type=click.IntRange(1, 10000), help="Runs per test, overriding the suite.")
@click.option("--parallel", type=click.IntRange(1, 1024), help="How many runs may be in flight at once.")
@click.option("--output", "outputs", multiple=True, help="Reporter: console (default), json, or a plugin's (repeatable).")
@click.option("--output-file", type=click.Path(path_type=Path, dir_okay=False), help="File for the file-writing reporter (like json).")
@click.option("--run-dir", type=click.Path(path_type=Path, file_okay=False), help="Where run directories go (default: .atp/runs).")
@click.option("-v", "--verbose", is_flag=True, help="Show every check, agent errors, warnings and log tails.")
@config_option
def test_command(
    suite_path: Path,
    agent_name: str | None,
    tags: tuple[str, ...],
    test_ids: tuple[str, ...],
    runs: int | None,
    parallel: int | None,
    outputs: tuple[str, ...],
    output_file: Path | None,
    run_dir: Path | None,
    verbose: bool,
    config_path: Path | None,
) -> int:
    """Run a suite against an agent.

    Exit code 0 when every selected test passed, 1 when any failed, 2 for a usage, config or
    suite error, 130 when interrupted (finished results are kept and reported).
    """
    from asyncio import CancelledError

    import anyio

    from atp.core.config import agent_definitions, choose_agent, load_config, masker_for, resolve_agent
    from atp.core.errors import ConfigError
    from atp.core.runner import Interrupted, Runner
    from atp.core.suite import Fallback, TagFilter, load_suite, select_tests
    from atp.core.text import printable

    config = load_config(config_path)
    loaded = plugins()
    defaults = config.spec.defaults
    suite = load_suite(
        suite_path,
        loaded.evaluators,
        Fallback(runs_per_test=defaults.runs_per_test, timeout_seconds=defaults.timeout_seconds),
    )
    tag_filter = TagFilter.parse(tags) if tags else None
    selected, deselected = select_tests(suite.tests, tag_filter, test_ids)
    if not selected:
        known = sorted({tag for t in suite.tests for tag in t.tags})
        raise ConfigError(
            f"no test in {suite_path} matches the selection (tags in the suite: "
            f"{', '.join(known) or 'none'})"
        )
    agent = resolve_agent(choose_agent(agent_definitions(config, suite), agent_name), loaded.adapters)
    for assertion_type in sorted({a.type for test in selected for a in test.assertions}):
        # an unset ${VAR} or a wrong setting fails before any run
        config.check_evaluator_settings(assertion_type, loaded.evaluator(assertion_type).Settings)
    unknown = sorted(set(config.spec.evaluators) - set(loaded.evaluators))
    if unknown:
        warn_problems([
            f"the config has settings for {', '.join(map(repr, unknown))}, which no installed "
            f"evaluator checks (installed: {', '.join(sorted(loaded.evaluators))})"
        ])
    names = split_outputs(outputs) or split_outputs(
        [config.spec.reporting.default]
        if isinstance(config.spec.reporting.default, str)
        else config.spec.reporting.default
    )
    inputs = [suite_path] + ([config.path] if config.path is not None else [])
    reporters = make_reporters(loaded, names, output_file, verbose or config.spec.reporting.verbose, inputs)
    warn_problems(loaded.problems())
    runner = Runner(
        loaded,
        suite,
        selected,
        agent,
        run_root=run_dir or config.run_dir,
        masker=masker_for(config, agent),
        parallel=parallel or defaults.parallel_workers or 1,
        runs=runs,
        deselected=deselected,
        evaluator_settings=config.evaluator_settings,
        max_events=config.spec.limits.max_events,
        max_event_bytes=config.spec.limits.max_event_bytes,
        max_log_bytes=config.spec.limits.max_log_bytes,
    )
    handler = logging.StreamHandler()
    handler.setFormatter(PrintableFormatter("atp: warning: %(message)s"))
    logging.basicConfig(handlers=[handler], level=logging.WARNING)
    registered = [loaded.register(r, name=f"atp-cli-reporter-{r.name}-{id(r)}") for r in reporters]
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
        if runner.store is None:
            return code
        results = runner.store.results()
        click.echo(printable(f"Interrupted: finished runs are kept in {runner.store.directory}"), err=True)
    assert runner.store is not None
    render(reporters, results, runner.store)
    return code if code is not None else exit_code(results)
