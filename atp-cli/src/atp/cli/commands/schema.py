"""``atp schema suite|config``: the JSON Schema of suite files or of the configuration, for editors."""

from __future__ import annotations

from pathlib import Path

import click

from atp.cli.app import config_option, plugins, warn_problems


@click.command("schema")
@click.argument("kind", type=click.Choice(["suite", "config"]))
@click.option(
    "--output-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the schema to this file (default: standard output).",
)
@config_option
def schema_command(kind: str, output_file: Path | None, config_path: Path | None) -> int:
    """Print the JSON Schema (draft-07) of suite files (KIND suite) or of atp.config.yaml
    (KIND config), with the installed plugins' assertion types, agent types and settings.

    \b
    Editors using yaml-language-server check and complete a file that starts with:
      # yaml-language-server: $schema=path/to/suite.schema.json
    """
    from atp.core.config import load_config
    from atp.core.errors import ConfigError
    from atp.core.reporter import write_file
    from atp.core.schema import config_schema, schema_text, suite_schema
    from atp.core.text import printable

    loaded = plugins()
    try:  # the project's own plugins (the config's plugins: list) count too
        entries = load_config(config_path).plugin_entries()
    except ConfigError as exc:
        entries = []
        warn_problems([f"the config's plugins are left out of the schema: {exc}"])
    if entries:
        loaded.load_local(entries)
    warn_problems(loaded.problems())
    if kind == "suite":
        schema = suite_schema(loaded.evaluators, loaded.adapters)
    else:
        schema = config_schema(loaded.adapters, loaded.evaluators)
    text = schema_text(schema)
    if output_file is None or str(output_file) == "-":
        click.echo(text, nl=False)
        return 0
    write_file(output_file, text.encode("utf-8"))
    click.echo(printable(f"{kind} schema written to {output_file}"), err=True)
    return 0
