"""A run directory's results rendered as ``atp report`` renders them: the reporters the options
ask for, the rendering and its exit code, and the shards of a sharded run merged first
(``atp merge``, ``atp report --merge``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from atp.cli.app import check_verbosity, exit_code, make_reporters, render, show_tracebacks, split_outputs
from atp.cli.main import EXIT_FAILED, debugging
from atp.core.text import printable

if TYPE_CHECKING:
    from atp.core.config import Config
    from atp.core.plugins import Plugins
    from atp.core.reporter import Reporter
    from atp.core.results import RunStore
    from atp.core.secrets import Masker

__all__ = ["merge_and_report", "report_run_dir", "report_store", "reporters_for", "run_masker"]


def run_masker(config: Config) -> Masker:
    """What a run directory read back is masked with (:attr:`RunStore.masker`): the config's
    secrets, the evaluators', and the values of secret-looking environment variables (where an
    agent's settings take theirs from). An agent may have changed a file of the directory after
    ATP wrote it, to hold a secret ATP never wrote."""
    import os

    from atp.core.secrets import Masker, looks_secret

    values = [*config.secrets.values(), *config.evaluator_secrets()]
    values.extend(value for name, value in os.environ.items() if looks_secret(name))
    return Masker(values)


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


def report_run_dir(
    run_dir: Path,
    loaded: Plugins,
    outputs: Sequence[str],
    output_file: Path | None,
    verbose: bool,
    quiet: bool,
    masker: Masker | None = None,
) -> int:
    """Render the results stored in ``run_dir`` with the reporters the options ask for
    (``atp report``), masked again with ``masker`` (:func:`run_masker`), and return the exit
    code the run calls for."""
    from atp.core.results import RUN_FILES, RunStore

    store = RunStore.open(run_dir, masker)
    reporters = reporters_for(
        loaded, outputs, output_file, verbose, quiet, [run_dir / name for name in RUN_FILES]
    )
    return report_store(store, reporters)


def merge_and_report(
    run_dirs: Sequence[Path],
    root: Path,
    loaded: Plugins,
    outputs: Sequence[str],
    output_file: Path | None,
    verbose: bool,
    quiet: bool,
    masker: Masker | None = None,
) -> int:
    """Merge the shards' run directories into a new one below ``root``, say where on stderr,
    and render it (masked again with ``masker``): ``atp merge`` and ``atp report --merge``."""
    from atp.core.merge import merge_runs
    from atp.core.results import RUN_FILES, RunStore

    inputs = [directory / name for directory in run_dirs for name in RUN_FILES]
    reporters = reporters_for(
        loaded, outputs, output_file, verbose, quiet, inputs
    )  # wrong options: nothing merged
    merged = merge_runs(list(run_dirs), root)
    store = RunStore.open(merged, masker)
    count = len(store.read_header().merged_from)
    click.echo(printable(f"Merged {count} shard{'s' if count != 1 else ''} into {merged}"), err=True)
    return report_store(store, reporters)
