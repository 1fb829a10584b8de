"""The agent server the ``agent-interface`` adapter (:mod:`atp.adapters.agent_interface`) starts
itself (``command``): started once for all the runs in its folder with ``PORT`` (and ``{port}``),
its output to a temporary log file, waited for until ``GET /health`` answers, watched for an
exit while the runs go on, and stopped at the end (:class:`ServerKeeper`)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from urllib.parse import urlsplit

import anyio

from atp.adapters.agent_interface_http import DISCOVERY_BYTES, AgentHttp
from atp.adapters.agent_interface_settings import PORT_VARIABLE, AgentInterfaceSettings
from atp.adapters.agent_interface_standard import health_of, json_or_none
from atp.adapters.network import http_failure, quoted, request_errors, shown_url
from atp.adapters.process import encoded, lacks_resources
from atp.adapters.server import (
    PORT_FIELD,
    HealthProbe,
    LogFile,
    NotHealthy,
    Server,
    abort_all,
    check_startable,
    command_line,
    free_port,
    port_in_use,
    resolve_argv,
    with_evidence,
)
from atp.core.adapter import Adapter
from atp.core.errors import AdapterError, AgentError
from atp.core.secrets import Masker

logger = logging.getLogger("atp.adapters.agent_interface")

SERVER = "the agent server"
"""How messages name the server ATP starts."""
HEALTH_INTERVAL = 0.1
"""Seconds between two ``GET /health`` while the server ATP started is not yet ready."""
EXIT_NOTICE_SECONDS = 0.5
"""How long a run that cannot reach the server ATP started waits to see whether it exited."""
TAIL_CHARS = 1000
"""The most of the end of the server's output a start failure quotes."""


class ServerKeeper:
    """The agent server ATP starts for one agent (``command``), while it runs (:attr:`server`).
    ``owner`` (the adapter) is who may kill it at once (:meth:`abort`); ``http`` the agent's
    HTTP exchanges, whose endpoint gets the server's port."""

    def __init__(
        self,
        settings: AgentInterfaceSettings,
        *,
        name: str,
        base_dir: Path,
        http: AgentHttp,
        secrets: Masker,
        owner: Adapter,
    ) -> None:
        self.settings = settings
        self.name = name
        self.http = http
        self.secrets = secrets
        self.owner = owner
        command = settings.command
        self.folder = (base_dir / settings.cwd).resolve() if settings.cwd else base_dir
        """With ``command``: the server's working folder, where relative paths are looked for."""
        self.argv = resolve_argv(command, self.folder) if command is not None else []
        self.command_line = command_line(command) if command is not None else ""
        self.env = {**os.environ, **settings.env}
        """The server's environment (``PORT`` is added at its start)."""
        self.server: Server | None = None
        """The agent server ATP started (``command``), while it runs."""
        self.log: LogFile | None = None
        self.aborted = False

    def abort(self) -> None:
        """SIGKILL the agent server ATP started, and everything it started, at once."""
        self.aborted = True
        abort_all(self.owner)

    def port(self) -> int:
        """``port``; else a free port of the endpoint's host when the endpoint holds ``{port}``;
        else the endpoint's port."""
        settings = self.settings
        if settings.port is not None:
            return settings.port
        parts = urlsplit(settings.endpoint.replace(PORT_FIELD, "1"))
        host = parts.hostname or "127.0.0.1"
        if PORT_FIELD not in settings.endpoint:
            return parts.port or (443 if parts.scheme.lower() == "https" else 80)
        try:
            return free_port(host)
        except OSError as exc:
            raise AdapterError(
                f"agent {self.name!r}: cannot find a free port on {host} for {SERVER} "
                f"({exc.strerror or exc}); give it one with 'port'",
                retryable=False,
            ) from None

    async def start(self) -> None:
        """Start ``command`` in :attr:`folder` with ``PORT`` (and ``{port}``), its output to a
        temporary log file, and wait until ``GET /health`` answers. Raises AdapterError (the
        server stopped) when it cannot start, exits first or does not answer in time."""
        settings = self.settings
        await check_startable(self.argv, self.folder, self.env, agent=self.name, command=self.command_line)
        number = self.port()
        port = str(number)
        self.http.use_endpoint(settings.endpoint.replace(PORT_FIELD, port))
        await self._check_port_free(number)
        argv = [arg.replace(PORT_FIELD, port) for arg in self.argv]
        log = LogFile(self.name, self.secrets, self.owner.masker)
        try:
            server = Server.launch(
                argv,
                cwd=self.folder,
                env=encoded({**self.env, PORT_VARIABLE: port}),
                owner=self.owner,
                ledger=self.owner.processes,
                what=SERVER,
            )
        except OSError as exc:
            log.close()
            raise AdapterError(
                f"agent {self.name!r}: cannot start {self.command_line!r} in {self.folder}: {exc.strerror or exc}",
                retryable=lacks_resources(exc),
            ) from None
        server.log_path = log.path
        self.server, self.log = server, log
        try:
            server.read_output(log.log, self.owner.masker, self.secrets)
            await self._wait_healthy(server, log)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.stop()
            raise

    async def _check_port_free(self, port: int) -> None:
        """Refuse to start the server on a port of the endpoint that another program listens on
        already (a fixed ``port``, or the endpoint's own): discovery and every run would go to
        that program, not to the server ATP starts. A port ATP found free itself is not tested."""
        settings = self.settings
        if settings.port is None and PORT_FIELD in settings.endpoint:
            return  # (a free port, found just now)
        try:
            parts = urlsplit(self.http.endpoint)
            host, endpoint_port = (
                parts.hostname,
                parts.port or (443 if parts.scheme.lower() == "https" else 80),
            )
        except ValueError:
            return
        if not host or endpoint_port != port:
            return  # (the endpoint is elsewhere: a proxy in front of the server, say)
        if await anyio.to_thread.run_sync(port_in_use, host, port):
            raise AdapterError(
                f"agent {self.name!r}: port {port} on {host} (the endpoint's) is in use by another program "
                f"already: ATP would send discovery and the runs to it, not to the server it starts ('command'); "
                f"stop that program, or write {PORT_FIELD} in 'endpoint' and leave 'port' out (a free port)",
                retryable=False,
            )

    async def _wait_healthy(self, server: Server, log: LogFile) -> None:
        """Until ``GET /health`` answers: any answer but a ``503``. A server still answering
        ``503`` with a health report of the standard's at ``health_timeout`` is left to
        discovery, which refuses it as unhealthy saying what it reported."""
        httpx = self.http.httpx
        url = self.http.urls["/health"]
        reported = False
        client = self.http.client()

        async def probe(limit: float) -> HealthProbe:
            nonlocal reported
            try:
                with anyio.fail_after(limit):
                    answer = await self.http.read(client, "GET", url, None, None, DISCOVERY_BYTES)
            except TimeoutError:
                return HealthProbe(False, f"no answer within {limit:g} s")
            except request_errors(httpx) as exc:
                return HealthProbe(
                    False, http_failure(httpx, exc, url, connect_timeout=self.settings.connect_timeout).words
                )
            except AgentError:  # (a redirect, a flood: an answer, which discovery reports)
                return HealthProbe(True)
            if answer.status != 503:
                return HealthProbe(True)
            reported = health_of(json_or_none(answer.body)) is not None
            return HealthProbe(False, f"HTTP {answer.status} {answer.phrase}".rstrip(), answer.body or None)

        try:
            await server.wait_healthy(
                probe,
                url=shown_url(url),
                timeout=self.settings.health_timeout,
                interval=HEALTH_INTERVAL,
                request_timeout=self.settings.discovery_timeout,
            )
        except NotHealthy as exc:
            if reported:
                return
            log.keep = True
            raise AdapterError(
                f"agent {self.name!r}: {with_evidence(exc, secrets=self.secrets, masker=self.owner.masker)}"
                f"{self._log_end(server, log)}"
            ) from None
        except AgentError as exc:  # it exited
            log.keep = True
            raise AdapterError(
                f"agent {self.name!r}: {with_evidence(exc, TAIL_CHARS, self.secrets, masker=self.owner.masker)}"
            ) from None
        finally:
            with anyio.CancelScope(shield=True):
                await client.aclose()

    def _log_end(self, server: Server, log: LogFile) -> str:
        tail = server.output.log_tail() if server.output is not None else None
        if tail is None:
            return f"; its log ({log.path}) is empty"
        said = quoted(tail, TAIL_CHARS, masker=self.owner.masker, secrets=self.secrets)
        return f"; its log ({log.path}) ends with: {said}"

    async def stop(self) -> None:
        """Stop the agent server ATP started (SIGTERM, SIGKILL after ``stop_grace``); remove its
        log unless an error named it."""
        server, self.server = self.server, None
        log, self.log = self.log, None
        if server is None:
            return
        with anyio.CancelScope(shield=True):
            try:
                await server.stop(self.settings.stop_grace, self._warn, aborted=lambda: self.aborted)
            finally:
                if log is not None:
                    log.close()

    def _warn(self, message: str) -> None:
        logger.warning("agent %r: %s", self.name, message)

    async def exited(self, *, wait: bool) -> AgentError | None:
        """The agent server ATP started has exited: the error saying so (``wait``: give it
        :data:`EXIT_NOTICE_SECONDS` to be seen exiting, after a request it did not answer)."""
        server = self.server
        if server is None or server.output is None:
            return None
        if wait:
            with anyio.move_on_after(EXIT_NOTICE_SECONDS):
                await server.output.ended.wait()
        failed = server.exited("while ATP ran the tests")
        if failed is not None and self.log is not None:
            self.log.keep = True
        return failed
