"""What the commands share: the process's plugins, options, reporters."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from atp.core.errors import ConfigError
from atp.core.plugins import Plugins
from atp.core.text import printable

if TYPE_CHECKING:
    from atp.core.config import Config
    from atp.core.reporter import Reporter
    from atp.core.results import RunStore, SuiteResults

F = TypeVar("F", bound=Callable[..., Any])


_warned: set[str] = set()


@functools.lru_cache(maxsize=1)
def plugins() -> Plugins:
    """The plugins of this process, loaded once; load problems are warned about on stderr."""
    loaded = Plugins()
    warn_problems([*loaded.warnings, *loaded.problems(collect=False)])
    return loaded


def plugins_for(config: Config) -> Plugins:
    """The plugins of this process with the config's own (its ``plugins:`` list) loaded too;
    the config's warnings and the plugins' load problems are warned about on stderr."""
    loaded = plugins()
    warn_problems(config.warnings)
    entries = config.plugin_entries()
    if entries:
        loaded.load_local(entries)
        warn_problems(loaded.problems(collect=False))
    return loaded


def warn_problems(problems: Sequence[str]) -> None:
    """Each plugin problem once on stderr (the rest of ATP keeps working)."""
    for problem in problems:
        if problem not in _warned:
            _warned.add(problem)
            click.echo(f"atp: warning: {printable(problem)}", err=True)


def debug_option(func: F) -> F:
    """``--debug`` on a command, as on ``atp`` itself: tracebacks for errors and plugin failures."""

    def turn_on(ctx: click.Context, param: click.Parameter, value: bool) -> None:
        if value:
            from atp.cli import main

            main._debug = True

    return click.option(
        "--debug", is_flag=True, expose_value=False, callback=turn_on,
        help="Show tracebacks for errors, plugin failures included.",
    )(func)


def config_option(func: F) -> F:
    return click.option(
        "--config",
        "config_path",
        type=click.Path(path_type=Path, dir_okay=False),
        help="Config file (default: atp.config.yaml in the working directory, if any).",
    )(func)


class RunsType(click.ParamType):
    """``--runs``: a number of runs per test (1-10000), or ``auto``."""

    name = "N|auto"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | str:
        if isinstance(value, int) or value == "auto":
            return value
        try:
            number = int(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is neither a number of runs nor 'auto'", param, ctx)
        if not 1 <= number <= 10000:
            self.fail(f"{number} is not between 1 and 10000", param, ctx)
        return number


def split_outputs(values: Sequence[str]) -> list[str]:
    names: list[str] = []
    for value in values:
        names.extend(n.strip() for n in value.split(",") if n.strip())
    return names


STDOUT = Path("-")


def make_reporters(
    loaded: Plugins,
    names: Sequence[str],
    output_file: Path | None,
    verbose: bool,
    inputs: Sequence[Path] = (),
) -> list[Reporter]:
    """The reporters for ``--output`` names. ``--output-file`` goes to the first reporter that
    writes files (``-`` means stdout); the console report is added unless another reporter
    writes to stdout. ``inputs`` (the suite, the config) must not be written over."""
    from atp.core.reporter import ReportOptions

    if not names:
        names = ["console"]
    classes = [loaded.reporter(name) for name in dict.fromkeys(names)]
    file_target = next((c for c in classes if c.file_extension is not None), None)
    if output_file is not None and file_target is None:
        raise ConfigError("--output-file needs an --output that writes a file (like json)")
    if output_file == STDOUT:
        output_file = None
    elif output_file is not None:
        check_output_file(output_file, inputs)
    reporters: list[Reporter] = []
    stdout_taken = False
    for cls in classes:
        target = output_file if cls is file_target else None
        if cls.file_extension is not None and target is None:
            stdout_taken = True
        reporters.append(cls(ReportOptions(output_file=target, verbose=verbose, stream=sys.stdout)))
    if not stdout_taken and not any(r.name == "console" for r in reporters) and "console" in loaded.reporters:
        console = loaded.reporter("console")
        reporters.insert(0, console(ReportOptions(verbose=verbose, stream=sys.stdout)))
    return reporters


def check_output_file(output_file: Path, inputs: Sequence[Path]) -> None:
    """Refuse an ``--output-file`` that is one of the command's input files or a folder."""
    if output_file.is_dir():
        raise ConfigError(f"--output-file {output_file} is a directory; name a file in it")
    for path in inputs:
        same = False
        try:
            same = output_file.exists() and path.exists() and output_file.samefile(path)
        except OSError:
            same = output_file.resolve() == path.resolve()
        if same:
            raise ConfigError(f"--output-file {output_file} is the input file {path}; it would be overwritten")


def render(reporters: Sequence[Reporter], results: SuiteResults, store: RunStore) -> int | None:
    """Let every reporter render; one that fails is named on stderr and the others still
    write. Returns the exit code the failures call for (3 a reporter raised, 2 it could not
    write its file), or ``None``. A failing standard output (a closed pipe) stops it all."""
    from atp.cli.main import EXIT_PLUGIN, EXIT_USAGE, debugging
    from atp.core.errors import AtpError

    code: int | None = None
    loaded = plugins()
    for reporter in reporters:
        try:
            reporter.report(results, store)
        except OSError:
            raise
        except AtpError as exc:
            click.echo(printable(f"atp: error: {exc}"), err=True)  # it names the file
            code = code or EXIT_USAGE
            continue
        except Exception as exc:
            if debugging():
                import traceback

                traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
            owner = loaded.owner("reporter", reporter.name) if reporter.name in loaded.reporters else "a plugin"
            click.echo(
                printable(
                    f"atp: plugin error: reporter {reporter.name!r} of {owner} failed: "
                    f"{type(exc).__name__}: {exc}; the other reporters' output stands"
                ),
                err=True,
            )
            code = EXIT_PLUGIN
            continue
        target = reporter.options.output_file
        if target is not None:
            click.echo(printable(f"{reporter.name} results written to {target}"), err=True)
    return code


def exit_code(results: SuiteResults) -> int:
    """0 when every test passed and the run directory is sound; 130/143 for a run stopped by
    SIGINT/SIGTERM; 1 otherwise (a test failed, the run did not finish, or it regressed from
    its baseline and regressions fail the run)."""
    import signal

    if results.stopped_by in ("SIGINT", "SIGTERM"):
        return 128 + int(getattr(signal, results.stopped_by))
    if not results.summary.ok or results.problems or results.interrupted:
        return 1
    comparison = results.baseline
    if comparison is not None and comparison.fail_on_regression and comparison.failing_regressions:
        return 1
    return 0


def show_tracebacks(results: SuiteResults) -> None:
    """``--debug``: the tracebacks of every plugin failure the results keep, on stderr."""
    found: list[tuple[str, str]] = []
    for failure in results.plugin_failures:
        if failure.traceback:
            found.append((f"plugin {failure.plugin!r} in {failure.where}", failure.traceback))
    for test in results.tests:
        for run in test.runs:
            where = f"test {test.id!r} run {run.run_number}"
            if run.traceback:
                found.append((f"{where}: the adapter", run.traceback))
            for item in run.checks:
                trace = (item.details or {}).get("traceback")
                if isinstance(trace, str):
                    found.append((f"{where}: check {item.name!r}", trace))
    for info in plugins().infos():
        for trace in info.tracebacks:
            found.append((f"plugin {info.name!r}", trace))
    for where, trace in found:
        click.echo(printable(f"atp: debug: traceback of {where}:"), err=True)
        click.echo(printable(trace, newlines=True), err=True)
