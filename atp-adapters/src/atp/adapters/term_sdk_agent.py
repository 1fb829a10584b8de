"""One agent of the ``term-sdk`` adapter (:mod:`atp.adapters.term_sdk`), started for a run, and
ATP's exchange with it over the Term Challenge SDK 2.0 protocol (:class:`TermSdkAgent`):
``GET /health`` until it says ``{"status": "ok"}``, ``POST /start`` with the task, ``GET
/status`` polled, every new entry of the agent's history a ``tool_call`` event, and the response
made of its last status."""

from __future__ import annotations

import functools
import json
import time
from typing import Annotated, Any, Literal, TypeVar

import anyio
import msgspec

from atp.adapters.network import (
    ERROR_BODY_BYTES,
    error_fields,
    http_failure,
    is_transient,
    read_body,
    refusal,
    request_errors,
    transient_fault,
    unreachable,
)
from atp.adapters.server import HealthProbe, Server
from atp.adapters.term_sdk_settings import TermSdkSettings
from atp.core.errors import AgentError
from atp.core.protocol import (
    DEFAULT_TIMEOUT_SECONDS,
    PROTOCOL_VERSION,
    ATPRequest,
    ATPResponse,
    Metrics,
    ProgressPayload,
    StateChangePayload,
    ToolCallPayload,
    make_event,
)
from atp.core.text import shown
from atp.core.trace import EventSink

TOOL = "shell"
"""The tool every command of the agent's history is a call of."""
MAX_BODY_BYTES = 4 * 1024 * 1024
"""The most ATP reads of one answer of the agent (a ``/status`` with its 30 history entries
is a few kilobytes)."""
HISTORY_ENTRIES = 30
"""How many entries the SDK's history holds (the last commands); more is a warning."""
_D = TypeVar("_D")


class _Entry(msgspec.Struct):
    step: Annotated[int, msgspec.Meta(ge=0)]
    command: str
    output: str | None = None
    exit_code: int | None = None


class _Status(msgspec.Struct):
    status: Literal["idle", "running", "completed", "failed"]
    steps: Annotated[int, msgspec.Meta(ge=0)] | None = None
    elapsed_secs: float | None = None
    error: str | None = None
    done: bool | None = None
    history: list[_Entry] = msgspec.field(default_factory=list)


class _Started(msgspec.Struct):
    status: Literal["started"]


class _NoAnswer(Exception):
    """An HTTP call to the agent got no whole answer: ``words`` say why (no connection, none
    within ``request_timeout``, the connection cut). ``unconnected`` is the transport's error
    when no connection opened."""

    def __init__(self, words: str, unconnected: BaseException | None = None) -> None:
        super().__init__(words)
        self.words = words
        self.unconnected = unconnected


@functools.cache
def _decoder(kind: type[_D]) -> msgspec.json.Decoder[_D]:
    """A decoder of the agent's answers, made at the first run (not when ATP lists adapters)."""
    return msgspec.json.Decoder(kind)


_DECODE_ERRORS = (msgspec.MsgspecError, RecursionError, UnicodeDecodeError)


def _is_ok(body: bytes) -> bool:
    """Whether a ``/health`` answer's body is ``{"status": "ok"}`` (other members allowed)."""
    try:
        document = msgspec.json.decode(body)
    except _DECODE_ERRORS:
        return False
    return isinstance(document, dict) and document.get("status") == "ok"


def instruction(request: ATPRequest) -> str:
    """What ``POST /start`` says to do: the task's description, and its ``input_data``, when it
    has some, as indented JSON after a blank line and the line ``Input data (JSON):``."""
    task = request.task
    if not task.input_data:
        return task.description
    data = json.dumps(task.input_data, indent=2, ensure_ascii=False, default=str)
    return f"{task.description}\n\nInput data (JSON):\n{data}"


def _ranges(steps: list[tuple[int, int]]) -> str:
    shown = [f"{a}" if a == b else f"{a}-{b}" for a, b in steps[:10]]
    more = f" and {len(steps) - 10} more ranges" if len(steps) > 10 else ""
    return ", ".join(shown) + more


class TermSdkAgent:
    """One started agent and ATP's exchange with it: health, ``/start``, ``/status``."""

    def __init__(
        self,
        settings: TermSdkSettings,
        *,
        name: str,
        httpx: Any,
        client: Any,
        server: Server,
        sink: EventSink,
        base: str,
        task_id: str,
    ) -> None:
        self.settings = settings
        self.name = name
        self.task_id = task_id
        self.httpx = httpx
        self.client = client
        self.server = server
        self.sink = sink
        self.base = base
        self.started = server.started
        self.sequence = 0
        self.last_step: int | None = None
        self.seen = 0
        """History entries turned into tool_call events."""
        self.lost: list[tuple[int, int]] = []
        """Steps the agent's history never showed ATP (first, last)."""
        self.max_steps = settings.max_steps
        """The ``max_steps`` sent with ``POST /start``: the SDK stops an agent there."""
        self.beyond: int | None = None
        """The highest step number the agent reported past :attr:`max_steps` (a warning)."""
        self.longest_history = 0
        """The most entries one ``/status`` history held (the SDK keeps 30)."""

    # --- HTTP --------------------------------------------------------------------------------

    async def _call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes, Any]:
        """One HTTP call, the whole of it within ``request_timeout``: the status, the body (at
        most :data:`MAX_BODY_BYTES`) and the headers. Raises :class:`_NoAnswer` saying why there
        is no whole answer (no connection, none within ``request_timeout``, a connection cut),
        and AgentError for a body over the limit."""
        url = self.base + path
        headers = {"Accept": "application/json", "User-Agent": "atp"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        timeout = self.settings.request_timeout
        try:
            # (httpx's timeouts are per read: an answer sent a byte at a time would never end)
            with anyio.fail_after(timeout):
                async with self.client.stream(method, url, content=body, headers=headers) as answer:
                    data = await read_body(
                        answer,
                        MAX_BODY_BYTES,
                        lambda: AgentError(
                            f"{method} {url}: the agent's answer is larger than {MAX_BODY_BYTES} bytes"
                        ),
                    )
                    return answer.status_code, data, answer.headers
        except TimeoutError:
            raise _NoAnswer(f"no answer within {timeout:g} s (request_timeout)") from None
        except request_errors(self.httpx) as exc:
            failure = http_failure(
                self.httpx,
                exc,
                url,
                connect_timeout=timeout,
                timeout=f"no answer within {timeout:g} s (request_timeout)",
            )
            raise _NoAnswer(failure.words, exc if failure.kind == "connect" else None) from None

    def _phrase(self, status: int) -> str:
        phrase: str = self.httpx.codes.get_reason_phrase(status)
        return f"{status} {phrase}".rstrip()

    # --- waiting -----------------------------------------------------------------------------

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less when the agent exits meanwhile."""
        await self.server.pause(seconds)

    def _exited(self, when: str) -> AgentError | None:
        """The agent has exited: the error saying so ``when``, with its output's end."""
        return self.server.exited(when)

    async def wait_healthy(self) -> None:
        """Poll ``GET /health`` until it answers ``200 {"status": "ok"}``; refused connections
        and other answers (``503`` while the agent starts) are waited through, for
        ``health_timeout`` seconds."""
        settings = self.settings
        url = self.base + "/health"

        async def probe(limit: float) -> HealthProbe:
            try:
                with anyio.fail_after(limit):
                    status, body, _ = await self._call("GET", "/health")
            except TimeoutError:
                return HealthProbe(False, f"no answer within {limit:g} s")
            except _NoAnswer as exc:
                return HealthProbe(False, exc.words)
            if status == 200 and _is_ok(body):
                return HealthProbe(True)
            return HealthProbe(False, f"HTTP {self._phrase(status)}", body[:ERROR_BODY_BYTES] or None)

        await self.server.wait_healthy(
            probe,
            url=url,
            timeout=settings.health_timeout,
            interval=settings.health_interval,
            request_timeout=settings.request_timeout,
        )

    # --- the task ----------------------------------------------------------------------------

    async def start_task(self, request: ATPRequest) -> None:
        """``POST /start`` with the instruction, ``max_steps`` and ``timeout_secs``."""
        constraints = request.constraints
        max_steps = (
            constraints.max_steps
            if constraints is not None and constraints.max_steps
            else self.settings.max_steps
        )
        self.max_steps = max_steps
        timeout = (
            constraints.timeout_seconds
            if constraints is not None and constraints.timeout_seconds
            else DEFAULT_TIMEOUT_SECONDS
        )
        body = msgspec.json.encode(
            {"instruction": instruction(request), "max_steps": max_steps, "timeout_secs": timeout}
        )
        url = self.base + "/start"
        where = f"POST {url}"
        try:
            status, answer, headers = await self._call("POST", "/start", body)
        except _NoAnswer as exc:
            failed = self._exited("while ATP sent POST /start")
            if failed is not None:
                raise failed from None
            if exc.unconnected is not None:
                raise unreachable(
                    self.name, url, exc.unconnected, connect_timeout=self.settings.request_timeout
                ) from None
            raise AgentError(f"{where}: {exc.words}") from None
        if is_transient(status):
            phrase = self.httpx.codes.get_reason_phrase(status)
            raise transient_fault(
                self.name, where, status, phrase, headers, answer[:ERROR_BODY_BYTES], masker=self.sink.masker
            )
        if not 200 <= status < 300:
            hint = ""
            if status == 409:
                hint = "; it says a task is already running, though ATP started it for this run and sent one POST /start"
            raise refusal(
                where,
                status,
                self.httpx.codes.get_reason_phrase(status),
                answer[:ERROR_BODY_BYTES],
                hint=hint,
            )
        try:
            _decoder(_Started).decode(answer)
        except _DECODE_ERRORS as exc:
            raise AgentError(
                f'{where}: the agent broke the protocol: its answer (HTTP {status}) is not {{"status": "started"}} ({exc})',
                evidence=answer,
            ) from None
        self._event(
            StateChangePayload(from_state="idle", to_state="started", reason="POST /start accepted the task")
        )

    async def follow(self, request: ATPRequest) -> ATPResponse:
        """Poll ``GET /status`` until the agent says ``completed`` or ``failed``; each new
        history entry is a ``tool_call`` event as it is seen. A poll without a whole answer
        within ``request_timeout`` is a failed poll."""
        settings = self.settings
        url = self.base + "/status"
        where = f"GET {url}"
        errors, last_failure, failure_evidence = 0, "", None
        state = "started"
        steps_shown = -1
        accepted = anyio.current_time()
        while True:
            failed = self._exited(f"while running the task{self._so_far()}")
            if failed is not None:
                raise failed
            report: _Status | None = None
            try:
                status, body, _ = await self._call("GET", "/status")
            except _NoAnswer as exc:
                failed = self._exited(f"while running the task{self._so_far()}")
                if failed is not None:
                    raise failed from None
                last_failure, failure_evidence = exc.words, None
            else:
                if status == 200:
                    try:
                        report = _decoder(_Status).decode(body)
                    except _DECODE_ERRORS as exc:
                        raise AgentError(
                            f"{where}: the agent broke the protocol{self._so_far()}: its status is not "
                            f"the SDK's JSON ({exc})",
                            evidence=body,
                        ) from None
                else:
                    error, _ = error_fields(body[:ERROR_BODY_BYTES])
                    last_failure = f"HTTP {self._phrase(status)}"
                    failure_evidence = error if error is not None else (body[:ERROR_BODY_BYTES] or None)
            if report is None:
                errors += 1
                if errors >= settings.max_poll_errors:
                    raise AgentError(
                        f"{where}: {errors} polls in a row failed (max_poll_errors){self._so_far()}; "
                        f"the last: {last_failure}" + ("" if failure_evidence is None else ", saying"),
                        evidence=failure_evidence,
                    )
            else:
                if errors:
                    self.sink.warn(
                        f"{where} failed {errors} times in a row ({last_failure}); then the agent answered again"
                    )
                errors = 0
                final = report.status in ("completed", "failed")
                if report.status != state and not final:
                    self._event(StateChangePayload(from_state=state, to_state=report.status))
                self._history(report)  # (the commands ran before the agent finished)
                if report.status != state and final:
                    self._event(StateChangePayload(from_state=state, to_state=report.status))
                state = report.status
                if final:
                    return self._response(request, report)
                steps = self._bounded(report.steps if report.steps is not None else (self.last_step or 0))
                if report.status == "running" and steps != steps_shown:
                    steps_shown = steps
                    elapsed = f", {report.elapsed_secs:g} s" if report.elapsed_secs is not None else ""
                    self._event(
                        ProgressPayload(
                            current_step=steps,
                            message=f"running: {steps} step{'' if steps == 1 else 's'}{elapsed}",
                        )
                    )
                if report.status == "idle" and anyio.current_time() - accepted > settings.health_timeout:
                    raise AgentError(
                        f"{where}: the agent still says 'idle' {settings.health_timeout:g} s (health_timeout) after "
                        f"it accepted the task with POST /start"
                    )
            await self._pause(settings.poll_interval)

    def _so_far(self) -> str:
        return f", after {self.seen} step{'' if self.seen == 1 else 's'} seen" if self.seen else ""

    def _event(self, payload: msgspec.Struct) -> None:
        self.sink.event(make_event(self.task_id, self.sequence, payload))
        self.sequence += 1

    def _history(self, report: _Status) -> None:
        """The entries of ``report.history`` not seen before (by ``step``), as ``tool_call``
        events; steps that went missing (the history holds the last 30 commands only, and the
        agent ran more between two polls) said with a progress event, their numbers bounded
        (:meth:`_bounded`)."""
        if len(report.history) > HISTORY_ENTRIES:
            self.longest_history = max(self.longest_history, len(report.history))
        entries = sorted(
            (e for e in report.history if self.last_step is None or e.step > self.last_step),
            key=lambda e: e.step,
        )
        events = []
        for entry in entries:
            if self.last_step is not None and entry.step <= self.last_step:
                continue  # (the same step twice in one history)
            first = 1 if self.last_step is None else self.last_step + 1
            self.seen += 1
            self._bounded(entry.step)  # (a step past max_steps is noted for a warning)
            gap = self._bounded(entry.step - 1)
            if gap >= first:
                events.append(self._lost(first, gap))
            self.last_step = entry.step
            code = entry.exit_code
            payload = ToolCallPayload(
                tool=TOOL,
                input={"command": entry.command},
                output={"output": entry.output, "exit_code": code},
                status="success" if code == 0 else "error",
                error=None if code == 0 else (f"exit code {code}" if code is not None else "no exit code"),
            )
            events.append(make_event(self.task_id, self.sequence, payload))
            self.sequence += 1
        if events:
            self.sink.events(events)

    def _bounded(self, step: int) -> int:
        """``step`` (a step number or count the agent reported), at most the most steps it can
        have run: the ``max_steps`` ATP sent (the SDK stops an agent there) or the history
        entries ATP saw, whichever is higher. A number past that is noted for a warning, and
        never reaches the metrics or the events."""
        limit = max(self.max_steps, self.seen)
        if step <= limit:
            return step
        self.beyond = step if self.beyond is None else max(self.beyond, step)
        return limit

    def _lost(self, first: int, last: int) -> Any:
        self.lost.append((first, last))
        what = f"step {first} is" if first == last else f"steps {first}-{last} are"
        payload = ProgressPayload(
            current_step=last,
            message=f"{what} not in the agent's history (it holds the last commands only); ATP did not see them",
        )
        event = make_event(self.task_id, self.sequence, payload)
        self.sequence += 1
        return event

    def _response(self, request: ATPRequest, report: _Status) -> ATPResponse:
        steps = self._bounded(report.steps if report.steps is not None else (self.last_step or 0))
        top = self.last_step or 0
        if steps > top:
            self.sink.events([self._lost(top + 1, steps)])
        if self.beyond is not None:
            self.sink.warn(
                f"the agent reported step {self.beyond}, more than the max_steps {self.max_steps} ATP sent with "
                f"POST /start (where the SDK stops an agent); ATP counts at most {max(self.max_steps, self.seen)} steps (the higher of "
                f"max_steps and the {self.seen} history entries it saw)"
            )
        if self.longest_history:
            self.sink.warn(
                f"the agent's history held {self.longest_history} entries in one GET /status; the SDK keeps the "
                f"last {HISTORY_ENTRIES} (ATP took every entry)"
            )
        if self.lost:
            count = sum(b - a + 1 for a, b in self.lost)
            self.sink.warn(
                f"{count} of the agent's {steps} steps never appeared in its history (steps {_ranges(self.lost)}): "
                f"the history holds only the last commands, and the agent ran more than that between two polls "
                f"(poll_interval {self.settings.poll_interval:g} s); they are counted in metrics.tool_calls but have "
                f"no tool_call event"
            )
        error = None
        if report.status == "failed":
            error = report.error or "the agent reported status 'failed' without an error"
        elif report.error:
            self.sink.warn(
                f"the agent reported status 'completed' with an error: {shown(report.error, self.sink.masker)}"
            )
        return ATPResponse(
            version=PROTOCOL_VERSION,
            task_id=request.task_id,
            status="completed" if report.status == "completed" else "failed",
            artifacts=[],
            metrics=Metrics(
                total_steps=steps,
                tool_calls=max(steps, self.seen),
                wall_time_seconds=round(time.perf_counter() - self.started, 6),
            ),
            error=error,
        )
