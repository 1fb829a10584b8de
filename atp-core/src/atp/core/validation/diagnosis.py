"""What an adapter's or a decoder's message about an agent's answer means, and what fixes it."""

from __future__ import annotations

import re

__all__ = ["TASK_ID_FIX", "diagnose"]

_MISSING_FIELD = re.compile(r"missing required field `([^`]+)`")
_AT_PATH = re.compile(r" - at `(\$[^`]*)`")
TASK_ID_FIX = "echo the request's task_id in every response and event"
_VERSION_FIX = 'write "version": "1.0" in every response and event'


def diagnose(message: str) -> tuple[str, str]:
    """What an adapter's or a decoder's message about an answer means, and its fix."""
    missing = _MISSING_FIELD.search(message)
    at = _AT_PATH.search(message)
    if missing is not None and missing.group(1) == "task_id" and (at is None or at.group(1) == "$"):
        return "the response has no task_id", TASK_ID_FIX
    if "answered with task_id" in message:
        return "the response carries another task_id", TASK_ID_FIX
    if missing is not None:
        where = f" at {at.group(1)}" if at is not None else ""
        return (
            f"the response has no {missing.group(1)}{where}",
            "every response needs version, task_id, status, artifacts (a list, may be empty) and metrics "
            "(an object, may be empty)",
        )
    if "protocol version" in message and "not supported" in message:
        return "the response is not of protocol version 1", _VERSION_FIX
    if "MAJOR.MINOR" in message:
        return "the response's version is not MAJOR.MINOR", _VERSION_FIX
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
