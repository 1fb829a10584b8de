"""Information commands: ``atp plugins``, ``list-agents``, ``list-evaluators``, ``version``."""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

import click

from atp.cli.app import config_option, plugins, plugins_for, warn_problems
from atp.core.text import printable

if TYPE_CHECKING:
    from atp.core.plugins import Plugins

DISTRIBUTIONS = ("atp-kernel", "atp-adapters", "atp-evaluators", "atp-reporters", "atp-cli")


def with_local_plugins(config_path: Path | None) -> Plugins:
    """The installed plugins and the config's own (``plugins:``); a config that cannot be read
    leaves its plugins out, with a warning."""
    from atp.core.config import load_config
    from atp.core.errors import AtpError

    try:
        config = load_config(config_path)
    except AtpError as exc:
        warn_problems([f"the config's plugins are left out: {exc}"])
        return plugins()
    return plugins_for(config)


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@config_option
def plugins_command(as_json: bool, config_path: Path | None) -> int:
    """List installed plugins (and the config's own): distribution, version, what they
    register, and load errors."""
    import msgspec

    infos = with_local_plugins(config_path).infos()
    if as_json:
        click.echo(msgspec.json.format(msgspec.json.encode(infos), indent=2).decode())
        return 0
    if not infos:
        click.echo("No plugins installed.")
        return 0
    for info in infos:
        origin = f"{info.distribution} {info.version}" if info.distribution else info.module or "-"
        click.echo(f"{info.name}  ({origin})")
        for label, names in (
            ("adapters", info.adapters),
            ("evaluators", info.evaluators),
            ("reporters", info.reporters),
            ("services", info.services),
        ):
            if names:
                click.echo(f"    {label}: {', '.join(names)}")
        for error in info.errors:
            click.echo(printable(f"    error: {error}"))
    return 0


@click.command("list-evaluators")
@click.option("-v", "--verbose", is_flag=True, help="Also list each type's config keys (and settings).")
@config_option
def list_evaluators_command(verbose: bool, config_path: Path | None) -> int:
    """List the assertion types that installed evaluators check; with --verbose, the keys of
    each one's config (name, type, required or default) and of its settings in atp.config.yaml."""
    loaded = with_local_plugins(config_path)
    owners = {name: info.name for info in loaded.infos() for name in info.evaluators}
    evaluators = loaded.evaluators
    width = max((len(n) for n in evaluators), default=0)
    for name in sorted(evaluators):
        cls = evaluators[name]
        click.echo(printable(f"{name.ljust(width)}  {cls.summary}  [{owners.get(name, '?')}]"))
        if verbose:
            _show_keys("config", cls.Config)
            if cls.Settings is not None:
                _show_keys(f"settings (evaluators.{name} in atp.config.yaml)", cls.Settings)
    return 0


def _show_keys(title: str, struct: type) -> None:
    from atp.core.schema import struct_keys

    keys = struct_keys(struct)
    if not keys:
        click.echo(f"    {title}: none")
        return
    click.echo(f"    {title}:")
    name_width = max(len(k.name) for k in keys)
    type_width = max(len(k.type) for k in keys)
    for key in keys:
        given = "required" if key.required else f"default {key.default}"
        click.echo(printable(f"      {key.name.ljust(name_width)}  {key.type.ljust(type_width)}  {given}"))


@click.command("list-agents")
@click.option("--suite", "suite_path", type=click.Path(path_type=Path, dir_okay=False), help="Also list the agents this suite defines.")
@config_option
def list_agents_command(suite_path: Path | None, config_path: Path | None) -> int:
    """List the agents defined in the config file (and in a suite, with --suite)."""
    from atp.core.config import agent_definitions, load_config
    from atp.core.suite import load_suite

    config = load_config(config_path)
    loaded = plugins_for(config)
    suite = load_suite(suite_path, loaded.evaluators, services=loaded.services) if suite_path else None
    definitions = agent_definitions(config, suite)
    if not definitions:
        click.echo("No agents defined: add them to atp.config.yaml or a suite's 'agents' list.")
        return 0
    width = max(len(n) for n in definitions)
    for name, definition in sorted(definitions.items()):
        where = ""
        if definition.document is not None:
            where = f"{definition.document.path}:{definition.document.line_of(definition.at)}"
        click.echo(printable(f"{name.ljust(width)}  type={definition.type or '?'}  {where}"))
    return 0


def versions() -> list[str]:
    """``<distribution> <version>`` for each of ATP's distributions, and Python's."""
    lines = []
    for dist in DISTRIBUTIONS:
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            version = "not installed"
        lines.append(f"{dist} {version}")
    lines.append(f"python {platform.python_version()}")
    return lines


@click.command("version")
def version_command() -> int:
    """Show the versions of ATP's installed distributions."""
    for line in versions():
        click.echo(line)
    return 0
