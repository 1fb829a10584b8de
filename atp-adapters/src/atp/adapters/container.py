"""The ``container`` adapter: an agent packaged as a Docker image, run in an isolated container
for each run and spoken to over stdin/stdout/stderr exactly like a ``cli`` agent. Settings::

    agents:
      - name: my-agent
        type: container
        image: my-agent:1.2                # built locally or pulled (see pull)
        command: [python, /app/agent.py]   # optional: the image's own command by default
        env: {API_KEY: "${API_KEY}"}       # into the container's environment only
        resources: {memory: 512Mi, cpu: "1", pids: 256}
        network: none                      # the default; bridge, host or a named network
        working_folder: per-run            # the default without workspace; or shared
        workspace: ./work                  # optional: a host folder mounted read-write
        readonly_mounts: [/opt/models]     # HOST or HOST:CONTAINER, read-only
        pull: missing                      # never | missing | always
        user: "65534:65534"                # the default (nobody); "0" for root
        read_only_rootfs: false            # true: only the workspace and /tmp are writable

With ``working_folder: per-run`` (the default, unless ``workspace`` is set) every run gets a
fresh folder of its own (a copy of the test's ``workspace_fixture`` when it has one), mounted
read-write at the same path and made the container's working directory: its path is the
request's ``context.workspace_path``. ``working_folder: shared``: the ``workspace`` folder,
when set, is mounted for every run; without it nothing is (the image's working directory).

Each run is one ``docker run -i`` of the image with the request on stdin: the stdin/stdout/stderr
transport, its framing, event decoding, size limits and log keeping are the ``cli`` adapter's
(:func:`atp.adapters.cli.run_process`), with the Docker command-line client as the process that
carries the container's streams. The Docker SDK for Python (``pip install
'atp-adapters[container]'``, imported only when a container agent runs) does everything else:
the checks before the first run, the image, the engine's out-of-memory flag, the removal of the
container, and the removal of what a killed ATP left behind.

Isolation: no network unless configured, every capability dropped, no new privileges, a
non-root user unless configured, the resource limits given (memory without swap, so that an
agent past its limit is killed by the engine and the run says it ran out of memory). Secret
values are passed to the client in its environment (``-e NAME``), never on a command line,
in a label or an image. Every container is labelled ``atp.owner`` (ATP's pid and start time),
``atp.run`` (the run id) and ``atp.agent``; it is removed, with its anonymous volumes, however
the run ends (done, failed, timed out, Ctrl-C, SIGTERM), and containers of an ATP process that
no longer exists (``kill -9``) are removed when the next container agent starts or by
``atp clean``.

A test that declares tools gets the mock tool server on ATP's loopback, which a container
cannot reach: its ``context.tools_endpoint`` is rewritten to the gateway address of the
container's network, where ATP relays connections to the tool server. With ``network: none``
the container is then put on an internal network of ATP's own (``--internal``: no route beyond
the host; containers on it cannot reach each other), labelled like the containers and removed
at the end. The host's own gateway address on it would expose every service of the host that
listens on all addresses: ATP, when it runs as root, lets through only the relay's port
(iptables, on that network's interface), and otherwise warns in each run that it could not.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import functools
import io
import ipaddress
import os
import re
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

import anyio
import msgspec

from atp.adapters.cli import MAX_BYTES, MAX_GRACE_SECONDS, MiB, cannot_start, command_argv, run_process
from atp.adapters.network import quoted
from atp.adapters.process import AgentProcess, encoded
from atp.adapters.workspace import with_workspace_files
from atp.core import ledger
from atp.core.adapter import Adapter
from atp.core.bounds import number_in
from atp.core.errors import AdapterError, AgentError
from atp.core.plugins import require
from atp.core.protocol import ATPRequest, ATPResponse
from atp.core.secrets import Masker
from atp.core.service import with_context
from atp.core.text import as_text
from atp.core.tree import walk_entries

if TYPE_CHECKING:
    from atp.core.trace import EventSink

_INSTALL = "atp-adapters[container]"
_NO_PROGRAM = ("executable file not found", "no such file or directory", "permission denied")
"""Words of the engine's error, for a container that could not start, saying that the program it
was to run is not in the image or may not be run: no other try starts it."""
_FEATURE = "the container adapter (type: container)"
LABEL_OWNER = "atp.owner"
"""Which ATP process made a container: ``<pid>:<start>@<boot id>/<pid namespace>`` (the start
time is ``/proc/<pid>/stat`` field 22). A container whose owner, on this machine since its last
boot and in this pid namespace, no longer runs was left behind; of another machine or
namespace (a shared engine, a CI job in a container) ATP cannot tell, and leaves it alone."""
LABEL_RUN = "atp.run"
LABEL_AGENT = "atp.agent"
NOBODY = "65534:65534"
API_TIMEOUT = 60
"""Seconds an engine API call may take (removing a container that must be killed first)."""
MIN_MEMORY = 6 * MiB
"""The least memory the engine accepts for a container."""

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b?|b)?\s*", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_memory(text: str | int) -> int:
    """Bytes of a memory size: ``536870912``, ``512Mi``, ``512M``, ``2Gi``, ``1.5g`` (every
    unit counts in 1024s, as Docker and Kubernetes' ``Mi``/``Gi`` do)."""
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a memory size")
    if isinstance(text, int):
        value = text
    else:
        found = _SIZE.fullmatch(text)
        if found is None:
            raise ValueError(f"{text!r} is not a memory size (write it like 512Mi, 2Gi or 256M)")
        unit = (found.group(2) or "").lower().rstrip("b").rstrip("i")
        value = int(float(found.group(1)) * _UNITS[unit])
    if value < MIN_MEMORY:
        raise ValueError(f"{text!r} is less than the 6 MiB the engine accepts for a container")
    return value


def parse_cpu(value: str | float) -> float:
    """CPUs as a number: ``"1"``, ``0.5``, ``"500m"`` (thousandths, as Kubernetes writes them)."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number of CPUs")
    try:
        number = float(value[:-1]) / 1000 if isinstance(value, str) and value.endswith("m") else float(value)
    except ValueError:
        raise ValueError(f'{value!r} is not a number of CPUs (write it like "1", "0.5" or "500m")') from None
    if number_in(number, 0, 1024, low_open=True) is None:
        raise ValueError(f"{value!r} is not a number of CPUs between 0 and 1024")
    return number


class Resources(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    memory: str | int | None = None
    """The container's memory (and memory with swap: no swap), like ``512Mi`` or ``2Gi``."""
    cpu: str | float | None = None
    """CPUs, like ``"1"``, ``"0.5"`` or ``"500m"``."""
    pids: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] | None = None
    """The most processes in the container."""

    def __post_init__(self) -> None:
        if self.memory is not None:
            parse_memory(self.memory)
        if self.cpu is not None:
            parse_cpu(self.cpu)


def _mount(entry: str, base_dir: Path) -> tuple[Path, str]:
    """A ``readonly_mounts`` entry, ``HOST`` or ``HOST:CONTAINER``: the host path (relative to
    ``base_dir``) and where it appears in the container (the same path by default)."""
    host, _, inside = entry.partition(":")
    if not host:
        raise ValueError(f"readonly mount {entry!r} names no host path")
    path = (base_dir / host).resolve() if not os.path.isabs(host) else Path(host)
    inside = inside or str(path)
    if not inside.startswith("/"):
        raise ValueError(f"readonly mount {entry!r}: the path in the container must be absolute")
    return path, inside


class ContainerSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    image: Annotated[str, msgspec.Meta(min_length=1)]
    command: str | list[str] | None = None
    """What the container runs: the image's own command when not given."""
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    resources: Resources = msgspec.field(default_factory=Resources)
    network: Annotated[str, msgspec.Meta(min_length=1)] = "none"
    working_folder: Literal["per-run", "shared"] | None = None
    """``per-run``: a fresh folder per run, mounted as the working directory; ``shared``: the
    ``workspace`` folder (if any) for every run. By default ``per-run``, or ``shared`` when
    ``workspace`` is set."""
    workspace: str | None = None
    """A host folder mounted read-write at the request's workspace path (the same path as on
    the host), shared by every run; relative to the file defining the agent."""
    readonly_mounts: list[str] = msgspec.field(default_factory=list)
    pull: Literal["never", "missing", "always"] = "missing"
    user: str | None = NOBODY
    """The user the agent runs as: nobody by default; ``None`` for the image's own."""
    read_only_rootfs: bool = False
    grace_seconds: Annotated[float, msgspec.Meta(ge=0, le=MAX_GRACE_SECONDS)] = 3.0
    max_output_bytes: Annotated[int, msgspec.Meta(ge=1024, le=MAX_BYTES)] = 64 * MiB
    max_line_bytes: Annotated[int, msgspec.Meta(ge=1024, le=MAX_BYTES)] = 4 * MiB
    docker: str = "docker"
    """The Docker command-line client that carries the container's streams."""

    def __post_init__(self) -> None:
        if self.working_folder == "per-run" and self.workspace is not None:
            raise ValueError(
                "'workspace' is a folder shared by every run, and 'working_folder: per-run' gives each "
                "run its own: drop 'workspace', or write 'working_folder: shared'"
            )
        for key, value in self.env.items():
            if not key or "=" in key or "\0" in key or "\0" in value:
                raise ValueError(f"'env' variable {key!r} is not a variable name with a value")
        for entry in self.readonly_mounts:
            if "\0" in entry:
                raise ValueError("'readonly_mounts' holds a NUL byte (\\0), which no path can")
            if not entry.partition(":")[0]:
                raise ValueError(f"readonly mount {entry!r} names no host path")
        grace = self.grace_seconds
        if number_in(grace, 0, MAX_GRACE_SECONDS) is None:
            raise ValueError(f"'grace_seconds' must be a number of seconds from 0 to {MAX_GRACE_SECONDS:g}")


@functools.cache
def _here() -> str:
    """This machine since its boot, and this process's pid namespace (read once)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            boot_id = boot.read().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return "unknown"
    return f"{boot_id}/{namespace}"


@functools.cache
def _owner(pid: int) -> str:
    """The ``atp.owner`` label of ATP process ``pid`` (this one: read once per process, as it
    labels every container)."""
    return f"{pid}:{ledger.start_time(pid)}@{_here()}"


def _owner_runs(label: str) -> bool:
    """Whether the ATP process a container's ``atp.owner`` label names may still run: it does,
    or it is not of this machine and pid namespace (ATP cannot tell, and keeps it)."""
    process, _, where = label.partition("@")
    if where != _here() or where == "unknown":
        return True
    pid, _, start = process.partition(":")
    if not pid.isdigit():
        return False
    now = ledger.start_time(int(pid))
    return now is not None and str(now) == start


def client() -> Any:
    """A Docker SDK client for the engine of the environment (``DOCKER_HOST``, or the default
    socket); an :class:`AdapterError` saying how to reach one when there is none."""
    docker = require("docker", install=_INSTALL, feature=_FEATURE)
    try:
        found = docker.from_env(timeout=API_TIMEOUT)
        found.ping()
    except docker.errors.DockerException as exc:
        where = (
            os.environ.get("DOCKER_HOST")
            or "the current Docker context's engine (the default socket /var/run/docker.sock unless a context says otherwise)"
        )
        raise AdapterError(
            f"the Docker engine is not reachable at {where} ({exc}); start it (for example "
            "'sudo systemctl start docker', or 'sudo dockerd &') or set DOCKER_HOST to one that runs"
        ) from None
    return found


def remove_abandoned(engine: Any) -> list[str]:
    """Remove the containers (with their anonymous volumes) and networks of ATP processes that
    no longer run; what was removed, for a message."""
    removed = []
    for container in engine.containers.list(all=True, filters={"label": LABEL_OWNER}):
        if _owner_runs(container.labels.get(LABEL_OWNER, "")):
            continue
        try:
            container.remove(force=True, v=True)
        except Exception:  # gone already, or the engine refuses: the next clean tries again
            continue
        removed.append(f"container {container.name} (run {container.labels.get(LABEL_RUN, '?')})")
    for network in engine.networks.list(filters={"label": LABEL_OWNER}):
        if _owner_runs((network.attrs.get("Labels") or {}).get(LABEL_OWNER, "")):
            continue
        try:
            network.remove()
        except Exception:  # still in use by a container being removed: the next clean
            continue
        removed.append(f"network {network.name}")
    return removed


class _Relay:
    """Carries TCP connections from an address a container can reach (its network's gateway)
    to a server on ATP's loopback (the mock tool server)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    async def start(self, host: str) -> int:
        self.server = await asyncio.start_server(self._serve, host=host, port=0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        for source, sink in ((reader, upstream_writer), (upstream_reader, writer)):
            task = asyncio.ensure_future(_pipe(source, sink))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def aclose(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
        for task in list(self.tasks):
            task.cancel()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except (OSError, asyncio.CancelledError):
        pass
    finally:
        sink.close()


class ContainerAdapter(Adapter):
    type = "container"
    summary = "a Docker image run in an isolated container per run, over stdin/stdout/stderr"
    Settings = ContainerSettings
    settings: ContainerSettings

    def __init__(self, settings: ContainerSettings, *, name: str, base_dir: Path) -> None:
        super().__init__(settings, name=name, base_dir=base_dir)
        self.workspace = (self.base_dir / settings.workspace).resolve() if settings.workspace else None
        shared = settings.working_folder == "shared" or (
            settings.working_folder is None and settings.workspace is not None
        )
        self.folder_per_run = not shared
        self.mounts = [_mount(entry, self.base_dir) for entry in settings.readonly_mounts]
        self.command = (
            command_argv(settings.command, settings.args)
            if settings.command is not None
            else list(settings.args)
        )
        # The client's environment: ATP's (DOCKER_HOST, DOCKER_CONFIG...) and the container's
        # variables, which "-e NAME" then passes on without their values on a command line.
        environment = dict(os.environ)
        environment.update(settings.env)
        self.encoded_env = encoded(environment)
        self.engine: Any = None
        self._names: set[str] = set()
        """The containers of runs in flight."""
        self._aborted = False
        self._tools_network: tuple[str, str] | None = None
        """The network and its gateway address through which containers reach the tool server."""
        self._own_network: str | None = None
        """The internal network ATP made for the mock tools (``network: none``), removed at the end."""
        self._relays: dict[tuple[str, int], tuple[_Relay, int]] = {}
        self._route_lock = anyio.Lock()
        self._interface = ""
        """The host's interface of ATP's own network."""
        self._firewall = False
        """Whether the host's address on ATP's network lets through the relays' ports only."""
        self._warnings: set[str] = set()
        """What each run that uses ATP's network is warned of."""

    # --- before the first run -----------------------------------------------------------------

    async def start(self) -> None:
        """Check, before any run, that containers can run: the client program, the SDK, the
        engine, the image (pulled when the policy allows), the mounts. Leftovers of ATP
        processes that no longer run are removed first."""
        problem = await anyio.to_thread.run_sync(
            cannot_start, [self.settings.docker], self.base_dir, os.environ
        )
        if problem is not None:
            raise AdapterError(
                f"agent {self.name!r}: the Docker client {self.settings.docker!r} cannot be run: {problem}; "
                "install Docker (Debian: apt-get install docker.io)",
                retryable=False,
            )
        for host, _ in self.mounts:
            if not host.exists():
                raise AdapterError(
                    f"agent {self.name!r}: the readonly mount {host} does not exist", retryable=False
                )
        if self.workspace is not None and not self.workspace.is_dir():
            raise AdapterError(
                f"agent {self.name!r}: the workspace {self.workspace} is not a folder", retryable=False
            )
        try:
            self.engine = await anyio.to_thread.run_sync(client)
        except AdapterError as exc:
            raise AdapterError(f"agent {self.name!r}: {exc}", retryable=exc.retryable) from None
        await anyio.to_thread.run_sync(remove_abandoned, self.engine)
        await anyio.to_thread.run_sync(self._image)
        await anyio.to_thread.run_sync(self._check_engine_settings)

    def _check_engine_settings(self) -> None:
        """What the engine would refuse at every run, refused once now: a network it does not
        have, more CPUs than it has."""
        from docker import errors  # type: ignore[import-untyped]  # (docker ships no type hints)

        network = self.settings.network
        if network not in ("none", "bridge", "host", "default") and not network.startswith("container:"):
            try:
                self.engine.networks.get(network)
            except errors.NotFound:
                raise AdapterError(
                    f"agent {self.name!r}: the network {network!r} does not exist on this engine "
                    "(docker network ls lists them; docker network create makes one)",
                    retryable=False,
                ) from None
        cpu = self.settings.resources.cpu
        if cpu is not None:
            have = int(self.engine.info().get("NCPU") or 0)
            if have and parse_cpu(cpu) > have:
                raise AdapterError(
                    f"agent {self.name!r}: resources.cpu asks for {cpu} CPUs; the engine has {have}",
                    retryable=False,
                )

    def _image(self) -> None:
        from docker import errors

        image, policy = self.settings.image, self.settings.pull
        present = True
        try:
            self.engine.images.get(image)
        except errors.ImageNotFound:
            present = False
        except errors.DockerException as exc:
            raise AdapterError(f"agent {self.name!r}: cannot look up the image {image!r}: {exc}") from None
        if present and policy != "always":
            return
        if policy == "never":
            raise AdapterError(
                f"agent {self.name!r}: the image {image!r} is not on this engine and pull is 'never'; "
                "build it (docker build -t ...) or load it (docker load) first",
                retryable=False,
            )
        try:
            self.engine.images.pull(image)
        except errors.DockerException as exc:
            if present:  # pull: always, and the registry cannot be reached: the local one stands
                return
            raise AdapterError(
                f"agent {self.name!r}: the image {image!r} is not on this engine and pulling it failed: {exc}",
                retryable=False,
            ) from None

    # --- one run ------------------------------------------------------------------------------

    def argv(self, request: ATPRequest, name: str, network: str | None = None) -> list[str]:
        """The ``docker run`` of one run: the container named ``name``, isolated, limited,
        labelled, with the workspace and the read-only mounts, on ``network`` (by default
        the settings')."""
        s = self.settings
        run_id = str((request.metadata or {}).get("run_id", ""))
        argv = [
            s.docker,
            "run",
            "--interactive",
            "--name",
            name,
            "--label",
            f"{LABEL_OWNER}={_owner(os.getpid())}",
            "--label",
            f"{LABEL_RUN}={run_id}",
            "--label",
            f"{LABEL_AGENT}={self.name}",
            "--network",
            network or s.network,
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--log-driver",
            "none",  # the engine keeps no copy of the streams ATP reads
        ]
        if s.user is not None:
            argv += ["--user", s.user]
        r = s.resources
        if r.memory is not None:
            memory = str(parse_memory(r.memory))
            argv += ["--memory", memory, "--memory-swap", memory]
        if r.cpu is not None:
            argv += ["--cpus", f"{parse_cpu(r.cpu):g}"]
        if r.pids is not None:
            argv += ["--pids-limit", str(r.pids)]
        if s.read_only_rootfs:
            argv += ["--read-only", "--tmpfs", "/tmp:rw,nosuid,nodev"]
        for host, inside in self.mounts:
            argv += ["--mount", _bind(str(host), inside, readonly=True)]
        workspace = self.workspace_of(request)
        if workspace is not None:
            argv += [
                "--mount",
                _bind(str(workspace), str(workspace), readonly=False),
                "--workdir",
                str(workspace),
            ]
        for key in s.env:
            argv += ["--env", key]  # its value comes from the client's environment
        return [*argv, s.image, *self.command]

    def workspace_of(self, request: ATPRequest) -> Path | None:
        """The host folder mounted read-write: the run's workspace (a copy of the test's
        fixture), else the agent's ``workspace`` setting."""
        context = request.context
        if context is not None and context.workspace_path:
            return Path(context.workspace_path)
        return self.workspace

    def artifact_dir(self, request: ATPRequest) -> Path | None:
        return self.workspace_of(request)

    async def execute(self, request: ATPRequest, sink: EventSink) -> ATPResponse:
        if self._aborted:
            raise AdapterError(
                f"agent {self.name!r}: ATP is stopping; no container is started", retryable=False
            )
        name = f"atp-{ledger.new_token()}"
        workspace = self.workspace_of(request)
        if (
            workspace is not None
            and request.context is not None
            and request.context.workspace_path
            and self.settings.user != "0"
        ):
            # the run's own copy of the test's fixture, made by ATP before the container starts
            await anyio.to_thread.run_sync(_open_to_all, workspace)
        sent, network = await self._route_tools(request)
        if network is not None and network == self._own_network:
            for warning in sorted(self._warnings):
                sink.warn(warning)
        self._names.add(name)
        since = time.time_ns() - 50_000_000  # (file times come from a clock that may lag a tick)
        try:
            argv = self.argv(sent, name, network)
            response = await run_process(self, argv, self.base_dir, self.encoded_env, sent, sink)
            if workspace is None:
                return response
            response, warnings = await anyio.to_thread.run_sync(
                with_workspace_files, response, workspace, since, abandon_on_cancel=True
            )
            for warning in warnings:
                sink.warn(warning)
            return response
        except AgentError as exc:
            why = await anyio.to_thread.run_sync(self._ended_how, name, exc, sink.masker)
            if isinstance(why, AdapterError):
                raise why from None
            if why is not None:
                raise AgentError(f"{why}; {exc}") from None
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._remove, name)
            self._names.discard(name)

    async def _route_tools(self, request: ATPRequest) -> tuple[ATPRequest, str | None]:
        """The request the container gets, and its network: when the test declares tools on
        ATP's loopback, their endpoint at the gateway of a network the container is on, where
        a relay carries connections to the tool server."""
        endpoint = request.context.tools_endpoint if request.context is not None else None
        if not endpoint or self.settings.network == "host":
            return request, None
        url = urlsplit(endpoint)
        if url.hostname not in ("127.0.0.1", "localhost", "::1") or url.port is None:
            return request, None
        async with self._route_lock:
            if self._tools_network is None:
                self._tools_network = await anyio.to_thread.run_sync(self._network_for_tools)
            network, gateway = self._tools_network
            target = (url.hostname, url.port)
            if target not in self._relays:
                relay = _Relay(target)
                self._relays[target] = (relay, await relay.start(gateway))
                if self._firewall:  # above the interface's DROP: the relay's port only
                    port = self._relays[target][1]
                    await anyio.to_thread.run_sync(self._filter, self._relay_rule(port, "-I"))
            port = self._relays[target][1]
        if network == self._own_network and not self._firewall:
            self._warnings.add(
                f"the agent's network reaches this host at {gateway}: ATP could not limit it to the "
                "mock tools' relay (it needs root for iptables), so services of this host that listen "
                "on all addresses are reachable too"
            )
        rewritten = urlunsplit(url._replace(netloc=f"{gateway}:{port}"))
        return with_context(request, tools_endpoint=rewritten), network

    def _network_for_tools(self) -> tuple[str, str]:
        """The network containers reach the tool server on, and its gateway address: the
        configured one, or (``network: none``) an internal network of ATP's own."""
        from docker import errors

        name = self.settings.network
        try:
            if name == "none":
                name = f"atp-net-{ledger.new_token()}"
                self.engine.networks.create(
                    name,
                    driver="bridge",
                    internal=True,
                    options={"com.docker.network.bridge.enable_icc": "false"},
                    labels={LABEL_OWNER: _owner(os.getpid()), LABEL_AGENT: self.name},
                )
                self._own_network = name
            attrs = self.engine.api.inspect_network(name)
            if name == self._own_network:
                options = attrs.get("Options") or {}
                self._interface = options.get("com.docker.network.bridge.name") or f"br-{attrs['Id'][:12]}"
                self._firewall = self._filter(["-I", "INPUT", "-i", self._interface, "-j", "DROP"])
        except errors.DockerException as exc:
            raise AdapterError(
                f"agent {self.name!r}: cannot prepare the network {name!r} for the mock tools: {exc}"
            ) from None
        gateways = []
        for config in (attrs.get("IPAM") or {}).get("Config") or []:
            if config.get("Gateway"):
                gateways.append(config["Gateway"])
            elif config.get("Subnet"):  # the engine gives a bridge the first address of its subnet
                with contextlib.suppress(ValueError, StopIteration):
                    gateways.append(str(next(ipaddress.ip_network(config["Subnet"]).hosts())))
        if not gateways:
            raise AdapterError(
                f"agent {self.name!r}: the network {name!r} has no gateway address for the mock tools",
                retryable=False,
            )
        return name, str(gateways[0])

    def _relay_rule(self, port: int, action: str) -> list[str]:
        return [action, "INPUT", "-i", self._interface, "-p", "tcp", "--dport", str(port), "-j", "ACCEPT"]

    @staticmethod
    def _filter(rule: list[str]) -> bool:
        """Apply an iptables rule, when ATP may (as root, with iptables); whether it did."""
        import shutil
        import subprocess

        program = shutil.which("iptables")
        if getattr(os, "geteuid", lambda: -1)() != 0 or program is None:
            return False
        done = subprocess.run([program, "-w", *rule], capture_output=True)
        return done.returncode == 0

    async def aclose(self) -> None:
        """Close the relays to the tool server, take their firewall rules back, and remove
        ATP's own network."""
        for relay, port in self._relays.values():
            await relay.aclose()
            if self._firewall:
                await anyio.to_thread.run_sync(self._filter, self._relay_rule(port, "-D"))
        self._relays.clear()
        if self._firewall:
            await anyio.to_thread.run_sync(self._filter, ["-D", "INPUT", "-i", self._interface, "-j", "DROP"])
            self._firewall = False
        own = self._own_network
        if own is not None and self.engine is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._remove_network, own)

    def _remove_network(self, name: str) -> None:
        try:
            self.engine.api.remove_network(name)
        except Exception:  # the next start, or atp clean, removes it
            pass

    def _ended_how(self, name: str, exc: AgentError, masker: Masker | None) -> str | AdapterError | None:
        """What the engine says of a container that ended without a response (``exc``): it ran
        out of memory (words for the run's failure); or, an infrastructure fault, tried again, it
        could not start (unless the program it was to run is not in the image or may not be run)
        or was never created (the client failed first: the engine refused it). ``masker`` (the
        run's) masks the evidence it quotes."""
        from docker import errors

        try:
            state = self.engine.api.inspect_container(name)["State"]
        except errors.NotFound:
            said = f": {quoted(as_text(exc.evidence), masker=masker)}" if exc.evidence else ""
            return AdapterError(
                f"the container could not be created (the engine has no container {name}); {exc}{said}"
            )
        except Exception:
            return None
        if state.get("OOMKilled"):
            limit = self.settings.resources.memory
            return f"the container ran out of memory (its limit is {limit}) and the engine killed it"
        if state.get("Error"):  # it could not start: a command that is not there, say
            error = str(state["Error"])
            lowered = error.lower()
            return AdapterError(
                f"the container could not start: {error}; {exc}",
                retryable=not any(words in lowered for words in _NO_PROGRAM),
            )
        return None

    def _remove(self, name: str) -> None:
        try:
            self.engine.api.remove_container(name, force=True, v=True)
        except Exception as exc:
            from docker import errors

            if isinstance(exc, errors.NotFound):
                return  # never created (the client failed first), or removed already
            if isinstance(exc, errors.APIError) and exc.status_code == 409:
                return  # being removed already (a second Ctrl-C's abort, atp clean)
            raise AdapterError(f"agent {self.name!r}: cannot remove the container {name}: {exc}") from None

    def abort(self) -> None:
        """Kill the clients at once, and the containers with them (a second Ctrl-C)."""
        self._aborted = True
        AgentProcess.abort_all(owner=self)
        for name in list(self._names):
            try:
                self.engine.api.remove_container(name, force=True, v=True)
            except Exception:  # the run's own removal, or the next start, removes it
                continue

    @classmethod
    def clean_abandoned(cls) -> list[str]:
        """``atp clean``: the containers of ATP processes that no longer run, removed. Without
        the Docker SDK or an engine anywhere (no ``DOCKER_HOST``, no default socket), ATP
        made no container to leave behind."""
        import importlib.util

        if importlib.util.find_spec("docker") is None:
            return []
        if not os.environ.get("DOCKER_HOST") and not os.path.exists("/var/run/docker.sock"):
            return []
        return remove_abandoned(client())


def _bind(source: str, target: str, *, readonly: bool) -> str:
    """A ``--mount`` value binding ``source`` at ``target``: CSV, as the client reads it, so
    that a path with a comma or a quote stays one field."""
    out = io.StringIO()
    fields = ["type=bind", f"source={source}", f"target={target}", *(["readonly"] if readonly else [])]
    csv.writer(out, lineterminator="").writerow(fields)
    return out.getvalue()


def _open_to_all(folder: Path) -> None:
    """Let the container's user (not ATP's) write in the run's workspace: ATP made it for the
    run, so every file and folder in it is made writable by all (walked without recursion)."""
    for path in [folder, *(path for path, _ in walk_entries(folder))]:
        try:
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                continue
            os.chmod(path, mode | (0o777 if stat.S_ISDIR(mode) else 0o666))
        except OSError:
            continue
