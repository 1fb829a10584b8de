"""A failed check shows its evidence: what the agent produced next to what was expected, in
the message (one line, bounded) and in ``Check.details``; and ``behavior`` in its ``check:``
form."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from atp.core.errors import SuiteError
from atp.core.plugins import Plugins
from atp.core.protocol import (
    ErrorPayload,
    FileArtifact,
    Metrics,
    ProgressPayload,
    StructuredArtifact,
    ToolCallPayload,
    make_event,
)
from atp.core.results import Check
from atp.core.secrets import Masker
from atp.core.suite import load_suite
from atp.core.testing import evaluate, response, run_evaluator
from atp.core.text import masking
from atp.evaluators import artifact, behavior
from tests.conftest import write
from tests.facts import says

TID = "00000000-0000-0000-0000-000000000000"
SECRET = "hunter2-very-secret"


def one(evaluator: type, config: dict[str, Any], resp: Any, events: Any = ()) -> Check:
    (check,) = run_evaluator(evaluator, config, resp, events)
    return check


def masked_run(evaluator: type, config: dict[str, Any], resp: Any, events: Any = ()) -> Check:
    """The evaluator as the runner runs it: with the suite's secrets known."""

    async def go() -> list[Check]:
        with masking(Masker([SECRET])):
            return await evaluate(evaluator, config, resp, events)

    (check,) = anyio.run(go)
    return check


def one_line(check: Check, limit: int = 2000) -> None:
    assert "\n" not in check.message and len(check.message) < limit, check.message
    assert len(json.dumps(check.details)) < 4 * limit


# --- schema -----------------------------------------------------------------------------------


def test_schema_names_where_and_the_value_rejected() -> None:
    data = {"competitors": [{"name": "Zoom", "share": 2}], "odd key": 1}
    schema = {
        "type": "object",
        "required": ["competitors", "total"],
        "properties": {
            "competitors": {"type": "array", "items": {"properties": {"share": {"maximum": 1}}}},
        },
    }
    failed = one(artifact.Schema, {"name": "result", "schema": schema}, response(structured=data))
    assert not failed.passed
    says(
        failed.message,
        "result (structured)",
        "not valid against the schema",
        "at $: 'total' is a required property",
        '{"competitors": [{"name": "Zoom", "share": 2}], "odd key": 1}',
        "at $.competitors[0].share: 2 is greater than the maximum of 1",
    )
    assert failed.details is not None
    assert failed.details["errors"] == 2
    assert (failed.details["path"], failed.details["expected"]) == ("$", 'required: ["competitors", "total"]')
    second = failed.details["failures"][1]
    assert second == {
        "path": "$.competitors[0].share",
        "expected": "maximum: 1",
        "actual": "2",
        "message": "2 is greater than the maximum of 1",
    }


def test_schema_paths_quote_keys_that_are_not_names() -> None:
    data = {"a b": {"c": "x"}}
    schema = {"properties": {"a b": {"properties": {"c": {"type": "integer"}}}}}
    failed = one(artifact.Schema, {"name": "result", "schema": schema}, response(structured=data))
    assert failed.details is not None and failed.details["path"] == '$["a b"].c'
    assert "at $[\"a b\"].c: 'x' is not of type 'integer'" in failed.message


def test_schema_message_quoting_a_large_value_says_what_was_expected_instead() -> None:
    data = {"items": list(range(100_000))}
    schema = {"properties": {"items": {"maxItems": 3}}}
    started = time.perf_counter()
    failed = one(artifact.Schema, {"name": "result", "schema": schema}, response(structured=data))
    assert time.perf_counter() - started < 5
    one_line(failed)
    assert "at $.items: expected maxItems: 3; got [0, 1, 2, 3, 4," in failed.message
    assert failed.details is not None and failed.details["actual"].endswith("…")
    assert len(failed.details["actual"]) == artifact.VALUE_CHARS + 1


def test_preview_is_bounded_and_built_only_as_far_as_shown() -> None:
    assert artifact.preview({"a": [1, "x", None, True], "b": {}}) == '{"a": [1, "x", null, true], "b": {}}'
    assert artifact.preview([[], [[]], {"k": []}]) == '[[], [[]], {"k": []}]'
    deep: Any = []
    for _ in range(100_000):  # deeper than any recursion
        deep = [deep]
    assert artifact.preview(deep, 10) == "[" * 10 + "…"
    huge = [["x" * 1000] * 1000] * 1000  # a billion characters of JSON
    started = time.perf_counter()
    assert artifact.preview(huge, 20) == '[["' + "x" * 17 + "…"
    assert time.perf_counter() - started < 0.1


def test_preview_cut_leaves_no_part_of_a_secret() -> None:
    value = {"k": "a" * 100 + SECRET + "b" * 100}
    with masking(Masker([SECRET])):
        cut = artifact.preview(value, 110)
        whole = artifact.preview(value, 1000)
    assert "hunter" not in cut and cut.endswith("…") and len(cut) <= 111
    assert whole == '{"k": "' + "a" * 100 + "***" + "b" * 100 + '"}'
    with masking(Masker([SECRET])):
        across = artifact.preview("a" * 100 + SECRET, 105)
    assert "hun" not in across and "h…" not in across


# --- contains ---------------------------------------------------------------------------------

TEXT = "# Report\n\nline two\n" + "filler text. " * 50 + "\n1. Microsoft Teams (35%)\n" + "more. " * 50


def test_contains_shows_the_text_in_another_case() -> None:
    report = response(files={"r.md": TEXT})
    failed = one(artifact.Contains, {"path": "r.md", "pattern": "MICROSOFT teams"}, report)
    one_line(failed)
    assert "; in another case in r.md (line 5): '…" in failed.message
    assert "\\n1. Microsoft Teams (35%)\\nmore." in failed.message
    assert failed.details is not None
    assert failed.details["closest"] == "Microsoft Teams" and failed.details["line"] == 5
    assert failed.details["length"] == len(TEXT) and failed.details["path"] == "r.md"
    assert failed.details["expected"] == "MICROSOFT teams"
    excerpt = failed.details["excerpt"]
    assert excerpt.startswith("…") and excerpt.endswith("…") and "Microsoft Teams" in excerpt
    assert len(excerpt) <= 2 * artifact.EXCERPT_CONTEXT + len("Microsoft Teams") + 2


def test_contains_shows_the_longest_piece_of_the_pattern_found() -> None:
    report = response(files={"r.md": TEXT})
    failed = one(artifact.Contains, {"path": "r.md", "pattern": "Microsoft Team (40%)"}, report)
    assert "; closest: 'Microsoft Team' in r.md (line 5): '…" in failed.message
    assert failed.details is not None and failed.details["closest"] == "Microsoft Team"
    ignore_case = one(
        artifact.Contains,
        {"path": "r.md", "pattern": "MICROSOFT TEAM (40%)", "ignore_case": True},
        response(files={"r.md": TEXT}),
    )
    assert "; closest: 'Microsoft Team' in r.md (line 5)" in ignore_case.message


def test_contains_without_anything_close_shows_the_start_of_the_text() -> None:
    failed = one(artifact.Contains, {"path": "r.md", "pattern": "Slack"}, response(files={"r.md": TEXT}))
    one_line(failed)
    start = TEXT[: artifact.EXCERPT_CHARS].replace("\n", "\\n")
    says(failed.message, "'Slack'", "r.md", f"not found in {len(TEXT)} characters", f"begins: '{start}…'")
    assert failed.details is not None and failed.details["closest"] is None
    regex = one(
        artifact.Contains,
        {"path": "r.md", "pattern": "Micro.oft Zune", "regex": True},
        response(files={"r.md": TEXT}),
    )
    assert regex.message.endswith(f"r.md begins: '{start}…'")  # a regex is not looked for in pieces
    empty = one(artifact.Contains, {"path": "r.md", "pattern": "x"}, response(files={"r.md": ""}))
    says(empty.message, "'x'", "r.md", "not found in 0 characters", "r.md is empty")


def test_contains_excerpt_escapes_what_the_agent_wrote() -> None:
    text = "\x1b[2J\x1b]0;pwned\x07 everything passed \u202e"
    failed = one(
        artifact.Contains,
        {"name": "n", "pattern": "zzz"},
        response(artifacts=[StructuredArtifact(name="n", data={"t": text})]),
    )
    assert "\x1b" not in failed.message and "\u202e" not in failed.message and "\x07" not in failed.message


def test_contains_excerpt_never_shows_part_of_a_secret() -> None:
    text = "x" * 300 + SECRET + " Microsoft Teams " + SECRET + "y" * 300
    for pattern in ("Microsoft Zune", "microsoft teams"):
        report = response(files={"r.md": text})
        failed = masked_run(artifact.Contains, {"path": "r.md", "pattern": pattern}, report)
        assert failed.details is not None
        for shown in (failed.message, failed.details["excerpt"]):
            assert "hunter" not in shown and "secret" not in shown and "***" in shown, shown
    # the start of a text, cut inside a secret
    cut = masked_run(
        artifact.Contains,
        {"path": "r.md", "pattern": "zzz"},
        response(files={"r.md": "a" * (artifact.EXCERPT_CHARS - 5) + SECRET}),
    )
    assert cut.details is not None and "hun" not in cut.details["excerpt"] and "hun" not in cut.message


def test_contains_closest_match_is_bounded_work_on_a_large_text() -> None:
    big = "ab" * 8_000_000  # 16 MB, without the pattern, many near matches
    started = time.perf_counter()
    failed = one(
        artifact.Contains, {"path": "big", "pattern": "ab" * 100 + "c"}, response(files={"big": big})
    )
    assert time.perf_counter() - started < 10
    one_line(failed)
    assert failed.details is not None and failed.details["closest"] == "ab" * 100


def test_contains_keeps_the_closest_of_several_artifacts() -> None:
    resp = response(files={"a.md": "nothing here", "b.md": "see microsoft teams", "c.md": "Microsoft Team"})
    failed = one(artifact.Contains, {"path": "*.md", "pattern": "Microsoft Teams"}, resp)
    assert "in another case in b.md (line 1): 'see microsoft teams'" in failed.message


# --- sections, artifact_exists ----------------------------------------------------------------


def test_sections_lists_the_headings_found() -> None:
    report = "# Report\n## Overview\n### Pricing ###\n"
    config = {"path": "r.md", "sections": ["Overview", "Risks"]}
    failed = one(artifact.Sections, config, response(files={"r.md": report}))
    says(
        failed.message,
        "['Overview', 'Risks']",
        "missing ['Risks']",
        "1/2 present",
        "Report, Overview, Pricing",
    )
    assert failed.details == {
        "expected": ["Overview", "Risks"],
        "missing": ["Risks"],
        "found": ["Report", "Overview", "Pricing"],
    }
    none = one(artifact.Sections, {"path": "r.md", "sections": ["A"]}, response(files={"r.md": "text"}))
    assert "(0/1 present; no headings found)" in none.message
    many = "".join(f"# {'h' * 300}{i}\n" for i in range(10_000))
    flood = one(artifact.Sections, {"path": "r.md", "sections": ["A"]}, response(files={"r.md": many}))
    one_line(flood)
    assert flood.message.endswith(f"(and {10_000 - artifact.SHOWN_NAMES} more))")
    assert flood.details is not None and len(flood.details["found"]) == artifact.SHOWN_NAMES


def test_artifact_exists_lists_what_was_produced() -> None:
    resp = response(artifacts=[FileArtifact(path=f"f{i}.md") for i in range(100)])
    failed = one(artifact.ArtifactExists, {"path": "report.md"}, resp)
    assert failed.details is not None and failed.details["expected"] == "report.md"
    assert failed.details["produced"] == [f"f{i}.md" for i in range(artifact.SHOWN_NAMES)]
    nothing = one(artifact.ArtifactExists, {}, response())
    says(nothing.message, "any artifact", "no artifacts")
    assert nothing.details == {"produced": []}


# --- behavior ---------------------------------------------------------------------------------


def tool(sequence: int, name: str) -> Any:
    return make_event(TID, sequence, ToolCallPayload(tool=name))


TRACE = [tool(0, "search"), tool(1, "search"), tool(2, "fetch"), tool(3, "search")]


def test_tool_checks_show_the_tools_called_with_counts() -> None:
    missing = one(behavior.MustUseTools, {"tools": ["calculator"]}, response(), TRACE)
    says(missing.message, "calls to calculator", "not called: calculator", "search ×3, fetch ×1")
    assert missing.details == {
        "expected": ["calculator"],
        "missing": ["calculator"],
        "actual": {"search": 3, "fetch": 1},
    }
    forbidden = one(behavior.ForbiddenTools, {"tools": ["fetch"]}, response(), TRACE)
    assert forbidden.details == {
        "expected": ["fetch"],
        "actual": {"fetch": 1},
        "called": {"search": 3, "fetch": 1},
    }
    over = one(behavior.MaxToolCalls, {"limit": 2}, response(), TRACE)
    says(over.message, "at most 2 tool calls", "made 4", "search ×3, fetch ×1")
    assert over.details == {
        "expected": 2,
        "actual": 4,
        "called": {"search": 3, "fetch": 1},
        "reported_tool_calls": None,
    }


def test_tool_evidence_is_bounded_for_a_flood_of_tools() -> None:
    flood = [tool(i, f"tool_{i:05}_" + "t" * 200) for i in range(5000)]
    names = [f"tool_{i:05}_" + "t" * 200 for i in range(5000)]
    for evaluator, config in [
        (behavior.MustUseTools, {"tools": ["web_search"]}),
        (behavior.ForbiddenTools, {"tools": names}),
        (behavior.MaxToolCalls, {"limit": 1}),
    ]:
        failed = one(evaluator, config, response(), flood)
        assert not failed.passed and len(failed.message) < 3000
        details = dict(failed.details or {})
        details.pop("expected")  # the suite's own list
        assert len(json.dumps(details)) < 5000, evaluator
    over = one(behavior.MaxToolCalls, {"limit": 1}, response(), flood)
    assert over.message.endswith(f" and {5000 - behavior.SHOWN_TOOLS} more tools)")


def test_tool_names_are_escaped_in_the_one_line_message() -> None:
    forged = [tool(0, "search\n    ✓ all checks passed\x1b[2J")]
    failed = one(behavior.MaxToolCalls, {"limit": 0}, response(), forged)
    one_line(failed)
    assert "\x1b" not in failed.message and "search\\n    ✓ all checks passed\\e[2J ×1" in failed.message


def test_max_steps_says_where_the_count_comes_from() -> None:
    steps = [make_event(TID, 0, ProgressPayload(current_step=9))]
    failed = one(behavior.MaxSteps, {"limit": 5}, response(metrics=Metrics(total_steps=7)), steps)
    says(
        failed.message,
        "at most 5 steps",
        "took 9",
        "metrics.total_steps: 7",
        "current_step of its progress events: 9",
    )
    assert failed.details == {"expected": 5, "actual": 9, "reported_steps": 7, "progress_steps": 9}


def test_no_errors_quotes_the_errors() -> None:
    errors = [
        make_event(TID, i, ErrorPayload(error_type=f"type{i}", message=f"failure {i}\n" + "m" * 500))
        for i in range(7)
    ]
    failed = one(behavior.NoErrors, {}, response(), errors)
    one_line(failed)
    says(failed.message, "no errors", "has 7", "type0: 'failure 0\\nmmm")
    assert failed.message.endswith(" (and 4 more)")
    assert failed.details is not None and failed.details["actual"] == 7
    quoted = failed.details["errors"]
    assert len(quoted) == behavior.SHOWN_ERRORS
    assert quoted[0]["error_type"] == "type0" and len(quoted[0]["message"]) < 200


def test_no_errors_reads_a_long_trace_off_the_event_loop() -> None:
    events = [tool(i, "t") for i in range(behavior.INLINE_EVENTS + 10)]
    events.append(make_event(TID, len(events), ErrorPayload(message="late")))
    failed = one(behavior.NoErrors, {}, response(), events)
    says(failed.message, "no errors", "has 1", "error: 'late'")


# --- behavior, the check form -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "name", "passed"),
    [
        ({"check": "no_errors"}, "behavior:no_errors", True),
        ({"check": "must_use_tools", "tools": ["search"]}, "behavior:must_use_tools", True),
        ({"check": "must_use_tools", "tools": ["calculator"]}, "behavior:must_use_tools", False),
        ({"check": "forbidden_tools", "tools": ["fetch"]}, "behavior:forbidden_tools", False),
        ({"check": "max_tool_calls", "limit": 4}, "behavior:max_tool_calls", True),
        ({"check": "max_tool_calls", "limit": 3}, "behavior:max_tool_calls", False),
        ({"check": "max_steps", "limit": 0}, "behavior:max_steps", True),  # no steps reported
    ],
)
def test_behavior_check_form(config: dict[str, Any], name: str, passed: bool) -> None:
    checks = run_evaluator(behavior.Behavior, config, response(), TRACE)
    assert [(c.name, c.passed) for c in checks] == [(name, passed)]


def test_behavior_check_form_is_the_key_form() -> None:
    converted = msgspec.convert({"check": "max_steps", "limit": 5}, behavior.BehaviorConfig)
    assert converted.max_steps == 5 and converted.tools is None and converted.limit is None
    errors = [make_event(TID, 0, ErrorPayload(message="x", recoverable=True))]
    config = {"check": "no_errors", "allow_recoverable": True}
    lenient = run_evaluator(behavior.Behavior, config, response(), errors)
    assert lenient[0].passed


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"check": "no_error"},
            "unknown check 'no_error' in 'check'; behavior checks are must_use_tools, "
            "forbidden_tools, min_tool_calls, max_tool_calls, max_steps, no_errors",
        ),
        ({"check": "must_use_tools"}, "check: must_use_tools needs 'tools'"),
        ({"check": "max_steps"}, "check: max_steps needs 'limit'"),
        ({"check": "must_use_tools", "tools": []}, "'tools' names no tool"),
        ({"check": "no_errors", "limit": 3}, "'limit' does not apply to check: no_errors"),
        ({"check": "max_steps", "tools": ["a"], "limit": 1}, "'tools' does not apply to check: max_steps"),
        (
            {"check": "no_errors", "max_steps": 3},
            "give 'check: no_errors' alone or the checks as keys, not both",
        ),
        ({"tools": ["a"]}, "'tools' belongs to the check form"),
        ({"limit": 2}, "'limit' belongs to the check form"),
        ({"check": "max_steps", "limit": -1}, "Expected `int` >= 0"),
    ],
)
def test_behavior_check_form_refuses_what_it_cannot_run(config: dict[str, Any], message: str) -> None:
    with pytest.raises(msgspec.ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        msgspec.convert(config, behavior.BehaviorConfig)


def test_behavior_check_form_in_a_suite(tmp_path: Path, plugins: Plugins) -> None:
    good = (
        "test_suite: s\ntests:\n  - id: t\n    task: {description: x}\n    assertions:\n"
        "      - type: behavior\n        config:\n          check: no_errors\n"
        "      - type: behavior\n        config: {check: must_use_tools, tools: [search]}\n"
    )
    suite = load_suite(write(tmp_path / "good.yaml", good), plugins.evaluators)
    first, second = suite.tests[0].assertions
    assert first.config.no_errors is True and second.config.must_use_tools == ["search"]
    bad = good.replace("check: no_errors", "check: no_erors")
    with pytest.raises(SuiteError) as info:
        load_suite(write(tmp_path / "bad.yaml", bad), plugins.evaluators)
    assert info.value.line == 7 and info.value.path == "tests[0].assertions[0].config"
    assert "unknown check 'no_erors' in 'check'" in str(info.value)
