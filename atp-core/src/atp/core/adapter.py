"""The adapter interface: how ATP speaks to one kind of agent.

An adapter is registered under the ``type`` that agent definitions name (``type: cli``). ATP
makes one adapter per agent for a whole ``atp test``, calls :meth:`Adapter.start` once, then
:meth:`Adapter.execute` for every run (concurrently when ``--parallel`` allows), and
:meth:`Adapter.aclose` at the end.

The runner enforces the time limit by cancelling :meth:`Adapter.execute`; an adapter stops its
agent in a ``finally`` block. An agent that misbehaves (crashes, prints garbage, breaks the
protocol) is reported by raising :class:`~atp.core.errors.AgentError`; an agent that cannot be
reached or started at all, by :class:`~atp.core.errors.AdapterError`.
"""

import builtins
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

import msgspec

from atp.core.protocol import ATPRequest, ATPResponse
from atp.core.trace import EventSink


class NoSettings(msgspec.Struct, forbid_unknown_fields=True):
    """For adapters that take no settings."""


class Adapter(ABC):
    type: ClassVar[str]
    """The agent ``type`` this adapter serves."""
    summary: ClassVar[str] = ""
    """One line for ``atp plugins``."""
    replaces: ClassVar[str | None] = None
    """The name of a plugin whose registration of the same agent type this class replaces on
    purpose. Without it, two plugins registering one agent type is an error naming both."""
    Settings: ClassVar[builtins.type[msgspec.Struct]] = NoSettings
    """The agent settings this adapter accepts (unknown keys are errors)."""

    @classmethod
    def secret_values(cls, settings: Any) -> list[str]:
        """Values in ``settings`` that ATP must mask in everything it writes, whatever their
        source (an ``Authorization`` header written out in the suite, say). Values interpolated
        from secret-looking environment variables (``${API_TOKEN}``) are masked anyway."""
        return []

    def __init__(self, settings: Any, *, name: str, base_dir: Path) -> None:
        self.settings = settings
        self.name = name
        self.base_dir = Path(os.path.abspath(base_dir))
        """The folder of the file that defines the agent, absolute (relative settings are
        relative to it, whatever ATP's working folder is)."""

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Prepare once before the first run (open clients, build images)."""

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

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release what :meth:`start` acquired."""

    @classmethod
    def clean_abandoned(cls) -> list[str]:
        """Remove what agents of this type left behind when an ATP process was killed before
        it could (containers, say), for ``atp clean``; a line per thing removed. An adapter
        that leaves nothing behind has nothing to do."""
        return []
