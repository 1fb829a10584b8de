"""``atp validate``: check that an agent speaks ATP before anyone writes tests for it.

Five checks run in order, each through the agent's adapter (so they work for every agent type):

1. ``reachable``: the adapter starts and the agent's health check passes;
2. ``probe``: a small valid request is answered with a response that decodes, has status
   ``completed`` and carries the request's ``task_id``;
3. ``events``: the events sent during that probe are valid, carry the request's ``task_id``,
   come with strictly increasing sequence numbers, and the adapter warned about nothing;
4. ``malformed``: a request that breaks the schema is refused gracefully: a response with status
   ``failed`` (ideally ``error_code: INVALID_REQUEST``) or a refusal of the transport;
5. ``version``: a request of protocol version 2.0 is refused the same way.

Adapters add to them through the kernel's seam (:mod:`atp.core.adapter`): ``reachable`` shows
the agent's own health status (:meth:`~atp.core.adapter.Adapter.health`: ``degraded`` passes
with a note, ``unhealthy`` fails); the adapter's conformance checks of its protocol
(:meth:`~atp.core.adapter.Adapter.conformance`) run right after it, shown like these; and for an
agent that speaks another protocol than ATP (:attr:`~atp.core.adapter.Adapter.foreign_protocol`)
``malformed`` and ``version``, which send raw ATP requests, are skipped with the reason.

A check that an earlier failure makes meaningless is skipped. Each failure says what was seen
and what fixes it. Agent text shown is masked (the config's secrets), shortened and escaped.
Exit code 0 when every check passed, 1 when one failed, 2 for a usage or config error, 130
when interrupted (the agent is stopped first).
"""

from __future__ import annotations

import math
import os
import re
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from atp.cli.app import config_option, debug_option, plugins_for

if TYPE_CHECKING:
    from atp.core.adapter import Adapter
    from atp.core.protocol import ATPRequest, ATPResponse, Event
    from atp.core.secrets import Masker

DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 3600.0
CLOSE_SECONDS = 10.0
"""How long closing the adapter may take at the end (its agents are then stopped at once)."""
PROBE_DESCRIPTION = "Reply with a short greeting. (A probe from atp validate: nothing else needs doing.)"
MAX_WARNINGS = 20
MAX_DISORDER = 3
"""How many places where sequence numbers do not increase are named."""
LOG_TAIL_LINES = 5
SEEN_CHARS = 300
"""How much of what an agent sent one line of the report quotes."""
TASK_ID_CHARS = 100

OUTCOMES = ("passed", "failed", "skipped")
_NOTHING = object()
LABELS = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}
COLORS = {"passed": "green", "failed": "red", "skipped": "yellow"}


class CheckResult:
    """The outcome of one check: a summary, and for a failure what was seen and the fix."""

    def __init__(
        self,
        name: str,
        title: str,
        outcome: str,
        summary: str,
        *,
        seen: Sequence[str] = (),
        fix: str | None = None,
        notes: Sequence[str] = (),
        seconds: float | None = None,
    ) -> None:
        self.name = name
        self.title = title
        self.outcome = outcome
        self.summary = summary
        self.seen = list(seen)
        self.fix = fix
        self.notes = list(notes)
        self.seconds = seconds

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "title": self.title,
            "outcome": self.outcome,
            "summary": self.summary,
        }
        if self.seen:
            data["seen"] = self.seen
        if self.fix:
            data["fix"] = self.fix
        if self.notes:
            data["notes"] = self.notes
        if self.seconds is not None:
            data["seconds"] = round(self.seconds, 3)
        return data


CHECKS = {
    "reachable": "reachable",
    "probe": "answers a probe",
    "events": "events",
    "malformed": "refuses a malformed request",
    "version": "refuses major version 2",
}
"""The checks, by name, with the title each is shown with, in the order they run."""


class ProbeSink:
    """The :class:`~atp.core.trace.EventSink` of one probe: what the agent sent, in memory and
    bounded (counts, the first problems, the last log lines), never the events themselves."""

    def __init__(self, task_id: str, masker: Masker) -> None:
        self.task_id = task_id
        self.masker = masker
        self.events_seen = 0
        """Events with the request's task_id."""
        self.first_sequence: int | None = None
        self.last_sequence: int | None = None
        self.disorder: list[str] = []
        self.disorder_count = 0
        self.foreign: dict[str, int] = {}
        """Events with another task_id: how many, by task_id (the first few task_ids)."""
        self.foreign_count = 0
        self.warnings: list[str] = []
        self.warning_count = 0
        self.log_tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)

    def event(self, event: Event, raw: bytes | None = None) -> None:
        self.events((event,))

    def events(self, events: Sequence[Event], raw: bytes | None = None) -> None:
        for event in events:
            if event.task_id != self.task_id:
                self.foreign_count += 1
                other = self._kept(event.task_id, TASK_ID_CHARS)
                if other in self.foreign or len(self.foreign) < MAX_DISORDER:
                    self.foreign[other] = self.foreign.get(other, 0) + 1
                continue
            self.events_seen += 1
            sequence = event.sequence
            last = self.last_sequence
            if last is not None and sequence <= last:
                self.disorder_count += 1
                if len(self.disorder) < MAX_DISORDER:
                    kind = getattr(event, "event_type", "?")
                    self.disorder.append(
                        f"event {self.events_seen} ({kind}) has sequence {sequence}, after {last}"
                    )
            if self.first_sequence is None:
                self.first_sequence = sequence
            self.last_sequence = sequence

    def log(self, line: str) -> None:
        if line.strip():
            self.log_tail.append(self._kept(line))

    def warn(self, message: str) -> None:
        self.warning_count += 1
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(self._kept(message))

    def _kept(self, text: str, limit: int = SEEN_CHARS) -> str:
        """Agent text as it is kept: secrets masked first, then cut (a cut never splits one)."""
        from atp.core.text import shorten

        return shorten(self.masker.text(text), limit)


class Answer:
    """What one probe got: a response, or the exception that ended it, or nothing in time."""

    def __init__(self, request: ATPRequest, sink: ProbeSink) -> None:
        self.request = request
        self.sink = sink
        self.response: ATPResponse | None = None
        self.error: BaseException | None = None
        self.timed_out = False
        self.seconds = 0.0


class Validation:
    """The checks of one agent, run in order through its adapter."""

    def __init__(
        self,
        make_adapter: Callable[[], Adapter],
        agent_type: str,
        *,
        timeout: float,
        masker: Masker,
        report: Callable[[CheckResult], None],
    ) -> None:
        self.make_adapter = make_adapter
        self.agent_type = agent_type
        self.adapter: Adapter | None = None
        """Made by the first check (its settings may still be refused then)."""
        self.timeout = timeout
        self.masker = masker
        self.report = report
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

    # --- running ----------------------------------------------------------------------------

    async def run(self) -> list[CheckResult]:
        """Every check (until one makes the rest meaningless); the adapter is closed at the end,
        also when Ctrl-C or SIGTERM stops the checks (a second one stops its agents at once)."""
        import anyio

        async with anyio.create_task_group() as group:
            checks = anyio.CancelScope()
            if _in_main_thread():
                group.start_soon(self._watch_signals, checks)
            try:
                with checks:
                    await self._checks()
            finally:
                with anyio.CancelScope(shield=True):
                    await self._close()
                group.cancel_scope.cancel()
        return self.results

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
                exc = _single(raised)
                self._debug(exc)
                click.echo(
                    self._shown(f"atp: warning: closing the adapter failed: {_described(exc)}"), err=True
                )
        if closing.cancelled_caught:
            adapter.abort()

    async def _watch_signals(self, checks: Any) -> None:
        import signal

        import anyio

        try:
            receiver = anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM)
        except (NotImplementedError, ValueError, AttributeError):  # pragma: no cover - not POSIX
            return
        with receiver as signals:
            async for signum in signals:
                if self.stopped_by is None:
                    self.stopped_by = int(signum)
                    checks.cancel()
                    continue
                if self.adapter is not None:
                    self.adapter.abort()

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
            await self._conformance()
        if reached != "yes":
            reason = "the agent is not healthy" if reached == "unhealthy" else "the agent is not reachable"
            self._skip(("probe", "events", "malformed", "version"), reason)
            return
        probe = await self._send(self._request(PROBE_DESCRIPTION))
        self._add(self._probe_check(probe))
        if isinstance(probe.error, AdapterError):
            self._skip(("events", "malformed", "version"), "the probe could not be delivered")
            return
        self._add(self._events_check(probe))
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
        malformed = self._request("", max_steps=0)
        self._add(self._refusal_check("malformed", await self._send(malformed), MALFORMED_WHAT))
        major_2 = self._request(PROBE_DESCRIPTION, version="2.0")
        self._add(
            self._refusal_check("version", await self._send(major_2), "a request of protocol version 2.0")
        )

    def _request(
        self, description: str, *, max_steps: int | None = None, version: str | None = None
    ) -> ATPRequest:
        """A request with a fresh task_id. Structs are not validated when built: an empty
        ``description`` and ``max_steps=0`` go out as written, breaking the schema."""
        from atp.core.protocol import PROTOCOL_VERSION, ATPRequest, Constraints, Task

        return ATPRequest(
            version=version or PROTOCOL_VERSION,
            task_id=str(uuid.uuid4()),
            task=Task(description=description),
            constraints=Constraints(max_steps=max_steps, timeout_seconds=max(1, math.ceil(self.timeout))),
            metadata={"test_id": "atp-validate", "run_number": 1, "total_runs": 1},
        )

    async def _send(self, request: ATPRequest) -> Answer:
        """``request`` through the adapter, in a fresh sink, within the time limit."""
        import anyio

        from atp.core.protocol import ATPResponse

        adapter = self.adapter
        assert adapter is not None, "the reachable check makes it"
        answer = Answer(request, ProbeSink(request.task_id, self.masker))
        started = time.perf_counter()
        returned: Any = _NOTHING
        try:
            with anyio.move_on_after(self.timeout) as limit:
                returned = await adapter.execute(request, answer.sink)
        except Exception as raised:
            answer.error = _single(raised)
            self._debug(answer.error)
        if returned is _NOTHING:
            answer.timed_out = answer.error is None and limit.cancelled_caught
        elif isinstance(returned, ATPResponse):
            answer.response = returned
        else:
            answer.error = TypeError(f"adapter returned {type(returned).__name__}, not an ATPResponse")
        answer.seconds = time.perf_counter() - started
        return answer

    # --- the checks -------------------------------------------------------------------------

    async def _reachable(self) -> str:
        """``yes``: the adapter started and the agent is healthy enough to be sent requests;
        ``unhealthy``: it answers but reports itself unhealthy; ``no``: nothing to talk to."""
        import anyio

        from atp.core.adapter import Adapter, AgentUnhealthy, Health

        started = time.perf_counter()
        step = "start"
        try:
            adapter = self.adapter = self.make_adapter()
        except Exception as raised:
            exc = _single(raised)
            self._debug(exc)
            self._add(
                CheckResult(
                    "reachable",
                    CHECKS["reachable"],
                    "failed",
                    "the adapter refused the agent's settings",
                    seen=[self._shown(_described(exc))],
                    fix="correct the agent's definition (atp schema config shows the settings of each type)",
                )
            )
            return "no"
        health: Any = None
        try:
            with anyio.fail_after(self.timeout):
                await adapter.start()
                step = "health"
                health = await adapter.health()
        except TimeoutError:
            self._add(
                CheckResult(
                    "reachable",
                    CHECKS["reachable"],
                    "failed",
                    f"the adapter's {step}() took more than {self.timeout:g} s",
                    fix="check that the agent is running and its definition points at it; or give it "
                    "more time with --timeout",
                )
            )
            return "no"
        except Exception as raised:
            exc = _single(raised)
            self._debug(exc)
            if isinstance(exc, AgentUnhealthy):
                self._add(self._unhealthy(exc.health, [self._shown(str(exc))], time.perf_counter() - started))
                return "unhealthy"
            self._add(
                CheckResult(
                    "reachable",
                    CHECKS["reachable"],
                    "failed",
                    "the agent cannot be started" if step == "start" else "the health check failed",
                    seen=[self._shown(_described(exc))],
                    fix="check the agent's definition (its command, address or module) and that the "
                    "agent runs",
                )
            )
            return "no"
        seconds = time.perf_counter() - started
        if not isinstance(health, Health):
            self._add(
                CheckResult(
                    "reachable",
                    CHECKS["reachable"],
                    "failed",
                    f"the {self.agent_type!r} adapter's health() returned {type(health).__name__}, not a Health "
                    "(a bug in it, not in the agent)",
                    fix="report it to the adapter's authors",
                )
            )
            return "no"
        detail = [self._shown(health.detail)] if health.detail else []
        if health.status == "unreachable":
            self._add(
                CheckResult(
                    "reachable",
                    CHECKS["reachable"],
                    "failed",
                    "the agent's health check cannot reach it",
                    seen=detail,
                    fix="start the agent (or wait until it is ready), then validate it again",
                    seconds=seconds,
                )
            )
            return "no"
        if not health.usable and type(adapter).health is Adapter.health:
            # (the default health(): the adapter's plain health check said no; it says no more)
            self._add(
                CheckResult(
                    "reachable",
                    CHECKS["reachable"],
                    "failed",
                    "the agent's health check says it is not healthy",
                    seen=detail,
                    fix="start the agent (or wait until it is ready), then validate it again",
                    seconds=seconds,
                )
            )
            return "unhealthy"
        if not health.usable:
            self._add(self._unhealthy(health, detail, seconds))
            return "unhealthy"
        if health.status == "healthy":
            summary = "the adapter started and the health check passed"
            if health.detail:
                summary = f"the adapter started and the agent is healthy ({self._shown(health.detail, 120)})"
            self._add(CheckResult("reachable", CHECKS["reachable"], "passed", summary, seconds=seconds))
            return "yes"
        words = (
            "reports itself degraded"
            if health.status == "degraded"
            else "gives no health status ATP can read"
        )
        self._add(
            CheckResult(
                "reachable",
                CHECKS["reachable"],
                "passed",
                f"the adapter started; the agent {words}",
                notes=detail or [f"health status {health.status}"],
                seconds=seconds,
            )
        )
        return "yes"

    def _unhealthy(self, health: Any, seen: list[str], seconds: float) -> CheckResult:
        """The agent answers, but its health check (or its own report) says it is unhealthy."""
        return CheckResult(
            "reachable",
            CHECKS["reachable"],
            "failed",
            f"the agent's health check says it is {health.status}",
            seen=seen or ([self._shown(health.detail)] if health.detail else []),
            fix="make the agent healthy (start it, wait until it is ready, or fix what its own report "
            "says is wrong), then validate it again",
            seconds=seconds,
        )

    async def _conformance(self) -> None:
        """The adapter's checks of its own protocol, each shown like ATP's."""
        import anyio

        from atp.core.adapter import ConformanceCheck

        adapter = self.adapter
        assert adapter is not None
        conformance = getattr(adapter, "conformance", None)
        if conformance is None:
            return
        started = time.perf_counter()
        failure: str | None = None
        checks: Any = []
        try:
            with anyio.fail_after(self.timeout):
                checks = await conformance()
        except TimeoutError:
            failure = f"the adapter's conformance checks took more than {self.timeout:g} s"
        except Exception as raised:
            exc = _single(raised)
            self._debug(exc)
            failure = f"the {self.agent_type!r} adapter's conformance checks failed: {_described(exc)}"
        if failure is None and (
            not isinstance(checks, list) or not all(isinstance(c, ConformanceCheck) for c in checks)
        ):
            failure = f"the {self.agent_type!r} adapter's conformance() returned {type(checks).__name__}, not a list of ConformanceCheck"
        if failure is not None:
            self.extra += 1
            self._add(
                CheckResult(
                    "conformance",
                    "conformance",
                    "failed",
                    self._shown(failure),
                    fix="check that the agent keeps running; --debug shows the traceback of an adapter's bug",
                    seconds=time.perf_counter() - started,
                )
            )
            return
        for check in checks:
            self.extra += 1
            name = check.name if check.name not in CHECKS else f"{self.agent_type}:{check.name}"
            self._add(
                CheckResult(
                    name,
                    self._shown(check.title, 60),
                    "passed" if check.passed else "failed",
                    self._shown(check.message),
                    seen=[self._shown(line) for line in check.seen],
                    fix=None if check.passed else check.fix,
                    notes=[self._shown(note) for note in check.notes],
                )
            )

    def _probe_check(self, answer: Answer) -> CheckResult:
        name, title = "probe", CHECKS["probe"]
        failed = self._unanswered(name, answer)
        if failed is not None:
            return failed
        response, request = answer.response, answer.request
        assert response is not None
        if response.task_id != request.task_id:
            return self._wrong_task_id(name, answer, response.task_id)
        if response.status != "completed":
            seen = [self._shown(f"status {response.status}" + _error_words(response))]
            seen.extend(self._log_lines(answer))
            return CheckResult(
                name,
                title,
                "failed",
                f"a valid request was answered with status {response.status}",
                seen=seen,
                seconds=answer.seconds,
                fix="a small valid task must complete: the agent's error (and its log) says why it did not",
            )
        from atp.core.protocol import sane_metrics

        _, problems = sane_metrics(response.metrics)
        return CheckResult(
            name,
            title,
            "passed",
            "status completed, with the request's task_id",
            notes=[self._shown(p) for p in problems],
            seconds=answer.seconds,
        )

    def _events_check(self, answer: Answer) -> CheckResult:
        name, title = "events", CHECKS["events"]
        sink = answer.sink
        problems: list[str] = []
        seen: list[str] = []
        fixes: list[str] = []
        if sink.foreign_count:
            others = ", ".join(f"{self._shown(repr(t))} ({n})" for t, n in sink.foreign.items())
            problems.append("events with another task_id")
            seen.append(
                f"{sink.foreign_count} events carry another task_id than the request's "
                f"{answer.request.task_id!r}: {others}"
            )
            fixes.append("give every event the request's task_id")
        if sink.disorder_count:
            more = sink.disorder_count - len(sink.disorder)
            problems.append("sequence numbers do not increase")
            seen.append("; ".join(sink.disorder) + (f"; and {more} more" if more else ""))
            fixes.append("number events 0, 1, 2, ... in the order they are sent, one counter per request")
        if sink.warning_count:
            problems.append(f"the adapter warned {_times(sink.warning_count)}")
            seen.extend(f"warning: {self._shown(w)}" for w in sink.warnings)
            if sink.warning_count > len(sink.warnings):
                seen.append(f"... and {sink.warning_count - len(sink.warnings)} more warnings")
            fixes.append("send only valid ATP events (docs/agents.md); each warning says what was wrong")
        if problems:
            return CheckResult(name, title, "failed", "; ".join(problems), seen=seen, fix="; ".join(fixes))
        if not sink.events_seen:
            return CheckResult(
                name,
                title,
                "passed",
                "no events",
                notes=["events are optional; they let suites check the agent's tool calls, steps and tokens"],
            )
        count = sink.events_seen
        numbers = (
            f"sequence {sink.first_sequence}"
            if count == 1
            else f"sequence {sink.first_sequence} to {sink.last_sequence}"
        )
        return CheckResult(
            name, title, "passed", f"{count} valid event{'s' if count != 1 else ''}, {numbers}"
        )

    def _refusal_check(self, name: str, answer: Answer, what: str) -> CheckResult:
        """``answer`` to a request the agent must refuse: a ``failed`` response or a refusal of
        the transport passes; a crash, garbage, no answer in time or any other status fails."""
        from atp.core.errors import AgentRefused, ProtocolError

        title = CHECKS[name]
        error = answer.error
        if isinstance(error, AgentRefused):
            status = f" (status {error.status})" if error.status is not None else ""
            return CheckResult(
                name,
                title,
                "passed",
                f"refused by the transport{status}",
                notes=[self._shown(error.message)],
                seconds=answer.seconds,
            )
        if isinstance(error, ProtocolError) and str(error).startswith("ATP request"):
            # The adapter decodes what it sends, as strictly as an answer: the agent is never
            # given such a request.
            return CheckResult(
                name,
                title,
                "passed",
                "the adapter refuses it before it reaches the agent",
                notes=[self._shown(str(error))],
                seconds=answer.seconds,
            )
        failed = self._unanswered(name, answer, refusal=True)
        if failed is not None:
            return failed
        response = answer.response
        assert response is not None
        if response.task_id != answer.request.task_id:
            return self._wrong_task_id(name, answer, response.task_id)
        if response.status != "failed":
            rule = (
                "the platform and agents must reject an unsupported major version"
                if name == "version"
                else "agents must validate every request against the schema"
            )
            return CheckResult(
                name,
                title,
                "failed",
                f"answered with status {response.status}",
                seen=[self._shown(f"status {response.status}" + _error_words(response)) + f", to {what}"],
                fix=f"{rule}: answer it with status failed and error_code INVALID_REQUEST",
                seconds=answer.seconds,
            )
        notes = []
        if response.error_code != "INVALID_REQUEST":
            given = (
                f"error_code {self._shown(repr(response.error_code), 60)}"
                if response.error_code
                else "no error_code"
            )
            notes.append(f"{given}: INVALID_REQUEST says what went wrong")
        code = f", error_code {self._shown(response.error_code, 60)}" if response.error_code else ""
        return CheckResult(name, title, "passed", f"status failed{code}", notes=notes, seconds=answer.seconds)

    # --- what failures look like ------------------------------------------------------------

    def _unanswered(self, name: str, answer: Answer, *, refusal: bool = False) -> CheckResult | None:
        """The failure of a probe that got no response (it timed out or raised), or ``None``."""
        from atp.core.errors import AdapterError, AgentError, AgentRefused, AtpError

        title = CHECKS[name]
        if answer.timed_out:
            fix = (
                "never hang on bad input: check the request first and answer status failed, "
                "error_code INVALID_REQUEST"
                if refusal
                else "answer within the request's constraints.timeout_seconds; a slow agent can be "
                "given more time with --timeout"
            )
            return CheckResult(
                name,
                title,
                "failed",
                f"no answer within {self.timeout:g} s",
                seen=self._log_lines(answer),
                fix=fix,
                seconds=answer.seconds,
            )
        error = answer.error
        if error is None:
            return None
        described = _described(error)
        seen = [self._shown(described, SEEN_CHARS), *self._log_lines(answer, besides=described)]
        if isinstance(error, AgentRefused):
            status = f" (status {error.status})" if error.status is not None else ""
            return CheckResult(
                name,
                title,
                "failed",
                f"the transport refused a valid request{status}",
                seen=seen,
                fix="accept every request that follows the ATP Request schema",
                seconds=answer.seconds,
            )
        if isinstance(error, AgentError) or (
            isinstance(error, AtpError) and not isinstance(error, AdapterError)
        ):
            summary, fix = diagnose(error_text(error))
            if refusal:
                summary = f"not refused gracefully: {summary}"
            return CheckResult(name, title, "failed", summary, seen=seen, fix=fix, seconds=answer.seconds)
        if isinstance(error, AdapterError):
            return CheckResult(
                name,
                title,
                "failed",
                "the request could not be delivered",
                seen=seen,
                fix="check that the agent keeps running and can be reached",
                seconds=answer.seconds,
            )
        return CheckResult(
            name,
            title,
            "failed",
            f"the {self.agent_type!r} adapter failed (a bug in it, not in the agent)",
            seen=seen,
            fix="report it to the adapter's authors (--debug shows the traceback)",
            seconds=answer.seconds,
        )

    def _wrong_task_id(self, name: str, answer: Answer, task_id: str) -> CheckResult:
        return CheckResult(
            name,
            CHECKS[name],
            "failed",
            "the response carries another task_id",
            seen=[
                f"the response's task_id is {self._shown(repr(task_id), TASK_ID_CHARS)}, "
                f"the request's was {answer.request.task_id!r}"
            ],
            fix="echo the request's task_id in every response and event",
            seconds=answer.seconds,
        )

    def _log_lines(self, answer: Answer, besides: str = "") -> list[str]:
        """The last lines of the agent's log, but for those ``besides`` (an adapter's message)
        quotes already."""
        return [f"log: {self._shown(line)}" for line in answer.sink.log_tail if line not in besides]

    def _shown(self, text: str, limit: int = SEEN_CHARS) -> str:
        """Agent text as it may be shown: secrets masked, then shortened and escaped."""
        from atp.core.text import printable, shorten

        return printable(shorten(self.masker.text(text), limit))

    def _debug(self, exc: BaseException) -> None:
        """With ``--debug``, the traceback of an exception that is neither the agent's fault nor
        a user's error (a bug in an adapter)."""
        from atp.cli.main import debugging
        from atp.core.errors import AgentError, AtpError

        if debugging() and not isinstance(exc, (AgentError, AtpError)):
            import traceback

            click.echo(self._shown("".join(traceback.format_exception(exc)), 100_000), err=True)


MALFORMED_WHAT = "a request with an empty task.description and constraints.max_steps 0"

_MISSING_FIELD = re.compile(r"missing required field `([^`]+)`")
_AT_PATH = re.compile(r" - at `(\$[^`]*)`")


def diagnose(message: str) -> tuple[str, str]:
    """What an adapter's or a decoder's message about an answer means, and its fix."""
    missing = _MISSING_FIELD.search(message)
    at = _AT_PATH.search(message)
    if missing is not None and missing.group(1) == "task_id" and (at is None or at.group(1) == "$"):
        return "the response has no task_id", "echo the request's task_id in every response and event"
    if "answered with task_id" in message:
        return (
            "the response carries another task_id",
            "echo the request's task_id in every response and event",
        )
    if missing is not None:
        where = f" at {at.group(1)}" if at is not None else ""
        return (
            f"the response has no {missing.group(1)}{where}",
            "every response needs version, task_id, status, artifacts (a list, may be empty) and metrics "
            "(an object, may be empty)",
        )
    if "protocol version" in message and "not supported" in message:
        return (
            "the response is not of protocol version 1",
            'write "version": "1.0" in every response and event',
        )
    if "MAJOR.MINOR" in message:
        return (
            "the response's version is not MAJOR.MINOR",
            'write "version": "1.0" in every response and event',
        )
    if "without writing a response" in message or "without a response" in message:
        return (
            "the agent gave no response",
            "answer every request with an ATP Response, with status failed when the task cannot be done",
        )
    if "not valid JSON" in message or "not valid UTF-8" in message:
        return (
            "the answer is not a JSON response",
            "answer with one ATP Response, a JSON object; keep logs out of it",
        )
    if "flooded" in message:
        return "the agent sent more than ATP takes", "send less output (events and logs are bounded)"
    if at is not None:
        return (
            f"the response breaks the schema at {at.group(1)}",
            "follow the ATP Response schema (docs/agents.md, 'Messages')",
        )
    return "the agent's answer could not be used", "answer with one ATP Response (docs/agents.md, 'Messages')"


def error_text(error: BaseException) -> str:
    """An adapter's error as text, with its evidence (what the agent sent)."""
    from atp.core.errors import AgentError
    from atp.core.text import as_text

    message = str(error)
    if isinstance(error, AgentError) and error.evidence is not None:
        message += f": '{as_text(error.evidence)}'"
    return message


def _described(exc: BaseException) -> str:
    from atp.core.errors import AgentError, AtpError

    if isinstance(exc, (AgentError, AtpError)):
        return error_text(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _error_words(response: ATPResponse) -> str:
    words = ""
    if response.error_code:
        words += f", error_code {response.error_code}"
    if response.error:
        words += f", error: {response.error}"
    return words


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _single(exc: BaseException) -> BaseException:
    """The one exception inside (nested) exception groups (a task group's), else ``exc``."""
    inner = getattr(exc, "exceptions", None)
    while isinstance(inner, tuple) and len(inner) == 1 and isinstance(inner[0], BaseException):
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    return exc


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


# --- the command ------------------------------------------------------------------------------


class TextReport:
    """Each check as a line as soon as it is decided; under a failure what was seen and the fix."""

    WIDTH = max(len(t) for t in CHECKS.values())

    def __init__(self) -> None:
        self.color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")

    def __call__(self, result: CheckResult) -> None:
        label = LABELS[result.outcome]
        if self.color:
            label = click.style(label, fg=COLORS[result.outcome], bold=result.outcome == "failed")
        timing = (
            f" ({result.seconds:.2f} s)" if result.seconds is not None and result.outcome != "skipped" else ""
        )
        click.echo(f"{label}  {result.title.ljust(self.WIDTH)}  {result.summary}{timing}")
        for line in result.seen:
            click.echo(f"      seen: {line}")
        if result.fix:
            click.echo(f"      fix:  {result.fix}")
        for note in result.notes:
            click.echo(f"      note: {note}")


@click.command("validate")
@click.argument(
    "suite_path", metavar="[SUITE]", required=False, type=click.Path(path_type=Path, dir_okay=False)
)
@click.option(
    "--suite",
    "suite_option",
    type=click.Path(path_type=Path, dir_okay=False),
    help="A suite file that defines the agent (same as naming it as SUITE).",
)
@click.option(
    "--agent", "agent_name", help="The agent to check, by name (optional when only one is defined)."
)
@click.option(
    "--timeout",
    type=click.FloatRange(0, MAX_TIMEOUT, min_open=True),
    default=DEFAULT_TIMEOUT,
    metavar="SECONDS",
    help=f"How long each probe may take (default {DEFAULT_TIMEOUT:g}).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@config_option
@debug_option
def validate_command(
    suite_path: Path | None,
    suite_option: Path | None,
    agent_name: str | None,
    timeout: float,
    as_json: bool,
    config_path: Path | None,
) -> int:
    """Check that an agent speaks ATP: it is reachable (and healthy, by its own report where it
    gives one), answers a probe with a valid response carrying its task_id, sends valid events
    in order, and refuses a malformed request and one of protocol version 2.0 gracefully. An
    adapter may add checks of its own protocol (an Agent Interface Standard agent's discovery
    endpoints); for an agent that speaks another protocol the two refusal checks are skipped.

    The agent is defined in atp.config.yaml or in the SUITE file. Exit code 0 when every check
    passed, 1 when one failed, 2 for a usage or config error, 130 when interrupted.
    """
    import signal

    import anyio

    from atp.cli.main import EXIT_FAILED, EXIT_OK
    from atp.core.config import agent_definitions, choose_agent, load_config, masker_for, resolve_agent
    from atp.core.suite import load_suite
    from atp.core.text import masking, printable

    if suite_path is not None and suite_option is not None and suite_path != suite_option:
        raise click.UsageError("name the suite once: as SUITE or with --suite")
    suite_file = suite_path or suite_option
    config = load_config(config_path)
    loaded = plugins_for(config)
    suite = load_suite(suite_file, loaded.evaluators) if suite_file is not None else None
    agent = resolve_agent(choose_agent(agent_definitions(config, suite), agent_name), loaded.adapters)
    masker = masker_for(config, agent)
    if not as_json:
        click.echo(printable(f"Agent: {agent.name} ({agent.type}), each probe within {timeout:g} s"))
    report: Callable[[CheckResult], None] = (lambda result: None) if as_json else TextReport()
    validation = Validation(agent.create_adapter, agent.type, timeout=timeout, masker=masker, report=report)
    with masking(masker):
        try:
            anyio.run(validation.run)
        except KeyboardInterrupt:  # Ctrl-C before the checks listened for it
            validation.stopped_by = validation.stopped_by or signal.SIGINT
    results = validation.results
    interrupted = validation.stopped_by is not None
    failed_count = sum(1 for r in results if r.outcome == "failed")
    if as_json:
        import json

        document = {
            "agent": agent.name,
            "type": agent.type,
            "ok": failed_count == 0 and not interrupted and len(results) == validation.expected,
            "interrupted": interrupted,
            "timeout_seconds": timeout,
            "checks": [r.as_dict() for r in results],
        }
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        click.echo(
            summary_line(
                results,
                agent.name,
                expected=validation.expected,
                foreign=getattr(validation.adapter, "foreign_protocol", None)
                if validation.foreign_skips
                else None,
            )
        )
    if validation.stopped_by is not None:
        click.echo("Interrupted: the checks not run are left out; the agent was stopped.", err=True)
        return 128 + int(validation.stopped_by)
    return EXIT_OK if failed_count == 0 else EXIT_FAILED


def summary_line(
    results: Sequence[CheckResult],
    agent_name: str,
    *,
    expected: int = len(CHECKS),
    foreign: str | None = None,
) -> str:
    """The last line: every check passed, or how many passed, failed, were skipped. ``foreign``:
    the protocol the agent speaks when ATP's own refusal checks were skipped for it."""
    from atp.core.text import printable

    counts = {outcome: sum(1 for r in results if r.outcome == outcome) for outcome in OUTCOMES}
    if counts["failed"] == 0 and counts["passed"] == expected:
        return printable(f"All {expected} checks passed: {agent_name} speaks ATP.")
    if foreign and counts["failed"] == 0 and len(results) == expected:
        return printable(
            f"All {counts['passed']} checks that apply passed: {agent_name} speaks {foreign}, which ATP "
            f"drives through its adapter ({counts['skipped']} ATP-only checks skipped)."
        )
    parts = [f"{counts['passed']} passed", f"{counts['failed']} failed"]
    if counts["skipped"]:
        parts.append(f"{counts['skipped']} skipped")
    if len(results) < expected:
        parts.append(f"{expected - len(results)} not run")
    ending = "; fix the failures above and run atp validate again" if counts["failed"] else ""
    return f"Checks: {', '.join(parts)} of {expected}{ending}."
