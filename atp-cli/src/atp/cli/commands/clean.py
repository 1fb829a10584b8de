"""``atp clean``: remove what killed ATP processes left behind."""

from __future__ import annotations

from pathlib import Path

import click

from atp.cli.app import config_option, debug_option


@click.command("clean")
@click.option(
    "--run-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Where the run directories are (default: the config's, .atp/runs).",
)
@config_option
@debug_option
def clean_command(run_dir: Path | None, config_path: Path | None) -> int:
    """Remove what ATP processes that no longer run left behind: the agent processes of their
    runs (recorded in the run directories) and what each installed adapter knows it may leave,
    such as the containers of container agents. Running ATP processes keep theirs. (The next
    'atp test' does the same for what it needs.)

    Exit code 0, or 1 when something could not be looked at (said on stderr).
    """
    from atp.cli.app import plugins_for
    from atp.core.config import load_config
    from atp.core.errors import AtpError
    from atp.core.ledger import stop_abandoned
    from atp.core.text import printable

    config = load_config(config_path)
    loaded = plugins_for(config)
    done: list[str] = list(stop_abandoned(run_dir or config.run_dir))
    code = 0
    for name in sorted(loaded.adapters):
        try:
            done.extend(f"{name}: removed {what}" for what in loaded.adapter(name).clean_abandoned())
        except AtpError as exc:
            click.echo(printable(f"atp: warning: {name} agents: nothing removed: {exc}"), err=True)
            code = 1
    for line in done:
        click.echo(printable(line))
    if not done and code == 0:
        click.echo("Nothing to clean.")
    return code
