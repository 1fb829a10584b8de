"""The ``atp`` entry point: a Click group whose commands are imported only when called.

Exit codes (docs/cli.md): 0 every selected test passed; 1 a test failed or errored, or the run
did not finish; 2 a usage, config or suite error (the message on stderr, no traceback unless
``--debug``); 3 a plugin failed (a reporter raised, an adapter could not start, two plugins
claim one name); 4 an internal error of ATP itself; 130 (Ctrl-C) or 143 (SIGTERM) interrupted,
after the finished results are written and reported.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from typing import Any

import click

from atp.core.errors import single_exception

BUILTIN_COMMANDS = {
    "init": (
        "atp.cli.commands.init",
        "init_command",
        "Start here: write a config, a suite and an agent, or a plugin package.",
    ),
    "schema": (
        "atp.cli.commands.schema",
        "schema_command",
        "Print the JSON Schema of suite files or of the config, for editors.",
    ),
    "test": ("atp.cli.commands.test", "test_command", "Run a suite against an agent."),
    "validate": (
        "atp.cli.commands.validate",
        "validate_command",
        "Check that an agent speaks ATP: probes, events, refusals.",
    ),
    "report": ("atp.cli.commands.report", "report_command", "Render the results of a run directory."),
    "merge": (
        "atp.cli.commands.merge",
        "merge_command",
        "Merge the shards of a sharded run into one run directory and report it.",
    ),
    "view": (
        "atp.cli.commands.view",
        "view_command",
        "Browse the stored runs in a browser: reports and each test's trend.",
    ),
    "baseline": (
        "atp.cli.commands.baseline",
        "baseline_command",
        "Save a baseline of an agent's scores, or compare a run with one.",
    ),
    "clean": (
        "atp.cli.commands.clean",
        "clean_command",
        "Remove what killed ATP processes left behind (agent processes, containers).",
    ),
    "compare": (
        "atp.cli.commands.compare",
        "compare_command",
        "Run a suite against several agents, interleaved, and compare their scores.",
    ),
    "plugins": ("atp.cli.commands.info", "plugins_command", "List installed plugins and what they register."),
    "list-agents": (
        "atp.cli.commands.info",
        "list_agents_command",
        "List the agents defined in the config and a suite.",
    ),
    "list-evaluators": (
        "atp.cli.commands.info",
        "list_evaluators_command",
        "List the assertion types evaluators provide.",
    ),
    "version": (
        "atp.cli.commands.info",
        "version_command",
        "Show the versions of ATP's installed distributions.",
    ),
}

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PLUGIN, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
EXIT_INCOMPLETE = 5
"""Nothing failed, but a budget stopped the run before every run was made."""

_debug = bool(os.environ.get("ATP_DEBUG"))


class LazyGroup(click.Group):
    """Built-in commands load on first use; plugin commands join through ``atp_register_commands``."""

    _plugins_loaded = False

    def _load_plugin_commands(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        from atp.cli.app import plugins, warn_problems
        from atp.core import hooks

        loaded = plugins()

        def failed(plugin: str, hook_name: str, exc: BaseException) -> None:
            warn_problems(
                [f"{loaded.describe(plugin)} could not add its commands: {type(exc).__name__}: {exc}"]
            )

        hooks.notify(loaded.pm, "atp_register_commands", failed, cli=self)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_plugin_commands()
        return sorted(set(BUILTIN_COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in BUILTIN_COMMANDS:
            module, attribute, _ = BUILTIN_COMMANDS[name]
            command: click.Command = getattr(importlib.import_module(module), attribute)
            return command
        if name not in self.commands:
            self._load_plugin_commands()
        return self.commands.get(name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Help lists built-ins from their one-line summaries, without importing them."""
        rows = [(name, help_) for name, (_, _, help_) in BUILTIN_COMMANDS.items()]
        self._load_plugin_commands()
        for name, command in self.commands.items():
            if name not in BUILTIN_COMMANDS:
                rows.append((name, command.get_short_help_str(limit=formatter.width)))
        with formatter.section("Commands"):
            formatter.write_dl(sorted(rows))


def _show_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from atp.cli.commands.info import versions

    for line in versions():
        click.echo(line)
    ctx.exit(EXIT_OK)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for errors, plugin failures included.")
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the versions of ATP's distributions and exit.",
)
def cli(debug: bool) -> None:
    """ATP, the Agent Test Platform: test AI agents through the ATP Protocol.

    \b
    Run a suite:      atp test --suite=suite.yaml --agent=my-agent
    Re-render a run:  atp report .atp/runs/<run-id> --output=json --output-file=results.json
    """
    global _debug
    _debug = _debug or debug


def debugging() -> bool:
    """Whether ``--debug`` (or ``ATP_DEBUG``) asks for tracebacks."""
    return _debug


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    try:
        try:
            result: Any = cli.main(args=argv, prog_name="atp", standalone_mode=False)
        except BaseException as raised:
            raise single_exception(raised) from None
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return EXIT_USAGE if isinstance(exc, click.UsageError) else exc.exit_code
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        return EXIT_INTERRUPTED
    except OSError as exc:  # a file or stream ATP writes failed: full disk, closed pipe
        if _debug:
            _traceback(exc)
        return _output_failed(exc)
    except Exception as exc:
        return _failed(exc)
    try:
        sys.stdout.flush()
    except OSError as exc:
        return _output_failed(exc)
    return result if isinstance(result, int) else EXIT_OK


def _failed(exc: Exception) -> int:
    """An error that stopped ATP: the message (the traceback with ``--debug``) and its code."""
    from atp.core.errors import AtpError, PluginFailed, SuiteErrors
    from atp.core.text import printable

    if _debug:
        _traceback(exc)
    if isinstance(exc, PluginFailed):
        click.echo(f"atp: plugin error: {printable(_masked(str(exc)))}", err=True)
        return EXIT_PLUGIN
    if isinstance(exc, SuiteErrors):  # a line for each mistake
        lines = [f"{exc.heading}:", *(f"  {printable(_masked(str(error)))}" for error in exc.errors)]
        click.echo(f"atp: error: {printable(_masked(lines[0]))}\n" + "\n".join(lines[1:]), err=True)
        return EXIT_USAGE
    if isinstance(exc, AtpError):
        click.echo(f"atp: error: {printable(_masked(str(exc)))}", err=True)
        return EXIT_USAGE
    click.echo(
        f"atp: internal error: {type(exc).__name__}: {printable(_masked(str(exc)))}\n"
        f"This is a bug in ATP{'' if _debug else ' (run with --debug for the traceback)'}; "
        f"the run directory keeps every finished result.",
        err=True,
    )
    return EXIT_INTERNAL


def _masked(text: str) -> str:
    """An error's text with the values of secret-looking environment variables masked (those a
    run's masker takes from the ``${VAR}`` of an agent's settings): a last line of defence, as
    the run's own masker is gone once its error reaches here. Adapters mask what they word
    themselves with the run's masker and their settings' secrets (an agent's headers)."""
    from atp.core.secrets import Masker, looks_secret

    masker = Masker(value for name, value in os.environ.items() if looks_secret(name))
    return masker.text(text) if masker else text


def _traceback(exc: BaseException) -> None:
    import traceback

    with contextlib.suppress(OSError):
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)


def _output_failed(exc: OSError) -> int:
    """An error writing output, said once on stderr; stdout is then silenced so that Python's
    own flush at exit does not fail again."""
    import errno

    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    if exc.errno == errno.EPIPE:  # the reader went away (``atp report | head``): not an error
        return EXIT_FAILED
    where = f" {exc.filename}" if exc.filename else " standard output"
    with contextlib.suppress(OSError):
        from atp.core.text import printable

        click.echo(printable(f"atp: error: cannot write{where}: {exc.strerror or exc}"), err=True)
    return EXIT_USAGE


def run() -> None:
    """Console-script entry point."""
    code = main()
    if _threads_left():
        # A worker thread abandoned at a time limit (an evaluator stuck in a blocking call)
        # would keep Python from exiting: everything is written, so leave without waiting.
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _threads_left() -> bool:
    """Whether a thread Python would wait for at exit is still running."""
    threading = sys.modules.get("threading")
    if threading is None:
        return False
    main_thread = threading.main_thread()
    return any(t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate())


if __name__ == "__main__":  # pragma: no cover
    run()
