"""``atp report``: render the results stored in a run directory, as the live run did."""

from __future__ import annotations

from pathlib import Path

import click

from atp.cli.app import config_option, debug_option, plugins_for, verbosity_options
from atp.cli.rendering import merge_and_report, report_run_dir, report_store, reporters_for, run_masker

__all__ = ["report_command", "report_store", "reporters_for"]


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
    from atp.core.results import RunStore

    if merge and not run_dirs:
        raise click.UsageError("--merge takes the run directories of the shards: atp report --merge DIR...")
    if not merge and len(run_dirs) > 1:
        raise click.UsageError(
            "atp report takes one run directory; to combine the shards of a sharded run, "
            "give --merge (atp report --merge DIR...)"
        )
    config = load_config(config_path)
    loaded = plugins_for(config)
    masker = run_masker(config)
    if merge:
        return merge_and_report(
            run_dirs, config.run_dir, loaded, outputs, output_file, verbose, quiet, masker
        )
    run_dir = run_dirs[0] if run_dirs else RunStore.latest(config.run_dir)
    return report_run_dir(run_dir, loaded, outputs, output_file, verbose, quiet, masker)
