"""``atp view``: a local, read-only viewer over the stored runs (atp.cli.viewer)."""

from __future__ import annotations

from pathlib import Path

import click

from atp.cli.app import config_option, debug_option


@click.command("view")
@click.option(
    "--run-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Where the run directories are (default: the config's, .atp/runs).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="The port on 127.0.0.1 (0: a free one).",
)
@click.option("--no-open", is_flag=True, help="Do not open the viewer in a browser.")
@config_option
@debug_option
def view_command(run_dir: Path | None, port: int, no_open: bool, config_path: Path | None) -> int:
    """Serve the stored runs on 127.0.0.1 and open them in the browser: the list of runs with
    suite, agent, date and pass rate; each run's HTML report; each test's score across the runs
    of one suite and agent. Read-only; Ctrl-C stops it.
    """
    import tempfile

    from atp.cli.app import plugins_for
    from atp.cli.rendering import run_masker
    from atp.cli.viewer import RunIndex, Viewer
    from atp.core.config import load_config
    from atp.core.errors import ConfigError
    from atp.core.reporter import ReportOptions
    from atp.core.results import RunStore, SuiteResults

    config = load_config(config_path)
    loaded = plugins_for(config)
    root = run_dir or config.run_dir

    def render_report(store: RunStore, results: SuiteResults) -> bytes:
        if "html" not in loaded.reporters:
            raise LookupError(
                "no reporter named 'html' is installed: install atp-reporters (atp plugins lists what is)"
            )
        with tempfile.TemporaryDirectory(prefix="atp-view-") as folder:
            target = Path(folder) / "report.html"
            loaded.reporter("html")(ReportOptions(output_file=target)).report(results, store)
            return target.read_bytes()

    try:
        server = Viewer(RunIndex(root, run_masker(config)), render_report, port)
    except OSError as exc:
        raise ConfigError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    click.echo(f"ATP viewer of {root} on {server.url} (Ctrl-C stops it)", err=True)
    if not no_open:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
