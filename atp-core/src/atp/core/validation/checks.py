"""The checks of ``atp validate`` that judge a probe's answer: the probe itself, its events, and
the refusal of a request the agent must refuse."""

from __future__ import annotations

from typing import TYPE_CHECKING

from atp.core.validation.diagnosis import TASK_ID_FIX, diagnose
from atp.core.validation.exceptions import described, error_text
from atp.core.validation.results import CHECKS, CheckResult
from atp.core.validation.sink import SEEN_CHARS, TASK_ID_CHARS

if TYPE_CHECKING:
    from atp.core.protocol import ATPResponse
    from atp.core.validation.context import CheckContext
    from atp.core.validation.probe import Answer

__all__ = ["events_check", "probe_check", "refusal_check", "unanswered"]


def probe_check(answer: Answer, context: CheckContext) -> CheckResult:
    """``probe``: a small valid request is answered with status ``completed`` and its task_id."""
    from atp.core.protocol import sane_metrics

    name, title = "probe", CHECKS["probe"]
    failed = unanswered(name, answer, context)
    if failed is not None:
        return failed
    response, request = answer.response, answer.request
    assert response is not None
    if response.task_id != request.task_id:
        return wrong_task_id(name, answer, response.task_id, context)
    if response.status != "completed":
        seen = [context.shown(f"status {response.status}" + error_words(response))]
        seen.extend(context.log_lines(answer))
        return CheckResult(
            name,
            title,
            "failed",
            f"a valid request was answered with status {response.status}",
            seen=seen,
            seconds=answer.seconds,
            fix="a small valid task must complete: the agent's error (and its log) says why it did not",
        )
    _, problems = sane_metrics(response.metrics)
    return CheckResult(
        name,
        title,
        "passed",
        "status completed, with the request's task_id",
        notes=[context.shown(p) for p in problems],
        seconds=answer.seconds,
    )


def events_check(answer: Answer, context: CheckContext) -> CheckResult:
    """``events``: the probe's events carry its task_id, in order, and the adapter warned of none."""
    name, title = "events", CHECKS["events"]
    sink = answer.sink
    problems: list[str] = []
    seen: list[str] = []
    fixes: list[str] = []
    if sink.foreign_count:
        others = ", ".join(f"{context.shown(repr(t))} ({n})" for t, n in sink.foreign.items())
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
        problems.append(f"the adapter warned {times(sink.warning_count)}")
        seen.extend(f"warning: {context.shown(w)}" for w in sink.warnings)
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
            notes=[
                "events are optional; they let suites check the agent's tool calls, steps and tokens",
                *recorded(sink.recorded, context),
            ],
        )
    count = sink.events_seen
    numbers = (
        f"sequence {sink.first_sequence}"
        if count == 1
        else f"sequence {sink.first_sequence} to {sink.last_sequence}"
    )
    return CheckResult(
        name,
        title,
        "passed",
        f"{count} valid event{'s' if count != 1 else ''}, {numbers}",
        notes=recorded(sink.recorded, context),
    )


def recorded(calls: dict[str, int], context: CheckContext) -> list[str]:
    """A note of the tool calls the probed test's tool server answered (by tool), if any."""
    if not calls:
        return []
    named = ", ".join(f"{tool} ×{n}" if n > 1 else tool for tool, n in calls.items())
    return [context.shown(f"the test's tool server answered the agent's calls: {named}")]


def refusal_check(name: str, answer: Answer, what: str, context: CheckContext) -> CheckResult:
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
            notes=[context.shown(error.message)],
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
            notes=[context.shown(str(error))],
            seconds=answer.seconds,
        )
    failed = unanswered(name, answer, context, refusal=True)
    if failed is not None:
        return failed
    response = answer.response
    assert response is not None
    if response.task_id != answer.request.task_id:
        return wrong_task_id(name, answer, response.task_id, context)
    if response.status != "failed":
        return _not_refused(name, answer, response, what, context)
    notes = []
    if response.error_code != "INVALID_REQUEST":
        given = (
            f"error_code {context.shown(repr(response.error_code), 60)}"
            if response.error_code
            else "no error_code"
        )
        notes.append(f"{given}: INVALID_REQUEST says what went wrong")
    code = f", error_code {context.shown(response.error_code, 60)}" if response.error_code else ""
    return CheckResult(name, title, "passed", f"status failed{code}", notes=notes, seconds=answer.seconds)


def _not_refused(
    name: str, answer: Answer, response: ATPResponse, what: str, context: CheckContext
) -> CheckResult:
    """The failure of a request the agent must refuse that it answered with another status."""
    rule = (
        "the platform and agents must reject an unsupported major version"
        if name == "version"
        else "agents must validate every request against the schema"
    )
    return CheckResult(
        name,
        CHECKS[name],
        "failed",
        f"answered with status {response.status}",
        seen=[context.shown(f"status {response.status}" + error_words(response)) + f", to {what}"],
        fix=f"{rule}: answer it with status failed and error_code INVALID_REQUEST",
        seconds=answer.seconds,
    )


def unanswered(
    name: str, answer: Answer, context: CheckContext, *, refusal: bool = False
) -> CheckResult | None:
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
            f"no answer within {context.timeout:g} s",
            seen=context.log_lines(answer),
            fix=fix,
            seconds=answer.seconds,
        )
    error = answer.error
    if error is None:
        return None
    words = described(error)
    seen = [context.shown(words, SEEN_CHARS), *context.log_lines(answer, besides=words)]
    if isinstance(error, AgentRefused):
        status = f" (status {error.status})" if error.status is not None else ""
        summary, fix = (
            f"the transport refused a valid request{status}",
            "accept every request that follows the ATP Request schema",
        )
    elif isinstance(error, AgentError) or (
        isinstance(error, AtpError) and not isinstance(error, AdapterError)
    ):
        summary, fix = diagnose(error_text(error))
        if refusal:
            summary = f"not refused gracefully: {summary}"
    elif isinstance(error, AdapterError):
        summary, fix = (
            "the request could not be delivered",
            "check that the agent keeps running and can be reached",
        )
    else:
        summary, fix = (
            f"the {context.agent_type!r} adapter failed (a bug in it, not in the agent)",
            "report it to the adapter's authors (--debug shows the traceback)",
        )
    return CheckResult(name, title, "failed", summary, seen=seen, fix=fix, seconds=answer.seconds)


def wrong_task_id(name: str, answer: Answer, task_id: str, context: CheckContext) -> CheckResult:
    """The failure of an answer that carries another task_id than its request's."""
    return CheckResult(
        name,
        CHECKS[name],
        "failed",
        "the response carries another task_id",
        seen=[
            f"the response's task_id is {context.shown(repr(task_id), TASK_ID_CHARS)}, "
            f"the request's was {answer.request.task_id!r}"
        ],
        fix=TASK_ID_FIX,
        seconds=answer.seconds,
    )


def error_words(response: ATPResponse) -> str:
    """A response's error_code and error, as words to add to its status."""
    words = ""
    if response.error_code:
        words += f", error_code {response.error_code}"
    if response.error:
        words += f", error: {response.error}"
    return words


def times(count: int) -> str:
    """``once``, ``2 times``..."""
    return "once" if count == 1 else f"{count} times"
