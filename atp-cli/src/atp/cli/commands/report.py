"""``atp report``: render the results stored in a run directory, as the live run did."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from atp.cli.app import (
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
)
from atp.cli.main import EXIT_FAILED, debugging
from atp.core.text import printable

if TYPE_CHECKING:
    from atp.core.plugins import Plugins
    from atp.core.reporter import Reporter
    from atp.core.results import RunStore


@click.command("report")
@click.argument(
    "run_dirs", nargs=-1, metavar="[RUN_DIR]...", type=click.Path(path_type=Path, file_okay=False)
)
@click.option(
    "--merge",
    is_flag=True,
    help="Merge the run directories of a sharded run's shards (atp test --shard=K/N) into one in the run root, then render it (like 'atp merge').",
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
@verbosity_options
@config_option
@debug_option
def report_command(
    run_dirs: tuple[Path, ...],
    merge: bool,
    outputs: tuple[str, ...],
    output_file: Path | None,
    verbose: bool,
    quiet: bool,
    config_path: Path | None,
) -> int:
    """Render the results in RUN_DIR (default: the newest run in .atp/runs); with --merge,
    those of the shards' run directories merged into one.

    Exits as the run itself did: 0 when every test in it passed, 1 when one failed or the run
    did not finish, 5 when a budget left runs out, 130/143 when it was interrupted by
    SIGINT/SIGTERM; 3 when a reporter fails.
    """
    from atp.core.config import load_config
    from atp.core.results import RUN_FILES, RunStore

    if merge and not run_dirs:
        raise click.UsageError("--merge takes the run directories of the shards: atp report --merge DIR...")
    if not merge and len(run_dirs) > 1:
        raise click.UsageError(
            "atp report takes one run directory; to combine the shards of a sharded run, "
            "give --merge (atp report --merge DIR...)"
        )
    config = load_config(config_path)
    loaded = plugins_for(config)
    if merge:
        from atp.cli.commands.merge import merge_and_report

        return merge_and_report(run_dirs, config.run_dir, loaded, outputs, output_file, verbose, quiet)
    run_dir = run_dirs[0] if run_dirs else RunStore.latest(config.run_dir)
    store = RunStore.open(run_dir)
    reporters = reporters_for(
        loaded, outputs, output_file, verbose, quiet, [run_dir / name for name in RUN_FILES]
    )
    return report_store(store, reporters)


def reporters_for(
    loaded: Plugins,
    outputs: Sequence[str],
    output_file: Path | None,
    verbose: bool,
    quiet: bool,
    inputs: Sequence[Path],
) -> list[Reporter]:
    """The reporters ``--output``, ``--output-file``, ``-v`` and ``-q`` ask for; ``inputs``
    (the run directory's files) must not be written over."""
    check_verbosity(verbose, quiet)
    return make_reporters(loaded, split_outputs(outputs), output_file, verbose, inputs, quiet=quiet)


def report_store(store: RunStore, reporters: Sequence[Reporter]) -> int:
    """Render the results of a run directory with ``reporters``, warn of what reading it found
    damaged, and return the exit code the run calls for."""
    results = store.results()
    failed = render(reporters, results, store)
    for problem in dict.fromkeys(store.problems):  # each reporter reading the events finds them again
        click.echo(f"atp: warning: {printable(problem)}", err=True)
    if debugging():
        show_tracebacks(results)
    if failed is not None:
        return failed
    code = exit_code(results)
    return EXIT_FAILED if code == 0 and store.problems else code
