"""Information commands: ``atp plugins``, ``list-agents``, ``list-evaluators``, ``version``."""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

import click

from atp.cli.app import BoundedFloat, config_option, plugins, plugins_for, suite_config_option, warn_problems
from atp.core.text import printable

if TYPE_CHECKING:
    from atp.core.adapter import Health
    from atp.core.config import AgentDefinition, Config, ResolvedAgent
    from atp.core.plugins import Plugins
    from atp.core.secrets import Masker

DISTRIBUTIONS = ("atp-kernel", "atp-adapters", "atp-evaluators", "atp-reporters", "atp-executors", "atp-cli")
CHECK_SECONDS = 10.0
"""How long ``atp list-agents --check`` gives each agent by default (start and health)."""
CLOSE_SECONDS = 10.0
"""How long closing an adapter may take after its check (its agents are then stopped at once)."""
DETAIL_CHARS = 200
FAILING = ("unhealthy", "unreachable", "invalid")
"""The statuses that make ``atp list-agents --check`` exit with 1."""


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
            ("executors", info.executors),
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
@click.option(
    "--suite",
    "suite_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also list the agents this suite defines.",
)
@click.option(
    "--check",
    is_flag=True,
    help="Also start each agent's adapter briefly and show its health: healthy, degraded, unhealthy or "
    "unreachable (exit code 1 when one is not usable).",
)
@click.option(
    "--timeout",
    type=BoundedFloat(0, 3600, low_open=True),
    default=CHECK_SECONDS,
    metavar="SECONDS",
    help=f"With --check: how long each agent may take to start and report (default {CHECK_SECONDS:g}).",
)
@suite_config_option("--suite, when given")
def list_agents_command(
    suite_path: Path | None, check: bool, timeout: float, config_path: Path | None
) -> int:
    """List the agents defined in the config file (and in a suite, with --suite); with --check,
    with each one's health."""
    from atp.core.config import agent_definitions, load_config
    from atp.core.suite import load_suite

    config = load_config(config_path, suites=[suite_path] if suite_path else ())
    loaded = plugins_for(config)
    suite = load_suite(suite_path, loaded.evaluators, services=loaded.services) if suite_path else None
    definitions = agent_definitions(config, suite)
    if not definitions:
        click.echo(
            printable(
                f"No agents defined: add them to atp.config.yaml or a suite's 'agents' list ({config.origin})."
            )
        )
        return 0
    width = max(len(n) for n in definitions)
    statuses = check_agents(config, definitions, loaded, timeout) if check else {}
    failing = False
    for name, definition in sorted(definitions.items()):
        where = ""
        if definition.document is not None:
            where = f"{definition.document.path}:{definition.document.line_of(definition.at)}"
        line = f"{name.ljust(width)}  type={definition.type or '?'}  {where}"
        if name in statuses:
            status, detail = statuses[name]
            failing = failing or status in FAILING
            line += f"  {status}" + (f" ({detail})" if detail else "")
        click.echo(printable(line))
    return 1 if failing else 0


def check_agents(
    config: Config, definitions: dict[str, AgentDefinition], loaded: Plugins, timeout: float
) -> dict[str, tuple[str, str]]:
    """Each agent's health status and its detail (masked, shortened), checked all at once, each
    within ``timeout`` seconds. An agent whose definition does not resolve is ``invalid``."""
    import logging

    import anyio

    from atp.core.config import masker_for, resolve_agent
    from atp.core.errors import AtpError
    from atp.core.text import shorten

    statuses: dict[str, tuple[str, str]] = {}
    agents: dict[str, tuple[ResolvedAgent, Masker]] = {}
    for name, definition in definitions.items():
        try:
            agent = resolve_agent(definition, loaded.adapters)
        except AtpError as exc:
            statuses[name] = ("invalid", shorten(str(exc), DETAIL_CHARS))
            continue
        agents[name] = (agent, masker_for(config, agent))

    async def one(name: str) -> None:
        agent, masker = agents[name]
        health = await agent_health(agent, timeout, masker)
        statuses[name] = (health.status, shorten(masker.text(health.detail), DETAIL_CHARS))

    async def every() -> None:
        async with anyio.create_task_group() as group:
            for name in agents:
                group.start_soon(one, name)

    adapters_log = logging.getLogger("atp.adapters")
    level = adapters_log.level
    adapters_log.setLevel(logging.ERROR)  # (what an adapter warns about at start is the status shown)
    try:
        anyio.run(every)
    finally:
        adapters_log.setLevel(level)
    return statuses


async def agent_health(agent: ResolvedAgent, timeout: float, masker: Masker | None = None) -> Health:
    """Start the agent's adapter, ask its health, close it: all within ``timeout`` seconds. An
    adapter that cannot start makes the agent ``unreachable``; one that refuses an agent reporting
    itself unhealthy gives that report. One that does not finish in time is ``unhealthy``, with
    "no answer within N s": what did not answer may well have accepted the connection (a server
    that hangs); an agent that cannot be reached at all is said so by its adapter (connection
    refused, a name that does not resolve, no connection within its ``connect_timeout``)."""
    import anyio

    from atp.core.adapter import AgentUnhealthy, Health
    from atp.core.validation import described, single_exception

    adapter = None
    try:
        with anyio.fail_after(timeout):
            adapter = agent.create_adapter()
            await adapter.open(masker=masker)
            health = await adapter.health()
        if not isinstance(health, Health):
            return Health(status="unknown", detail=f"the adapter's health() returned {type(health).__name__}")
        return health
    except TimeoutError:
        return Health(status="unhealthy", detail=f"no answer within {timeout:g} s")
    except Exception as raised:
        exc = single_exception(raised)
        if isinstance(exc, AgentUnhealthy):
            return exc.health
        return Health(status="unreachable", detail=described(exc))
    finally:
        if adapter is not None:
            with anyio.move_on_after(CLOSE_SECONDS, shield=True) as closing:
                try:
                    await adapter.aclose()
                except Exception:
                    pass
            if closing.cancelled_caught:
                adapter.abort()


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
