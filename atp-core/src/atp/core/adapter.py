"""The adapter interface: how ATP speaks to one kind of agent.

An adapter is registered under the ``type`` that agent definitions name (``type: cli``). ATP
makes one adapter per agent for a whole ``atp test``, calls :meth:`Adapter.open` once (which
hands it the run's secrets and process ledger and calls :meth:`Adapter.start`), then
:meth:`Adapter.execute` for every run (concurrently when ``--parallel`` allows), and
:meth:`Adapter.aclose` at the end.

The runner enforces the time limit by cancelling :meth:`Adapter.execute`; an adapter stops its
agent in a ``finally`` block. An agent that misbehaves (crashes, prints garbage, breaks the
protocol) is reported by raising :class:`~atp.core.errors.AgentError`; an agent that cannot be
reached or started at all, by :class:`~atp.core.errors.AdapterError`.

Three optional hooks let ``atp validate`` and ``atp list-agents --check`` say more than "it
answers" about any agent, whatever its type (:meth:`Adapter.health`, :meth:`Adapter.conformance`
and :attr:`Adapter.foreign_protocol`); an adapter that defines none of them is checked as before.
"""

import builtins
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

import msgspec

from atp.core.errors import AdapterError
from atp.core.ledger import ProcessLedger
from atp.core.protocol import ATPRequest, ATPResponse
from atp.core.secrets import Masker
from atp.core.trace import EventSink


class NoSettings(msgspec.Struct, forbid_unknown_fields=True):
    """For adapters that take no settings."""


HealthStatus = Literal["healthy", "degraded", "unhealthy", "unreachable", "unknown"]
"""What :attr:`Health.status` may say (see :class:`Health`)."""
USABLE_HEALTH: frozenset[str] = frozenset({"healthy", "degraded", "unknown"})
"""The statuses of an agent that can be tested: ``degraded`` and ``unknown`` with a note."""


class Health(msgspec.Struct, frozen=True, kw_only=True):
    """What an agent says of its health (:meth:`Adapter.health`).

    ``status``: ``healthy``; ``degraded`` (it works, with trouble: a high error rate, say);
    ``unhealthy`` (it answers but says it cannot work, or its health check fails);
    ``unreachable`` (nothing answers); ``unknown`` (it answers, but its health cannot be read).
    ``detail``: one line of what it reported (an error rate, its last error), or empty."""

    status: HealthStatus
    detail: str = ""

    @property
    def usable(self) -> bool:
        """Whether runs can be sent to the agent (healthy, degraded or unknown)."""
        return self.status in USABLE_HEALTH


class ConformanceCheck(msgspec.Struct, frozen=True, kw_only=True):
    """One check of an agent against its protocol beyond ATP's own (:meth:`Adapter.conformance`):
    ``atp validate`` shows it like its own checks. ``name`` is short and stable (``agent-card``;
    ``--json`` shows it), ``title`` a few words for the line (``agent card schema``),
    ``message`` what was found; for a failure ``seen`` (what the agent sent that shows it, not
    cut: ATP masks and shortens it) and ``fix``; ``notes`` for what passed but could be better."""

    name: str
    title: str
    passed: bool
    message: str
    seen: tuple[str, ...] = ()
    fix: str | None = None
    notes: tuple[str, ...] = ()


class AgentUnhealthy(AdapterError):
    """Raised by :meth:`Adapter.start` when the agent answers but reports itself unhealthy, and
    the agent's settings do not ask for it to be tested anyway: ``health`` is its report, so that
    ``atp validate`` and ``atp list-agents --check`` show the status rather than "cannot start"."""

    def __init__(self, message: str, *, health: Health) -> None:
        super().__init__(message)
        self.health = health


class Adapter(ABC):
    """Drives agents of one ``type``: subclass it, set :attr:`type` (and :attr:`Settings`),
    implement :meth:`execute`, and register the class through ``atp_register_adapters``.

    ATP makes it with ``settings`` (an instance of :attr:`Settings`, validated from the agent's
    definition), ``name`` (the agent's name, for messages) and ``base_dir``; see the module for
    when each method is called and what to raise. Its coroutines and :meth:`abort` run on the
    runner's event loop and must not block it (``anyio.to_thread.run_sync`` for a blocking
    SDK); :meth:`execute` runs concurrently with itself when ``--parallel`` allows."""

    type: ClassVar[str]
    """The agent ``type`` this adapter serves."""
    summary: ClassVar[str] = ""
    """One line for ``atp plugins``."""
    replaces: ClassVar[str | None] = None
    """The name of a plugin whose registration of the same agent type this class replaces on
    purpose. Without it, two plugins registering one agent type is an error naming both."""
    Settings: ClassVar[builtins.type[msgspec.Struct]] = NoSettings
    """The agent settings this adapter accepts (unknown keys are errors)."""
    foreign_protocol: ClassVar[str | None] = None
    """The protocol the agent speaks when it is not ATP (``"Agent Interface Standard v1.0"``):
    the adapter translates each ATP Request into it. Checks that send raw ATP requests to see the
    agent refuse them (``atp validate``'s ``malformed`` and ``version``) mean nothing then, and
    are skipped with this as the reason. ``None``: the agent is given ATP Requests as they are."""
    folder_per_run: bool = False
    """Whether every run gets a fresh, empty folder of its own even when its test has no
    ``workspace_fixture``: ATP makes it below the run directory (as it makes the copy of a
    fixture) and sends it as ``context.workspace_path``; relative artifact paths resolve in it.
    Adapters that run agents as local processes (``cli``, ``container``) set it from their
    ``working_folder`` setting; the folder is kept or removed after the run as docs/suites.md
    says."""

    @classmethod
    def secret_values(cls, settings: Any) -> list[str]:
        """Values in ``settings`` that ATP must mask in everything it writes, whatever their
        source (an ``Authorization`` header written out in the suite, say). Values interpolated
        from secret-looking environment variables (``${API_TOKEN}``) are masked anyway."""
        return []

    @classmethod
    def request_environment(cls, settings: Any) -> Mapping[str, str]:
        """The plain values of ``settings`` sent in ``context.environment`` of every request
        (an ``env`` setting), beside the secrets the agent's definition names (``secrets:``,
        which ATP adds for every adapter: :mod:`atp.core.agentenv`). An adapter whose ``env``
        is the environment of a process it starts, not something it sends, returns none."""
        return {}

    def __init__(self, settings: Any, *, name: str, base_dir: Path) -> None:
        self.settings = settings
        self.name = name
        self.base_dir = Path(os.path.abspath(base_dir))
        """The folder of the file that defines the agent, absolute (relative settings are
        relative to it, whatever ATP's working folder is)."""
        self.masker: Masker | None = None
        """The secrets of the suite being run (given by :meth:`open`): what the adapter words
        itself outside a run (a server's log, a warning at start) is masked with it. Within a
        run, the sink's :attr:`~atp.core.trace.EventSink.masker` is the same."""
        self.processes: ProcessLedger | None = None
        """The run's process ledger (given by :meth:`open`; ``None`` outside ``atp test``): an
        adapter that starts processes records each in it (see :mod:`atp.core.ledger`)."""

    async def open(self, *, masker: Masker | None = None, processes: ProcessLedger | None = None) -> None:
        """What ATP calls once before the first run: keep the run's ``masker`` and process
        ledger (``processes``) in :attr:`masker` and :attr:`processes`, then :meth:`start`.
        Adapters override :meth:`start`, not this."""
        self.masker = masker
        self.processes = processes
        await self.start()

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Prepare once before the first run (open clients, build images); :attr:`masker` and
        :attr:`processes` are set when it is called."""

    @abstractmethod
    async def execute(self, request: ATPRequest, sink: EventSink) -> ATPResponse:
        """Run one task: deliver events to ``sink`` as they come, return the agent's response."""

    def artifact_dir(self, request: ATPRequest) -> Path | None:
        """The folder the agent's relative artifact paths are relative to (its working
        folder), or ``None`` when they mean nothing on ATP's machine. Evaluators resolve
        relative paths against it when the request names no workspace."""
        return None

    def abort(self) -> None:  # noqa: B027 - optional hook
        """Stop every agent this adapter runs at once, without a grace period (a second Ctrl-C
        or SIGTERM). Synchronous and quick; the :meth:`execute` calls in flight then end."""

    async def health_check(self) -> bool:
        """Whether the agent can be reached."""
        return True

    async def health(self) -> Health:
        """The agent's health, for ``atp validate`` and ``atp list-agents --check``, which call
        it after :meth:`start`. An adapter whose agent reports more than "it answers" (a status,
        an error rate), or that can tell an agent it cannot reach (``unreachable``, with why) from
        one that answers but fails its check (``unhealthy``, with what failed), overrides it. By
        default it is :meth:`health_check`, without a detail: ``healthy``, or ``unhealthy`` when
        the check says no (which may mean either); ``atp validate`` words that as it always has
        ("the agent's health check says it is not healthy": start the agent). May raise
        :class:`~atp.core.errors.AdapterError` (the agent is then shown as unreachable, with the
        message)."""
        if await self.health_check():
            return Health(status="healthy")
        return Health(status="unhealthy")

    async def conformance(self) -> list[ConformanceCheck]:
        """Checks of the agent's own protocol (its discovery endpoints against their schemas,
        say) that ``atp validate`` runs after :meth:`start` (also after a start that raised
        :class:`AgentUnhealthy`: the agent answers) and reports like its own, all of them within
        the validation's time limit. None by default. A check that cannot be made (the agent
        does not answer) is a failed check, not an exception."""
        return []

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release what :meth:`start` acquired."""

    @classmethod
    def clean_abandoned(cls) -> list[str]:
        """Remove what agents of this type left behind when an ATP process was killed before
        it could (containers, say), for ``atp clean``; a line per thing removed. An adapter
        that leaves nothing behind has nothing to do."""
        return []
