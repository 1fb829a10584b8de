"""The settings of the ``term-sdk`` adapter (:mod:`atp.adapters.term_sdk`): the agent's command
and where it listens, its environment and folder, and the timings of ATP's exchange with it,
each checked when the suite loads."""

from __future__ import annotations

from typing import Annotated

import msgspec

from atp.adapters.server import (
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

AGENT_PORT = "AGENT_PORT"
"""The variable that gives the agent its port."""


class TermSdkSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    command: str | list[str]
    """The agent's command; a relative program or argument naming a file next to the file
    defining the agent is made absolute (the agent runs in a folder of its own)."""
    port: Port | None = None
    """The port the agent listens on (``AGENT_PORT``); a free loopback port per run when not
    given. A fixed port makes runs take turns."""
    host: Annotated[str, msgspec.Meta(min_length=1)] = "127.0.0.1"
    """Where ATP reaches the agent."""
    env: dict[str, str] = msgspec.field(default_factory=dict)
    """Added to ATP's environment for the agent."""
    cwd: str | None = None
    """A working folder shared by every run without a workspace (runs then take turns);
    relative to the file defining the agent. Without it, each run gets a temporary folder."""
    health_timeout: Seconds = 15.0
    health_interval: Seconds = 0.1
    poll_interval: Seconds = 0.5
    request_timeout: Seconds = 10.0
    max_poll_errors: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 5
    max_steps: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 200
    """``max_steps`` sent to the agent when the test's constraints give none."""
    stop_grace: Grace = 2.0
    """Seconds between SIGTERM and SIGKILL when the agent is stopped."""

    def __post_init__(self) -> None:
        check_command(self.command)
        check_cwd(self.cwd)
        if self.port is not None:
            check_whole("port", self.port, 1, 65535)
        host = self.host
        if not host or any(c in host for c in "/\\@?#[] \t\r\n\0"):
            raise ValueError(
                f"'host' {host!r} is not a host name or an IP address (write IPv6 without brackets)"
            )
        check_env(self.env, AGENT_PORT)
        for name in ("health_timeout", "health_interval", "poll_interval", "request_timeout"):
            check_seconds(name, getattr(self, name))
        check_grace(self.stop_grace)
        check_whole("max_poll_errors", self.max_poll_errors, 1, 1000)
        check_whole("max_steps", self.max_steps, 1, 1_000_000)
