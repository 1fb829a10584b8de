from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from atp.core.evaluator import EvalContext
from atp.core.protocol import (
    ErrorPayload,
    FileArtifact,
    Metrics,
    ProgressPayload,
    ReferenceArtifact,
    StructuredArtifact,
    ToolCallPayload,
    make_event,
)
from atp.core.testing import make_test, response, run_evaluator
from atp.core.trace import Trace
from atp.evaluators import artifact, behavior
from tests.facts import says

REPORT = "# Report\n\n## Overview\ntext\n\n## Competitors ##\n1. Microsoft Teams\n"


RESP = response(
    files={"out/report.md": REPORT},
    structured={"competitors": [{"name": "Zoom", "share": 0.2}]},
)


def one(evaluator: type, config: dict, resp=RESP, events=()):  # type: ignore[no-untyped-def]
    (check,) = run_evaluator(evaluator, config, resp, events)
    return check


def test_artifact_exists() -> None:
    assert one(artifact.ArtifactExists, {"path": "out/report.md"}).passed
    assert one(artifact.ArtifactExists, {"path": "./out/report.md"}).passed
    assert one(artifact.ArtifactExists, {"path": "out/*.md"}).passed
    assert one(artifact.ArtifactExists, {"name": "result"}).passed
    assert one(artifact.ArtifactExists, {}).passed
    missing = one(artifact.ArtifactExists, {"path": "report.pdf"})
    assert not missing.passed and missing.score == 0.0
    says(missing.message, "artifact 'report.pdf'", "produced out/report.md, result (structured)")
    assert missing.name == "artifact_exists:report.pdf"
    assert not one(artifact.ArtifactExists, {}, response()).passed


def test_target_rejects_path_and_name_together() -> None:
    with pytest.raises(msgspec.ValidationError, match="not both"):
        msgspec.convert({"path": "a", "name": "b"}, artifact.Target)


def test_contains_substring_regex_and_case() -> None:
    hit = one(artifact.Contains, {"path": "out/report.md", "pattern": "Microsoft Teams"})
    assert hit.passed
    says(hit.message, "out/report.md", "'Microsoft Teams'", "line 7")
    assert one(artifact.Contains, {"pattern": r"\d\. \w+", "regex": True}).passed
    assert one(artifact.Contains, {"pattern": "microsoft", "ignore_case": True}).passed
    assert not one(artifact.Contains, {"pattern": "microsoft"}).passed
    miss = one(artifact.Contains, {"name": "result", "pattern": "Slack"})
    assert not miss.passed
    says(miss.message, "'Slack'", "result (structured)", "not found")
    assert one(artifact.Contains, {"name": "result", "pattern": '"Zoom"'}).passed


def test_contains_reads_files_from_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "big.csv").write_text("a,b\n1,needle\n")
    resp = response(artifacts=[ReferenceArtifact(path="big.csv"), FileArtifact(path="gone.txt")])
    ctx_checks = run_evaluator(artifact.Contains, {"path": "big.csv", "pattern": "needle"}, resp)
    assert not ctx_checks[0].passed  # no workspace: the relative path is not looked up elsewhere
    import anyio

    evaluator = artifact.Contains()
    config = msgspec.convert({"path": "big.csv", "pattern": "needle"}, artifact.ContainsConfig)
    ctx = EvalContext(test=make_test(), request=None, response=resp, trace=Trace.of([]), workspace=tmp_path)  # type: ignore[arg-type]
    (found,) = anyio.run(evaluator.evaluate, ctx, config)
    assert found.passed


def test_schema_on_structured_data_and_json_files() -> None:
    schema = {
        "type": "object",
        "required": ["competitors"],
        "properties": {"competitors": {"type": "array", "minItems": 2}},
    }
    bad = one(artifact.Schema, {"name": "result", "schema": schema})
    assert not bad.passed and "at $.competitors: [{'name': 'Zoom', 'share': 0.2}] is too short" in bad.message
    assert bad.details is not None and bad.details["errors"] == 1
    ok = one(artifact.Schema, {"name": "result", "schema": {"type": "object"}})
    assert ok.passed
    json_file = response(files={"data.json": '{"n": 3}', "notes.txt": "not json"})
    assert one(
        artifact.Schema,
        {"path": "data.json", "schema": {"properties": {"n": {"type": "integer"}}}},
        json_file,
    ).passed
    not_json = one(artifact.Schema, {"path": "notes.txt", "schema": {}}, json_file)
    assert not not_json.passed and "notes.txt is not JSON" in not_json.message
    with pytest.raises(msgspec.ValidationError, match="not a valid JSON Schema"):  # refused at load
        msgspec.convert({"name": "result", "schema": {"type": "nonsense"}}, artifact.SchemaConfig)
    made_otherwise = msgspec.convert({"name": "result", "schema": {}}, artifact.SchemaConfig)
    made_otherwise.schema = {"type": "nonsense"}
    invalid_schema = one(artifact.Schema, made_otherwise)
    assert not invalid_schema.passed and "not a valid JSON Schema" in invalid_schema.message
    several = run_evaluator(artifact.Schema, {"path": "*", "schema": {"type": "object"}}, json_file)
    assert [c.name for c in several] == ["schema:data.json", "schema:notes.txt"]


def test_sections_scores_the_fraction_present() -> None:
    ok = one(artifact.Sections, {"path": "out/report.md", "sections": ["overview", "Competitors"]})
    assert ok.passed and ok.score == 1.0
    partial = one(
        artifact.Sections, {"path": "out/report.md", "sections": ["Overview", "Summary", "Risks", "Report"]}
    )
    assert not partial.passed and partial.score == 0.5
    assert "missing ['Summary', 'Risks']" in partial.message
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"sections": []}, artifact.SectionsConfig)


TID = "00000000-0000-0000-0000-000000000000"
TRACE = [
    make_event(TID, 0, ToolCallPayload(tool="web_search")),
    make_event(TID, 1, ToolCallPayload(tool="web_search")),
    make_event(TID, 2, ToolCallPayload(tool="file_write")),
    make_event(TID, 3, ErrorPayload(error_type="tool_error", message="rate limited", recoverable=True)),
    make_event(TID, 4, ProgressPayload(current_step=6)),
]
PLAIN = response()


def test_must_use_and_forbidden_tools() -> None:
    ok = one(behavior.MustUseTools, {"tools": ["web_search"]}, PLAIN, TRACE)
    assert ok.passed
    says(ok.message, "called", "web_search")
    missing = one(behavior.MustUseTools, {"tools": ["web_search", "calculator"]}, PLAIN, TRACE)
    assert not missing.passed and missing.score == 0.5
    says(missing.message, "web_search, calculator", "not called: calculator", "web_search ×2, file_write ×1")
    forbidden = one(behavior.ForbiddenTools, {"tools": ["file_write", "shell"]}, PLAIN, TRACE)
    assert not forbidden.passed
    says(
        forbidden.message,
        "no calls to file_write, shell",
        "called file_write (1 call)",
        "web_search ×2, file_write ×1",
    )
    assert one(behavior.ForbiddenTools, {"tools": ["shell"]}, PLAIN, TRACE).passed


def test_limits_use_trace_and_reported_metrics() -> None:
    over = one(behavior.MaxToolCalls, {"limit": 2}, PLAIN, TRACE)
    assert not over.passed
    says(over.message, "at most 2 tool calls", "made 3", "web_search ×2, file_write ×1")
    reported = response(metrics=Metrics(tool_calls=15, total_steps=3))
    says(
        one(behavior.MaxToolCalls, {"limit": 10}, reported).message,
        "at most 10 tool calls",
        "made 15",
        "metrics.tool_calls",
        "no tool_call events",
    )
    says(
        one(behavior.MaxSteps, {"limit": 5}, PLAIN, TRACE).message,
        "at most 5 steps",
        "took 6",
        "metrics.total_steps: none",
        "current_step of its progress events: 6",
    )
    assert one(behavior.MaxSteps, {"limit": 5}, reported).passed
    says(one(behavior.MaxSteps, {"limit": 5}, PLAIN).message, "no steps", "limit 5")


def test_min_tool_calls_counts_calls_of_any_tool() -> None:
    says(one(behavior.MinToolCalls, {"limit": 3}, PLAIN, TRACE).message, "3 tool calls", "at least 3")
    short = one(behavior.MinToolCalls, {"limit": 4}, PLAIN, TRACE)
    assert not short.passed
    says(short.message, "at least 4 tool calls", "made 3")
    none = one(behavior.MinToolCalls, {"limit": 1}, PLAIN, [])
    says(none.message, "at least 1 tool calls", "made 0")
    (made,) = run_evaluator(behavior.Behavior, {"check": "min_tool_calls", "limit": 1}, PLAIN, TRACE)
    assert made.name == "behavior:min_tool_calls" and made.passed


def test_no_errors() -> None:
    failed = one(behavior.NoErrors, {}, PLAIN, TRACE)
    assert not failed.passed
    says(failed.message, "no errors", "has 1", "tool_error: 'rate limited'")
    assert one(behavior.NoErrors, {"allow_recoverable": True}, PLAIN, TRACE).passed
    assert one(behavior.NoErrors, {}, PLAIN, []).passed


def test_behavior_combines_checks() -> None:
    checks = run_evaluator(
        behavior.Behavior,
        {
            "must_use_tools": ["web_search"],
            "forbidden_tools": ["shell"],
            "max_tool_calls": 10,
            "max_steps": 3,
            "no_errors": True,
        },
        PLAIN,
        TRACE,
    )
    assert [(c.name, c.passed) for c in checks] == [
        ("behavior:must_use_tools", True),
        ("behavior:forbidden_tools", True),
        ("behavior:max_tool_calls", True),
        ("behavior:max_steps", False),
        ("behavior:no_errors", False),
    ]
    with pytest.raises(msgspec.ValidationError, match="at least one of"):
        msgspec.convert({}, behavior.BehaviorConfig)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"must_use_tool": ["x"]}, behavior.BehaviorConfig)


def test_structured_artifact_text_is_json() -> None:
    resp = response(artifacts=[StructuredArtifact(name="n", data={"k": "välue"})])
    assert one(artifact.Contains, {"name": "n", "pattern": '"k": "välue"'}, resp).passed
