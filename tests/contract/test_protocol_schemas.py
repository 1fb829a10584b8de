"""ATP's Structs held to the protocol document's JSON Schemas, in both directions:
every schema-valid fixture decodes (and round-trips), every invalid one is rejected, and
everything ATP itself emits is valid against the schemas."""

from __future__ import annotations

import json
import uuid
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest

from atp.core import protocol
from atp.core.errors import ProtocolError
from atp.core.protocol import (
    ATPResponse,
    ErrorPayload,
    LLMRequestPayload,
    ProgressPayload,
    ReasoningPayload,
    ToolCallPayload,
    decode_event,
    decode_request,
    decode_response,
    encode,
    make_event,
)
from tests.conftest import FIXTURES

SCHEMAS = {
    kind: json.loads(resources.files("atp.core").joinpath(f"schemas/{kind}.schema.json").read_text())
    for kind in ("request", "response", "event")
}
DECODERS = {"request": decode_request, "response": decode_response, "event": decode_event}
FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("uuid", raises=ValueError)
def _is_uuid(value: object) -> bool:
    return not isinstance(value, str) or str(uuid.UUID(value)) == value.lower()


def validator(kind: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(SCHEMAS[kind], format_checker=FORMATS)


def fixtures(kind: str, validity: str) -> list[Path]:
    return sorted((FIXTURES / f"{kind}s" / validity).glob("*.json"))


def cases(validity: str) -> list[Any]:
    return [
        pytest.param(kind, path, id=f"{kind}/{path.stem}")
        for kind in DECODERS
        for path in fixtures(kind, validity)
    ]


def test_formats_are_checked() -> None:
    """The date-time check needs rfc3339-validator; without it bad timestamps would pass."""
    assert "date-time" in FORMATS.checkers and "uuid" in FORMATS.checkers


@pytest.mark.parametrize(("kind", "path"), cases("valid"))
def test_valid_fixture_is_schema_valid_and_decodes(kind: str, path: Path) -> None:
    raw = path.read_bytes()
    validator(kind).validate(json.loads(raw))
    message = DECODERS[kind](raw)
    again = DECODERS[kind](encode(message))
    assert again == message
    # what ATP re-encodes is schema-valid too
    validator(kind).validate(msgspec.json.decode(encode(message)))


@pytest.mark.parametrize(("kind", "path"), cases("invalid"))
def test_invalid_fixture_is_rejected_by_schema_and_decoder(kind: str, path: Path) -> None:
    raw = path.read_bytes()
    assert list(validator(kind).iter_errors(json.loads(raw))), f"{path.name} is schema-valid"
    with pytest.raises(ProtocolError):
        DECODERS[kind](raw)


def test_every_fixture_directory_has_cases() -> None:
    for kind in DECODERS:
        assert fixtures(kind, "valid") and fixtures(kind, "invalid"), kind


@pytest.mark.parametrize(
    "payload",
    [
        ToolCallPayload(
            tool="web_search", input={"q": "x"}, output={"n": 1}, duration_ms=3.5, status="success"
        ),
        LLMRequestPayload(model="m", input_tokens=1, output_tokens=2, duration_ms=1, temperature=0.0),
        ReasoningPayload(thought="t", plan=["a"], step="s"),
        ProgressPayload(current_step=1, total_steps=2, percentage=50, message="half"),
        ErrorPayload(error_type="tool_error", message="m", recoverable=True, retry_after_ms=5),
    ],
)
def test_events_atp_makes_are_schema_valid(payload: msgspec.Struct) -> None:
    event = make_event("550e8400-e29b-41d4-a716-446655440000", 3, payload)
    validator("event").validate(json.loads(encode(event)))
    assert decode_event(encode(event)) == event


def test_responses_atp_synthesizes_are_schema_valid() -> None:
    """The runner writes a response of its own for a timeout or a crash."""
    from atp.core.trace import TraceSummary

    response = ATPResponse(
        version="1.0",
        task_id="550e8400-e29b-41d4-a716-446655440000",
        status="timeout",
        artifacts=[],
        metrics=TraceSummary(events=2, tool_calls={"a": 1}).metrics(2.0),
        error="timed out after 2 s; the agent was stopped",
    )
    validator("response").validate(json.loads(encode(response)))


def test_unknown_event_type_of_a_higher_minor_version_is_kept() -> None:
    """The 1.0 schema's enum rejects it, but the protocol's versioning rules say a platform
    accepts what a higher minor version adds: ATP keeps it as an UnknownEvent."""
    raw = json.dumps(
        {
            "version": "1.1",
            "task_id": "550e8400-e29b-41d4-a716-446655440000",
            "timestamp": "2025-01-21T10:30:45Z",
            "sequence": 0,
            "event_type": "memory_write",
            "payload": {"key": "k"},
        }
    )
    event = decode_event(raw)
    assert isinstance(event, protocol.UnknownEvent)
    assert event.event_type == "memory_write" and event.payload == {"key": "k"}
    assert json.loads(encode(event)) == json.loads(raw)


def test_requests_the_runner_builds_are_schema_valid(tmp_path: Path) -> None:
    from atp.core.config import agent_definitions, load_config, resolve_agent
    from atp.core.runner import Runner
    from atp.core.suite import load_suite
    from tests.conftest import EXAMPLES, builtin_plugins

    plugins = builtin_plugins()
    suite = load_suite(EXAMPLES / "quickstart" / "suite.yaml", plugins.evaluators)
    agent = resolve_agent(
        agent_definitions(load_config(cwd=tmp_path), suite)["research-agent"], plugins.adapters
    )
    runner = Runner(plugins, suite, suite.tests, agent, run_root=tmp_path)
    for test in suite.tests:
        request = json.loads(encode(runner.build_request(test, 1)))
        validator("request").validate(request)
        assert request["constraints"]["timeout_seconds"] >= 1
