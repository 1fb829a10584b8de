"""What the commands share: the process's plugins, options, reporters."""

from __future__ import annotations

import functools
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import click

from atp.core.bounds import number_in, shown_bound
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
    from atp.cli.main import debugging

    loaded = Plugins()
    warn_problems([*loaded.warnings, *loaded.problems(collect=False)])
    if debugging():  # each hook call and its result on stderr (pluggy's tracing)
        loaded.pm.trace.root.setwriter(
            lambda text: click.echo(f"atp: hook: {printable(text.rstrip())}", err=True)
        )
        loaded.pm.enable_tracing()
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
        "--debug",
        is_flag=True,
        expose_value=False,
        callback=turn_on,
        help="Show tracebacks for errors, plugin failures included.",
    )(func)


def config_option(func: F) -> F:
    """``--config`` on a command that runs no suite: the config is looked for in the working
    directory."""
    return _config_option(func, "in the working directory")


def suite_config_option(beside: str) -> Callable[[F], F]:
    """``--config`` on a command that runs a suite: the config is looked for ``beside`` it
    (``the suite``, ``--suite when given``), else in the working directory."""
    return lambda func: _config_option(func, f"beside {beside}, else in the working directory")


def _config_option(func: F, where: str) -> F:
    return click.option(
        "--config",
        "config_path",
        type=click.Path(path_type=Path, dir_okay=False),
        help=f"Config file (default: atp.config.yaml, else pyproject.toml's [tool.atp], {where}).",
    )(func)


def verbosity_options(func: F) -> F:
    """``-v/--verbose`` and ``-q/--quiet`` on a command that reports results."""
    func = click.option(
        "-q",
        "--quiet",
        is_flag=True,
        help="Only the tests that did not pass and the summary; no progress display.",
    )(func)
    return click.option(
        "-v",
        "--verbose",
        is_flag=True,
        help="Show every check, each failed run's response, warnings and log tails.",
    )(func)


def check_verbosity(verbose: bool, quiet: bool) -> None:
    if verbose and quiet:
        raise click.UsageError("--verbose and --quiet cannot be used together")


class RunsType(click.ParamType):  # type: ignore[type-arg]  # generic only in newer click
    """``--runs``: a number of runs per test (1-10000), or ``auto``."""

    name = "N|auto"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | str:
        if isinstance(value, int) or value == "auto":
            return "auto" if value == "auto" else int(value)
        try:
            number = int(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is neither a number of runs nor 'auto'", param, ctx)
        if not 1 <= number <= 10000:
            self.fail(f"{number} is not between 1 and 10000", param, ctx)
        return number


class BoundedFloat(click.FloatRange):
    """A float option checked with :func:`atp.core.bounds.number_in`, the one check of numbers
    from outside: NaN, an infinity and a value out of ``low``..``high`` (``low_open``,
    ``high_open``: the bound itself excluded) are usage errors (exit 2) naming the range. Every
    float option of every command uses it (a plugin's command too: ``from atp.cli.app import
    BoundedFloat``); the help shows the range as Click's ``FloatRange`` does."""

    def __init__(
        self,
        low: float | None = None,
        high: float | None = None,
        *,
        low_open: bool = False,
        high_open: bool = False,
    ) -> None:
        super().__init__(low, high, min_open=low_open, max_open=high_open)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            self.fail(f"{value!r} is not a number", param, ctx)
        low = -math.inf if self.min is None else float(self.min)
        high = math.inf if self.max is None else float(self.max)
        checked = number_in(number, low, high, low_open=self.min_open, high_open=self.max_open)
        if checked is None:
            self.fail(f"{value!r} is not {self.accepted()}", param, ctx)
        return checked

    def accepted(self) -> str:
        """What the option accepts, in words: ``a finite number above 0 and at most 3600``."""
        words = []
        if self.min is not None:
            words.append(f"{'above' if self.min_open else 'at least'} {shown_bound(self.min)}")
        if self.max is not None:
            words.append(f"{'below' if self.max_open else 'at most'} {shown_bound(self.max)}")
        return "a finite number" + (f" {' and '.join(words)}" if words else "")


class Output(NamedTuple):
    """One ``--output``: a reporter's name and, with ``NAME:FILE``, the file it writes
    (``-`` for standard output)."""

    name: str
    file: Path | None = None

    @property
    def option(self) -> str:
        """As the option was written: ``--output=json:r.json``."""
        return f"--output={self.name}:{self.file}" if self.file is not None else f"--output={self.name}"


def split_outputs(values: Sequence[str]) -> list[Output]:
    """The ``--output`` values: each a comma-separated list of ``NAME`` or ``NAME:FILE``."""
    outputs: list[Output] = []
    for value in values:
        for piece in value.split(","):
            name, colon, file = piece.strip().partition(":")
            name = name.strip()
            if not name:
                if piece.strip():
                    raise ConfigError(f"--output={piece.strip()} names no reporter; write NAME or NAME:FILE")
                continue
            if colon and not file.strip():
                raise ConfigError(f"--output={piece.strip()} names no file; write {name}:FILE or {name}")
            outputs.append(Output(name, Path(file.strip()) if colon else None))
    return outputs


STDOUT = Path("-")
STDOUT_NAMES = {"-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"}
"""The output files that are standard output: the report goes to the stream, in order with
the rest of what ATP prints there."""


def make_reporters(
    loaded: Plugins,
    outputs: Sequence[Output],
    output_file: Path | None,
    verbose: bool,
    inputs: Sequence[Path] = (),
    rename: Callable[[Path], Path] | None = None,
    quiet: bool = False,
    config: str | None = None,
) -> list[Reporter]:
    """The reporters for the ``--output`` values. A file-writing reporter writes the file its
    ``NAME:FILE`` gives; ``--output-file`` goes to the first one given none; the others write
    to stdout (``-`` means stdout too), and only one may. The console report is added unless
    a reporter writes to stdout. ``inputs`` (the suite, the config) must not be written over;
    ``rename`` makes each file's name (one file per suite when several run); with it, no report
    may go to stdout (one document per suite would follow another there). ``config`` says
    which configuration the command used, for the console's header."""
    from atp.core.reporter import ReportOptions

    if not outputs:
        outputs = [Output("console")]
    outputs = list(dict.fromkeys(outputs))
    classes = {o.name: loaded.reporter(o.name) for o in outputs}
    targets = _targets(outputs, classes, output_file)
    reporters: list[Reporter] = []
    stdout_writers: list[str] = []
    seen: dict[Path, str] = {}
    for output, target, how in targets:
        cls = classes[output.name]
        if target is not None and str(target) in STDOUT_NAMES:
            target = None
        elif target is not None:
            if rename is not None:
                target = rename(target)
            check_output_file(target, inputs, how)
            key = Path(target).resolve()
            if key in seen:
                raise ConfigError(f"{how} and {seen[key]} would both write {target}; give each its own file")
            seen[key] = how
        if cls.file_extension is not None and target is None:
            stdout_writers.append(output.name)
        reporters.append(
            cls(
                ReportOptions(
                    output_file=target, verbose=verbose, quiet=quiet, stream=sys.stdout, config=config
                )
            )
        )
    if stdout_writers and rename is not None:
        raise ConfigError(
            f"the {stdout_writers[0]} report to stdout takes one suite; name a file "
            f"(--output={stdout_writers[0]}:FILE; one per suite is written)"
        )
    if len(stdout_writers) > 1:
        first, second = stdout_writers[:2]
        raise ConfigError(
            f"the {first} and {second} reports would both go to standard output; give them files "
            f"(--output={first}:FILE --output={second}:FILE)"
        )
    if (
        not stdout_writers
        and not any(r.name == "console" for r in reporters)
        and "console" in loaded.reporters
    ):
        console = loaded.reporter("console")
        options = ReportOptions(verbose=verbose, quiet=quiet, stream=sys.stdout, config=config)
        reporters.insert(0, console(options))
    return reporters


def _targets(
    outputs: list[Output], classes: dict[str, type[Reporter]], output_file: Path | None
) -> list[tuple[Output, Path | None, str]]:
    """Each output with the file it writes (``None``: the terminal or stdout) and how that file
    was named (for messages); ``--output-file`` goes to the first file-writing one given none."""
    targets: list[tuple[Output, Path | None, str]] = []
    for output in outputs:
        cls = classes[output.name]
        if output.file is not None and cls.file_extension is None:
            raise ConfigError(
                f"{output.option}: the {output.name} reporter writes to the terminal and takes no file"
            )
        targets.append((output, output.file, output.option))
    if output_file is not None:
        free = next(
            (
                i
                for i, (o, f, _) in enumerate(targets)
                if f is None and classes[o.name].file_extension is not None
            ),
            None,
        )
        if free is None:
            given = any(f is not None for _, f, _ in targets)
            raise ConfigError(
                "--output-file needs an --output that writes a file (like json)"
                + ("; every one names its own file already" if given else "")
            )
        targets[free] = (targets[free][0], output_file, f"--output-file {output_file}")
    return targets


def check_output_file(output_file: Path, inputs: Sequence[Path], how: str | None = None) -> None:
    """Refuse an output file that is one of the command's input files or a folder; ``how``
    names it as the user did (``--output-file x.json``, ``--output=json:x.json``)."""
    how = how or f"--output-file {output_file}"
    if output_file.is_dir():
        raise ConfigError(f"{how} is a directory; name a file in it")
    folder = output_file.parent
    while not folder.exists() and folder != folder.parent:  # the folder is made when written
        folder = folder.parent
    if not folder.is_dir():
        raise ConfigError(f"{how}: {folder} is not a folder, so the file cannot be written")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"{how}: the folder {folder} is not writable")
    for path in inputs:
        same = False
        try:
            same = output_file.exists() and path.exists() and output_file.samefile(path)
        except OSError:
            same = output_file.resolve() == path.resolve()
        if same:
            raise ConfigError(f"{how} is the input file {path}; it would be overwritten")


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
            owner = (
                loaded.owner("reporter", reporter.name) if reporter.name in loaded.reporters else "a plugin"
            )
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
    """0 when every test passed (quarantined ones aside) and the run directory is sound;
    130/143 for a run stopped by SIGINT/SIGTERM; 1 when a test failed, the run did not finish,
    or it regressed from its baseline and regressions fail the run; 5 when nothing failed but
    a budget stopped the run before every run was made (the suite is incomplete)."""
    import signal

    if results.stopped_by in ("SIGINT", "SIGTERM"):
        return 128 + int(getattr(signal, results.stopped_by))
    from atp.cli.main import EXIT_INCOMPLETE

    summary = results.summary
    if summary.failed + summary.errors - summary.quarantined or results.problems or results.interrupted:
        return 1
    comparison = results.baseline
    if comparison is not None and comparison.fail_on_regression and comparison.failing_regressions:
        return 1
    if results.stopped_by == "budget":
        return EXIT_INCOMPLETE
    if not summary.ok:
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


def write_output(path: Path, data: bytes) -> None:
    """An output file (a baseline, a comparison) holding ``data`` whole or not at all: a reader
    never sees half a file and a failure leaves the old one; an AtpError naming the file."""
    from atp.core.errors import AtpError
    from atp.core.files import reason, write_atomic

    try:
        write_atomic(path, data, durable=True)
    except OSError as exc:
        raise AtpError(f"cannot write {path}: {reason(exc)}") from None
