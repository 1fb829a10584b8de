"""The Agent Interface Standard v1.0 as the ``agent-interface`` adapter
(:mod:`atp.adapters.agent_interface`) reads it: the answers to a message and to a tool call, the
health an agent reports (:func:`health_of`), the JSON Schemas of the discovery answers
(:data:`SCHEMAS`), and the conformance check of one answer against its schema
(:func:`conforming`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Annotated, Any

import msgspec

from atp.adapters.agent_interface_http import INSTALL, Answer
from atp.core.adapter import ConformanceCheck, Health
from atp.core.bounds import number_in
from atp.core.plugins import require
from atp.core.text import as_text

STANDARD = "the Agent Interface Standard v1.0"
HEALTH_STATES = ("healthy", "degraded", "unhealthy")
MAX_PROBLEMS = 100
"""The most schema problems a conformance check collects (it says "over 100 problems")."""
SHOWN_TOOLS = 10
"""How many tool names a passed ``mcp-tools`` check lists."""

ToolName = Annotated[str, msgspec.Meta(min_length=1)]


class A2AAnswer(msgspec.Struct, kw_only=True):
    """The answer to ``POST /a2a/message`` (fields ATP does not read are ignored)."""

    success: bool
    result: Any = None
    error: str | None = None
    tools_used: list[ToolName] = msgspec.field(default_factory=list)


class ToolAnswer(msgspec.Struct, kw_only=True):
    """The answer to ``POST /mcp/execute/{tool_name}``."""

    success: bool
    result: Any = None
    error: str | None = None


a2a_decoder = msgspec.json.Decoder(A2AAnswer)
tool_decoder = msgspec.json.Decoder(ToolAnswer)

_HEALTH_STATUS = {"type": "string", "enum": list(HEALTH_STATES)}
_STATUS_FIELDS: dict[str, Any] = {
    "status": _HEALTH_STATUS,
    "uptime_seconds": {"type": "integer"},
    "request_count": {"type": "integer"},
    "error_count": {"type": "integer"},
    "error_rate": {"type": "number"},
}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    """An object schema: every listed field required, with its type; other fields allowed."""
    return {"type": "object", "properties": properties, "required": list(properties)}


SCHEMAS: dict[str, dict[str, Any]] = {
    "agent-card": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "GET /agent-card (Agent Interface Standard v1.0)",
        **_object(
            {
                "agent_id": {"type": "string", "minLength": 1},
                "name": {"type": "string"},
                "description": {"type": "string"},
                "capabilities": {"type": "array", "items": {"type": "string"}},
                "tags": {"type": "array", "items": {"type": "string"}},
                "tools": {
                    "type": "array",
                    "items": _object(
                        {"name": {"type": "string", "minLength": 1}, "description": {"type": "string"}}
                    ),
                },
                "status": _object(_STATUS_FIELDS),
                "metadata": _object(
                    {
                        "llm_model": {"type": "string"},
                        "semantic_tool_selection": {"type": "boolean"},
                        "version": {"type": "string"},
                    }
                ),
            }
        ),
    },
    "health": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "GET /health (Agent Interface Standard v1.0)",
        **_object(
            {
                **_STATUS_FIELDS,
                "last_error": {"type": ["string", "null"]},
                "llm_available": {"type": "boolean"},
                "timestamp": {"type": "string", "format": "date-time"},
            }
        ),
    },
    "mcp-tools": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "GET /mcp/tools (Agent Interface Standard v1.0)",
        **_object(
            {
                "tools": {
                    "type": "array",
                    "items": _object(
                        {
                            "name": {"type": "string", "minLength": 1},
                            "description": {"type": "string"},
                            "parameters": {
                                "type": "object",
                                "properties": {
                                    "type": {"const": "object"},
                                    "properties": {
                                        "type": "object",
                                        "additionalProperties": _object(
                                            {
                                                "type": {
                                                    "enum": ["string", "number", "boolean", "object", "array"]
                                                },
                                                "description": {"type": "string"},
                                            }
                                        ),
                                    },
                                    "required": {"type": "array", "items": {"type": "string"}},
                                },
                                "required": ["type", "properties", "required"],
                            },
                            "returns": {"type": "string"},
                            "examples": {"type": "array", "items": {"type": "string"}},
                        }
                    ),
                },
                "agent_id": {"type": "string"},
                "agent_name": {"type": "string"},
            }
        ),
    },
}
"""The JSON Schemas (2020-12) of the discovery answers, written from the standard: every field it
lists is required, with the type it gives (``"integer"`` an integer, ``"float"`` a number, an
ISO 8601 ``timestamp`` a date-time); fields it does not list are allowed."""

CHECKED = {
    "agent-card": ("/agent-card", "agent card schema"),
    "health": ("/health", "health schema"),
    "mcp-tools": ("/mcp/tools", "MCP tools schema"),
}
"""The conformance checks: name, the path they GET and their title."""


def json_of(body: bytes) -> Any:
    """The JSON of a body; raises ValueError saying why it is not JSON."""
    try:
        return msgspec.json.decode(body)
    except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(str(exc) or type(exc).__name__) from None


def json_or_none(body: bytes) -> Any:
    try:
        return json_of(body)
    except ValueError:
        return None


def health_of(document: Any, quote: Callable[[str], str] = str) -> Health | None:
    """The health a ``/health`` (or agent card ``status``) document reports, or ``None`` when it
    has no status of the standard's. ``quote`` makes its ``last_error`` (the agent's text) fit
    to be shown (masked, shortened)."""
    if not isinstance(document, dict) or document.get("status") not in HEALTH_STATES:
        return None
    parts = []
    rate, errors, requests = (
        document.get("error_rate"),
        document.get("error_count"),
        document.get("request_count"),
    )
    if number_in(rate) is not None:
        parts.append(f"error rate {rate:.0%}")
    if isinstance(errors, int) and isinstance(requests, int) and not isinstance(errors, bool):
        parts.append(
            f"{errors} error{'' if errors == 1 else 's'} in {requests} request{'' if requests == 1 else 's'}"
        )
    if document.get("llm_available") is False and document["status"] != "healthy":
        parts.append("LLM unavailable")
    last = document.get("last_error")
    if isinstance(last, str) and last:
        parts.append(f"last error: {quote(last)}")
    return Health(status=document["status"], detail=", ".join(parts))


_VALIDATORS: dict[str, Any] = {}


def validators() -> dict[str, Any]:
    """A jsonschema validator per schema of :data:`SCHEMAS` (made once; jsonschema is imported
    only when the conformance checks run)."""
    if not _VALIDATORS:
        jsonschema = require("jsonschema", install=INSTALL, feature="the agent-interface conformance checks")
        checker = jsonschema.FormatChecker(formats=())
        # (registered by a call: jsonschema is imported by name, so its decorator has no types)
        checker.checks("date-time", raises=ValueError)(_date_time)
        for name, schema in SCHEMAS.items():
            _VALIDATORS[name] = jsonschema.Draft202012Validator(schema, format_checker=checker)
    return _VALIDATORS


def _date_time(value: Any) -> bool:
    """The ``date-time`` format: an ISO 8601 date and time (raises ValueError when it is not)."""
    if isinstance(value, str):
        from datetime import datetime

        datetime.fromisoformat(value)
    return True


def conforming(
    answer: Answer, name: str, path: str, title: str, validator: Any, documents: dict[str, Any], fix: str
) -> ConformanceCheck:
    """The check of one answer against its schema (blocking: a worker thread)."""
    notes: tuple[str, ...] = ()
    if not answer.ok and name == "health" and health_of(json_or_none(answer.body)) is not None:
        # (an unhealthy agent may answer its report with a 503: the report is what counts)
        notes = (f"GET {path} answered HTTP {answer.status} with its report",)
    elif not answer.ok:
        return ConformanceCheck(
            name=name,
            title=title,
            passed=False,
            message=f"GET {path} answered HTTP {answer.status} {answer.phrase}".rstrip(),
            seen=(as_text(answer.body),) if answer.body else (),
            fix=f"{STANDARD} requires GET {path}: answer it with status 200",
        )
    try:
        document = json_of(answer.body)
    except ValueError as exc:
        return ConformanceCheck(
            name=name,
            title=title,
            passed=False,
            message=f"GET {path}: the answer is not JSON ({exc})",
            seen=(as_text(answer.body),),
            fix=fix,
        )
    found = list(itertools.islice(validator.iter_errors(document), MAX_PROBLEMS + 1))
    errors = sorted(found[:MAX_PROBLEMS], key=lambda e: (list(map(str, e.absolute_path)), e.message))
    if errors:
        count = len(errors)
        problems = (
            f"over {MAX_PROBLEMS} problems"
            if len(found) > MAX_PROBLEMS
            else f"{count} problem{'s' if count != 1 else ''}"
        )
        return ConformanceCheck(
            name=name,
            title=title,
            passed=False,
            message=f"GET {path} breaks the standard's schema ({problems})",
            seen=tuple(f"at {error.json_path}: {error.message}" for error in errors[:5])
            + (
                (f"... and {'over ' if len(found) > MAX_PROBLEMS else ''}{count - 5} more",)
                if count > 5
                else ()
            ),
            fix=fix,
        )
    documents[name] = document
    return ConformanceCheck(name=name, title=title, passed=True, message=summary(name, document), notes=notes)


def summary(name: str, document: dict[str, Any]) -> str:
    """What a conforming answer says, in a few words."""
    if name == "agent-card":
        tools = len(document["tools"])
        return f"agent {document['agent_id']!r} ({document['name']}), {tools} tool{'s' if tools != 1 else ''}"
    if name == "health":
        health = health_of(document)
        assert health is not None
        return f"status {health.status}" + (f": {health.detail}" if health.detail else "")
    names = [tool["name"] for tool in document["tools"]]
    shown = ", ".join(names[:SHOWN_TOOLS]) + (
        f" and {len(names) - SHOWN_TOOLS} more" if len(names) > SHOWN_TOOLS else ""
    )
    return f"{len(names)} tool{'s' if len(names) != 1 else ''}" + (f": {shown}" if names else "")


def with_notes(checks: list[ConformanceCheck], documents: dict[str, Any]) -> list[ConformanceCheck]:
    """Notes on answers that conform but disagree: a health status its error rate does not
    bear out, an agent card whose tools are not those of ``/mcp/tools``."""
    notes: dict[str, list[str]] = {}
    health = documents.get("health")
    if health is not None:
        rate, status = health["error_rate"], health["status"]
        expected = "healthy" if rate < 0.1 else "degraded" if rate <= 0.5 else "unhealthy"
        if status != expected:
            notes.setdefault("health", []).append(
                f"status {status} with error rate {rate:.0%}: the standard calls that {expected} "
                "(healthy below 10%, degraded 10-50%, unhealthy above 50%)"
            )
    card, tools = documents.get("agent-card"), documents.get("mcp-tools")
    if card is not None and tools is not None:
        listed = sorted({tool["name"] for tool in card["tools"]})
        served = sorted({tool["name"] for tool in tools["tools"]})
        if listed != served:
            notes.setdefault("mcp-tools", []).append(
                f"the agent card lists the tools {listed}, GET /mcp/tools {served}"
            )
    if not notes:
        return checks
    return [msgspec.structs.replace(c, notes=(*c.notes, *notes.get(c.name, ()))) for c in checks]
