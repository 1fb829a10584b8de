"""The run of ``atp validate``'s checks of one agent, in order, through its adapter: each result
reported as soon as it is decided, the adapter closed at the end, Ctrl-C and SIGTERM heeded."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from atp.core.validation.checks import events_check, probe_check, refusal_check
from atp.core.validation.conformance import conformance_checks
from atp.core.validation.context import CheckContext
from atp.core.validation.exceptions import described, single_exception
from atp.core.validation.probe import (
    MALFORMED_WHAT,
    PROBE_DESCRIPTION,
    Answer,
    Around,
    ProbeTask,
    make_request,
    send,
)
from atp.core.validation.reachable import Reached, check_reachable, refused_settings
from atp.core.validation.results import CHECKS, CheckResult, ValidationOutcome

if TYPE_CHECKING:
    import anyio

    from atp.core.adapter import Adapter
    from atp.core.protocol import ATPRequest
    from atp.core.secrets import Masker

__all__ = ["CLOSE_SECONDS", "Validation", "run_validation"]

CLOSE_SECONDS = 10.0
"""How long closing the adapter may take at the end (its agents are then stopped at once)."""


class Validation:
    """The checks of one agent, run in order through its adapter. ``report`` is given each
    result as soon as it is decided; ``say`` a warning line (standard error by default);
    ``tracebacks``: whether an adapter's bug is shown with its traceback; ``probe``: what the
    probe asks (the generic greeting by default)."""

    def __init__(
        self,
        make_adapter: Callable[[], Adapter],
        agent_type: str,
        *,
        timeout: float,
        masker: Masker,
        report: Callable[[CheckResult], None],
        say: Callable[[str], None] | None = None,
        tracebacks: bool = False,
        probe: ProbeTask | None = None,
    ) -> None:
        self.make_adapter = make_adapter
        self.probe = probe or ProbeTask()
        self.agent_type = agent_type
        self.adapter: Adapter | None = None
        """Made by the first check (its settings may still be refused then)."""
        self.timeout = timeout
        self.masker = masker
        self.report = report
        self.context = CheckContext(
            agent_type, timeout=timeout, masker=masker, say=say, tracebacks=tracebacks
        )
        self.results: list[CheckResult] = []
        self.stopped_by: int | None = None
        """The signal that stopped the checks (SIGINT, SIGTERM), if one did."""
        self.extra = 0
        """How many checks the adapter added (its conformance checks)."""
        self.foreign_skips = 0
        """How many of ATP's checks were skipped because the agent speaks another protocol."""

    @property
    def expected(self) -> int:
        """How many checks there are: ATP's and the adapter's."""
        return len(CHECKS) + self.extra

    def outcome(self) -> ValidationOutcome:
        """The checks as they ended (or as far as they got)."""
        foreign = getattr(self.adapter, "foreign_protocol", None) if self.foreign_skips else None
        return ValidationOutcome(
            results=list(self.results), expected=self.expected, stopped_by=self.stopped_by, foreign=foreign
        )

    # --- running ----------------------------------------------------------------------------

    async def run(self) -> list[CheckResult]:
        """Every check (until one makes the rest meaningless); the adapter is closed at the end,
        also when Ctrl-C or SIGTERM stops the checks (a second one stops its agents at once)."""
        import anyio

        from atp.core.signals import watch_signals

        async with anyio.create_task_group() as group:
            checks = anyio.CancelScope()
            group.start_soon(watch_signals, lambda signum: self._stop(signum, checks), self._abort)
            try:
                with checks:
                    await self._checks()
            finally:
                with anyio.CancelScope(shield=True):
                    await self._close()
                group.cancel_scope.cancel()
        return self.results

    def _stop(self, signum: int, checks: anyio.CancelScope) -> None:
        """The first Ctrl-C or SIGTERM: the checks stop (the adapter is still closed)."""
        self.stopped_by = signum
        checks.cancel()

    def _abort(self, signum: int) -> None:
        """A later one: the adapter's agents are stopped at once."""
        if self.adapter is not None:
            self.adapter.abort()

    async def _close(self) -> None:
        """Close the adapter (its agents are stopped); one that takes more than
        :data:`CLOSE_SECONDS` has its agents stopped at once."""
        import anyio

        adapter = self.adapter
        if adapter is None:
            return
        with anyio.move_on_after(CLOSE_SECONDS) as closing:
            try:
                await adapter.aclose()
            except Exception as raised:
                exc = single_exception(raised)
                self.context.debug(exc)
                self.context.say(
                    self.context.shown(f"atp: warning: closing the adapter failed: {described(exc)}")
                )
        if closing.cancelled_caught:
            adapter.abort()

    def _add(self, result: CheckResult) -> None:
        self.results.append(result)
        self.report(result)

    def _skip(self, names: Sequence[str], reason: str) -> None:
        for name in names:
            self._add(CheckResult(name, CHECKS[name], "skipped", reason))

    async def _checks(self) -> None:
        from atp.core.errors import AdapterError

        reached = await self._reachable()
        if reached != "no":
            assert self.adapter is not None
            for result in await conformance_checks(self.adapter, self.context):
                self.extra += 1
                self._add(result)
        if reached != "yes":
            reason = "the agent is not healthy" if reached == "unhealthy" else "the agent is not reachable"
            self._skip(("probe", "events", "malformed", "version"), reason)
            return
        assert self.adapter is not None
        with self.probe.workspace(self.adapter.folder_per_run) as workspace:
            probe = await self._send(self.probe.request(self.timeout, workspace), around=self.probe.served)
        self._add(probe_check(probe, self.context))
        if isinstance(probe.error, AdapterError):
            self._skip(("events", "malformed", "version"), "the probe could not be delivered")
            return
        self._add(events_check(probe, self.context))
        if probe.timed_out:
            self._skip(
                ("malformed", "version"), f"the agent did not answer the probe within {self.timeout:g} s"
            )
            return
        assert self.adapter is not None
        foreign = getattr(self.adapter, "foreign_protocol", None)
        if foreign:
            self._skip(
                ("malformed", "version"),
                f"the agent speaks {foreign}, not ATP: the adapter translates each request, so a raw "
                "ATP request means nothing to it",
            )
            self.foreign_skips = 2
            return
        malformed = make_request("", self.timeout, max_steps=0)
        self._add(refusal_check("malformed", await self._send(malformed), MALFORMED_WHAT, self.context))
        major_2 = make_request(PROBE_DESCRIPTION, self.timeout, version="2.0")
        self._add(
            refusal_check(
                "version", await self._send(major_2), "a request of protocol version 2.0", self.context
            )
        )

    async def _reachable(self) -> Reached:
        """Make the adapter (kept for closing it at the end) and check that the agent is reachable."""
        started = time.perf_counter()
        try:
            adapter = self.adapter = self.make_adapter()
        except Exception as raised:
            exc = single_exception(raised)
            self.context.debug(exc)
            self._add(refused_settings(exc, self.context))
            return "no"
        reached, result = await check_reachable(adapter, self.context, started)
        self._add(result)
        return reached

    async def _send(self, request: ATPRequest, around: Around | None = None) -> Answer:
        adapter = self.adapter
        assert adapter is not None, "the reachable check makes it"
        return await send(adapter, request, self.context, around)


def run_validation(
    make_adapter: Callable[[], Adapter],
    agent_type: str,
    *,
    timeout: float,
    masker: Masker,
    report: Callable[[CheckResult], None],
    say: Callable[[str], None] | None = None,
    tracebacks: bool = False,
    probe: ProbeTask | None = None,
) -> ValidationOutcome:
    """Validate one agent (its adapter made by ``make_adapter``): every check, each given to
    ``report`` as soon as it is decided, with the agent's text masked by ``masker``; the probe
    asks what ``probe`` says (the generic greeting by default). Ctrl-C stops the checks (the
    agent is stopped first): the outcome then says so."""
    import anyio

    from atp.core.text import masking

    validation = Validation(
        make_adapter,
        agent_type,
        timeout=timeout,
        masker=masker,
        report=report,
        say=say,
        tracebacks=tracebacks,
        probe=probe,
    )
    with masking(masker):
        try:
            anyio.run(validation.run)
        except KeyboardInterrupt:  # Ctrl-C before the checks listened for it
            validation.stopped_by = validation.stopped_by or signal.SIGINT
    return validation.outcome()
