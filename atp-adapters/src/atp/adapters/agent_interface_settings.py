"""The settings of the ``agent-interface`` adapter (:mod:`atp.adapters.agent_interface`): the
network settings every network agent has (:class:`~atp.adapters.network.NetworkSettings`), the
A2A message ATP sends, discovery, and the agent server ATP may start itself (``command``), each
checked when the suite loads."""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from atp.adapters.network import NetworkSettings
from atp.adapters.server import (
    MAX_SECONDS,
    PORT_FIELD,
    Grace,
    Port,
    Seconds,
    check_command,
    check_cwd,
    check_env,
    check_grace,
    check_seconds,
    check_whole,
)

DEFAULT_ACTION = "execute_task"
DEFAULT_DISCOVERY_TIMEOUT = 10.0
MAX_DISCOVERY_TIMEOUT = MAX_SECONDS
PORT_VARIABLE = "PORT"
"""The variable that gives the agent server ATP starts (``command``) its port."""


class AgentInterfaceSettings(NetworkSettings, kw_only=True):
    schemes: ClassVar[tuple[str, ...]] = ("http", "https")
    reserved_headers: ClassVar[frozenset[str]] = frozenset(
        {"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer"}
    )

    action: str = DEFAULT_ACTION
    """The A2A ``action`` of every task (a test's ``input_data.a2a_action`` overrides it)."""
    from_agent: str = "atp"
    """The ``from_agent`` of every message."""
    to_agent: str | None = None
    """The ``to_agent`` of every message; by default the ``agent_id`` of ``GET /agent-card``."""
    payload_key: str | None = "task"
    """The payload member that holds ``task.description``; ``null``: the description is not sent."""
    input_key: str | None = None
    """``null``: the members of ``task.input_data`` are merged into the payload; a name: the
    input data is sent as that payload member (when there is any)."""
    payload: dict[str, Any] = msgspec.field(default_factory=dict)
    """Members every payload starts with (the task's own win)."""
    allow_unhealthy: bool = False
    """Test an agent whose ``/health`` says ``unhealthy`` (with a warning) instead of refusing."""
    discovery_timeout: float = DEFAULT_DISCOVERY_TIMEOUT
    """Seconds each discovery or check request (``/health``, ``/agent-card``, ``/mcp/tools``)
    may take; a run's own time limit governs the rest."""
    command: str | list[str] | None = None
    """A command that starts the agent server: ATP starts it once when the adapter starts
    (before discovery) and stops it at the end. ``{port}`` in its words is the port. Relative
    paths are made absolute as for ``term-sdk`` (relative to ``cwd``, or the agent's folder)."""
    port: Port | None = None
    """With ``command``: the port the server listens on (``PORT`` in its environment, and
    ``{port}`` in the command and the endpoint). Default: a free loopback port when
    ``endpoint`` holds ``{port}``, else the endpoint's port."""
    env: dict[str, str] = msgspec.field(default_factory=dict)
    """With ``command``: added to ATP's environment for the server. Not sent in messages (the
    agent's ``secrets:`` are)."""
    ENV_IN_REQUESTS: ClassVar[bool] = False
    cwd: str | None = None
    """With ``command``: the server's working folder, relative to the file defining the agent
    (default: that file's folder)."""
    health_timeout: Seconds = 15.0
    """With ``command``: seconds the server has to answer ``GET /health`` once started."""
    stop_grace: Grace = 2.0
    """With ``command``: seconds between SIGTERM and SIGKILL when the server is stopped."""

    def __post_init__(self) -> None:
        endpoint = self.endpoint
        if PORT_FIELD in endpoint:
            if self.command is None:
                raise ValueError(
                    "'endpoint' holds {port}, the port of the agent server ATP starts, but there is no "
                    "'command' to start one"
                )
            self.endpoint = endpoint.replace(PORT_FIELD, "1")  # (any port: the rest of the URL is checked)
            try:
                super().__post_init__()
            finally:
                self.endpoint = endpoint
        else:
            super().__post_init__()
        if self.command is None:
            for name in ("port", "cwd"):
                if getattr(self, name) is not None:
                    raise ValueError(f"'{name}' is for the agent server ATP starts: it needs 'command'")
            if self.env:
                raise ValueError("'env' is for the agent server ATP starts: it needs 'command'")
        else:
            check_command(self.command)
            check_cwd(self.cwd)
            check_env(self.env, PORT_VARIABLE)
            if self.port is not None:
                check_whole("port", self.port, 1, 65535)
            check_seconds("health_timeout", self.health_timeout)
            check_grace(self.stop_grace)
        for name in ("action", "from_agent"):
            if not getattr(self, name):
                raise ValueError(f"'{name}' is empty")
        for name in ("to_agent", "payload_key", "input_key"):
            if getattr(self, name) == "":
                raise ValueError(f"'{name}' is empty (leave it out, or null)")
        if self.input_key is not None and self.input_key == self.payload_key:
            raise ValueError("'input_key' and 'payload_key' name the same payload member")
        check_seconds("discovery_timeout", self.discovery_timeout)
