"""``atp report``: render the results stored in a run directory, as the live run did."""

from __future__ import annotations

from pathlib import Path

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


@click.command("report")
@click.argument("run_dir", required=False, type=click.Path(path_type=Path, file_okay=False))
@click.option("--output", "outputs", multiple=True, help="Reporter: console (default), json, junit, html or a plugin's; NAME:FILE writes a file (repeatable).")
@click.option("--output-file", type=click.Path(path_type=Path, dir_okay=False), help="File for the file-writing reporter given none (like --output=json).")
@verbosity_options
@config_option
@debug_option
def report_command(
    run_dir: Path | None,
    outputs: tuple[str, ...],
    output_file: Path | None,
    verbose: bool,
    quiet: bool,
    config_path: Path | None,
) -> int:
    """Render the results in RUN_DIR (default: the newest run in .atp/runs).

    Exits as the run itself did: 0 when every test in it passed, 1 when one failed or the run
    did not finish, 130/143 when it was interrupted by SIGINT/SIGTERM; 3 when a reporter fails.
    """
    from atp.core.config import load_config
    from atp.core.results import RUN_FILES, RunStore

    config = load_config(config_path)
    loaded = plugins_for(config)
    if run_dir is None:
        run_dir = RunStore.latest(config.run_dir)
    store = RunStore.open(run_dir)
    results = store.results()
    inputs = [run_dir / name for name in RUN_FILES]
    check_verbosity(verbose, quiet)
    reporters = make_reporters(loaded, split_outputs(outputs), output_file, verbose, inputs, quiet=quiet)
    failed = render(reporters, results, store)
    for problem in dict.fromkeys(store.problems):  # each reporter reading the events finds them again
        click.echo(f"atp: warning: {printable(problem)}", err=True)
    if debugging():
        show_tracebacks(results)
    if failed is not None:
        return failed
    code = exit_code(results)
    return EXIT_FAILED if code == 0 and store.problems else code
