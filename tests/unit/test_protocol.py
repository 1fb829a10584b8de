from __future__ import annotations

import json
from datetime import datetime, timezone

import msgspec
import pytest

from atp.core import protocol
from atp.core.errors import ProtocolError
from atp.core.protocol import (
    ATPRequest,
    ATPResponse,
    Constraints,
    FileArtifact,
    Metrics,
    ProgressPayload,
    ReferenceArtifact,
    StructuredArtifact,
    Task,
    ToolCallEvent,
    check_version,
    decode_event,
    decode_request,
    decode_response,
    encode,
    make_event,
)
from tests.conftest import FIXTURES
from tests.facts import says

TID = "550e8400-e29b-41d4-a716-446655440000"


def test_spec_request_decodes_with_every_field() -> None:
    request = decode_request((FIXTURES / "requests/valid/spec_example.json").read_bytes())
    assert request.task.input_data == {"company": "Slack", "market": "enterprise communication"}
    assert request.constraints == Constraints(
        max_steps=50,
        max_tokens=100000,
        timeout_seconds=300,
        allowed_tools=["web_search", "file_write"],
        budget_usd=1.0,
    )
    assert request.context is not None and request.context.environment == {"API_KEY": "***"}
    assert request.metadata == {"test_id": "competitor_analysis_001", "run_number": 1, "total_runs": 5}


def test_spec_response_artifacts_are_a_tagged_union() -> None:
    response = decode_response((FIXTURES / "responses/valid/spec_artifact_types.json").read_bytes())
    kinds = [type(a) for a in response.artifacts]
    assert kinds == [FileArtifact, StructuredArtifact, ReferenceArtifact]
    assert json.loads(encode(response))["artifacts"][0]["type"] == "file"


def test_each_event_type_gets_its_typed_payload() -> None:
    for path in sorted((FIXTURES / "events/valid").glob("spec_*.json")):
        event = decode_event(path.read_bytes())
        assert type(event) is protocol.EVENT_TYPES[event.event_type], path.name
        assert isinstance(event.payload, msgspec.Struct)


def test_encoding_omits_unset_fields_but_keeps_version() -> None:
    request = ATPRequest(version="1.0", task_id=TID, task=Task(description="x"))
    assert json.loads(encode(request)) == {"version": "1.0", "task_id": TID, "task": {"description": "x"}}


def test_higher_minor_version_with_unknown_fields_is_accepted() -> None:
    request = decode_request((FIXTURES / "requests/valid/higher_minor_with_unknown_fields.json").read_bytes())
    assert request.version == "1.4"
    assert request.constraints is not None and request.constraints.max_steps == 3


@pytest.mark.parametrize("version", ["2.0", "0.9", "10.1"])
def test_another_major_version_is_rejected_clearly(version: str) -> None:
    body = {"version": version, "task_id": TID, "status": "completed", "artifacts": [], "metrics": {}}
    with pytest.raises(ProtocolError) as info:
        decode_response(json.dumps(body))
    says(str(info.value), f"version {version}", "1.x")


def test_malformed_version_is_rejected() -> None:
    with pytest.raises(ProtocolError) as info:
        check_version("one", "ATP request")
    says(str(info.value), "ATP request", "'one'", "MAJOR.MINOR")


def test_decode_errors_name_message_field_and_expectation() -> None:
    body = {
        "version": "1.0",
        "task_id": TID,
        "status": "completed",
        "artifacts": [],
        "metrics": {"total_tokens": "many"},
    }
    with pytest.raises(ProtocolError) as info:
        decode_response(json.dumps(body))
    says(str(info.value), "ATP response", "`int | null`", "`str`", "`$.metrics.total_tokens`")
    with pytest.raises(ProtocolError) as info:
        decode_request(b"{not json")
    says(str(info.value), "ATP request", "JSON")


def test_known_event_type_with_bad_payload_is_not_hidden_as_unknown() -> None:
    body = {
        "version": "1.0",
        "task_id": TID,
        "timestamp": "2025-01-01T00:00:00Z",
        "sequence": 0,
        "event_type": "tool_call",
        "payload": {"input": {}},
    }
    with pytest.raises(ProtocolError) as info:
        decode_event(json.dumps(body))
    says(str(info.value), "ATP event", "`tool`", "`$.payload`")


def test_unknown_event_type_with_another_major_version_is_rejected() -> None:
    body = {
        "version": "3.0",
        "task_id": TID,
        "timestamp": "2025-01-01T00:00:00Z",
        "sequence": 0,
        "event_type": "brand_new",
        "payload": {},
    }
    with pytest.raises(ProtocolError, match="version 3.0"):
        decode_event(json.dumps(body))


def test_make_event_picks_the_type_from_the_payload() -> None:
    stamp = datetime(2026, 1, 1, tzinfo=timezone.utc)
    event = make_event(TID, 7, ProgressPayload(percentage=50), timestamp=stamp)
    assert event.event_type == "progress" and event.sequence == 7 and event.timestamp == stamp
    assert json.loads(encode(event))["event_type"] == "progress"
    assert make_event(TID, 0, protocol.ToolCallPayload(tool="t")).timestamp.tzinfo is not None


def test_response_round_trip_keeps_error_code_extension() -> None:
    response = decode_response((FIXTURES / "responses/valid/spec_error_codes.json").read_bytes())
    assert response.error_code == "TOOL_NOT_FOUND"
    assert response.error_details == {
        "tool": "database_query",
        "available_tools": ["web_search", "file_write"],
    }
    assert decode_response(encode(response)) == response


def test_struct_construction() -> None:
    response = ATPResponse(version="1.0", task_id=TID, status="completed", artifacts=[], metrics=Metrics())
    assert json.loads(encode(response)) == {
        "version": "1.0",
        "task_id": TID,
        "status": "completed",
        "artifacts": [],
        "metrics": {},
    }
    event = ToolCallEvent(
        version="1.0",
        task_id=TID,
        timestamp=datetime.now(timezone.utc),
        sequence=0,
        payload=protocol.ToolCallPayload(tool="x"),
    )
    assert decode_event(encode(event)) == event
