"""``atp merge``: the run directories of a sharded run's shards combined into one, and rendered."""

from __future__ import annotations

from pathlib import Path

import click

from atp.cli.app import config_option, debug_option, plugins_for, verbosity_options
from atp.cli.rendering import merge_and_report, run_masker

__all__ = ["merge_and_report", "merge_command"]


@click.command("merge")
@click.argument(
    "run_dirs",
    nargs=-1,
    required=True,
    metavar="RUN_DIR...",
    type=click.Path(path_type=Path, file_okay=False),
)
@click.option(
    "--run-dir",
    "run_root",
    type=click.Path(path_type=Path, file_okay=False),
    help="Where the merged run directory goes (default: .atp/runs).",
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
def merge_command(
    run_dirs: tuple[Path, ...],
    run_root: Path | None,
    outputs: tuple[str, ...],
    output_file: Path | None,
    verbose: bool,
    quiet: bool,
    config_path: Path | None,
) -> int:
    """Merge the run directories of the shards of one run (atp test --shard=K/N) into a new
    run directory, and render its results as 'atp report' does.

    Every shard must be given once, all made from the same suite, selection, agent and
    baseline. Exits as 'atp report' would on the merged run directory; 2 when the shards
    cannot be merged (the message says why).
    """
    from atp.core.config import load_config

    config = load_config(config_path)
    loaded = plugins_for(config)
    return merge_and_report(
        run_dirs, run_root or config.run_dir, loaded, outputs, output_file, verbose, quiet, run_masker(config)
    )
