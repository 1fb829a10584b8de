"""``tool_called_with`` and ``tool_sequence``: what matches, what a failure shows, what the suite
may not say, and agents whose calls are made to trouble them."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from atp.core.errors import SuiteError
from atp.core.evaluator import EvalContext
from atp.core.plugins import Plugins
from atp.core.protocol import ProgressPayload, ToolCallPayload, make_event
from atp.core.results import Check
from atp.core.secrets import Masker
from atp.core.suite import load_suite
from atp.core.testing import evaluate, make_test, response, run_evaluator
from atp.core.text import masking
from atp.core.trace import Trace, TraceSummary
from atp.evaluators import tools
from atp.evaluators.tools import ToolCalledWith, ToolSequence
from tests.conftest import write

TID = "00000000-0000-0000-0000-000000000000"
SECRET = "hunter2-very-secret"


def calls(*items: tuple[str, Any]) -> list[Any]:
    """Events of tool calls ``(tool, input)``, in order, with a progress event in between."""
    events: list[Any] = []
    for tool, value in items:
        events.append(make_event(TID, len(events), ToolCallPayload(tool=tool, input=value)))
        events.append(make_event(TID, len(events), ProgressPayload(current_step=len(events))))
    return events


def called_with(config: dict[str, Any], events: list[Any], settings: dict[str, Any] | None = None) -> Check:
    (check,) = run_evaluator(ToolCalledWith(settings), config, response(), events)
    return check


def sequence(tools_: list[str], mode: str | None, events: list[Any]) -> Check:
    config: dict[str, Any] = {"tools": tools_} if mode is None else {"tools": tools_, "mode": mode}
    (check,) = run_evaluator(ToolSequence, config, response(), events)
    return check


def one_line(check: Check, limit: int = 3000) -> None:
    """A message is one bounded line without raw control characters; details are bounded."""
    assert "\n" not in check.message and len(check.message) < limit, check.message
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or c in "\u202e\u2066" for c in check.message)
    assert len(json.dumps(check.details)) < 4 * limit


SEARCHES = calls(
    ("search", {"query": "weather", "filters": {"region": "eu", "max": 10}, "urls": ["a", "b"]}),
    ("fetch", {"url": "https://example.org"}),
    ("search", {"query": "climate", "filters": {"region": "us-east", "max": 5}, "urls": ["c"]}),
    ("summarize", "plain text, not an object"),
)


# --- tool_called_with: what matches ---------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "passed"),
    [
        ({"query": "climate"}, True),
        ({"query": "Climate"}, False),  # text compares exactly
        ({"filters": {"region": "us-east"}}, True),  # a nested mapping is a subset too
        ({"query": "climate", "filters": {"region": "eu"}}, False),  # both keys of one call
        ({"filters": {"max": 5.0}}, True),  # numbers by value
        ({"urls": ["c"]}, True),
        ({"urls": ["a"]}, False),  # a list: as many items, in order
        ({"urls": ["b", "a"]}, False),
        ({"nothing": None}, False),  # null only for a key that is there
    ],
)
def test_input_is_a_subset_of_a_call_s_input(expected: dict[str, Any], passed: bool) -> None:
    check = called_with({"tool": "search", "input": expected}, SEARCHES)
    assert check.passed is passed, check.message
    assert check.name == "tool_called_with:search"


def test_booleans_null_and_mappings_inside_lists() -> None:
    events = calls(("t", {"flag": 1, "none": None, "rows": [{"id": 1, "extra": "x"}, {"id": 2}]}))
    assert not called_with({"tool": "t", "input": {"flag": True}}, events).passed  # true is not 1
    assert called_with({"tool": "t", "input": {"none": None}}, events).passed
    assert called_with({"tool": "t", "input": {"rows": [{"id": 1}, {"id": 2}]}}, events).passed
    wrong = called_with({"tool": "t", "input": {"rows": [{"id": 1}, {"id": 3}]}}, events)
    assert not wrong.passed and "(rows.1.id: expected 3, got 2)" in wrong.message


def test_input_sent_as_json_text_is_read_as_the_object() -> None:
    events = calls(("search", json.dumps({"query": "climate", "n": 3})), ("search", "{not json"))
    assert called_with({"tool": "search", "input": {"query": "climate"}}, events).passed
    assert called_with({"tool": "search", "input_regex": {"n": "^3$"}}, events).passed
    text = called_with({"tool": "search", "input": {"query": "x"}, "call": 2}, events)
    assert 'query: missing (the input is text "{not json")' in text.message


def test_input_regex_names_fields_by_dotted_paths() -> None:
    assert called_with({"tool": "search", "input_regex": {"filters.region": "^us-"}}, SEARCHES).passed
    assert called_with({"tool": "search", "input_regex": {"urls.1": "^b$"}}, SEARCHES).passed
    assert called_with({"tool": "search", "input_regex": {"filters.max": "^10$"}}, SEARCHES).passed  # as JSON
    assert called_with({"tool": "search", "input_regex": {"filters": '"max": 5'}}, SEARCHES).passed
    assert called_with({"tool": "search", "input_regex": {"query": "(?i)CLIM"}}, SEARCHES).passed
    both = {"tool": "search", "input": {"query": "weather"}, "input_regex": {"filters.region": "^us"}}
    failed = called_with(both, SEARCHES)  # each call meets one of the two conditions
    assert not failed.passed and failed.score == 0.5
    assert failed.message.startswith(
        """expected a call of search where input has {"query": "weather"}, filters.region matches '^us'; """
        "none of its 2 calls matches: call 1 "
    )
    assert """(filters.region: "eu" does not match '^us')""" in failed.message
    assert """(query: expected "weather", got "climate")""" in failed.message
    missing = called_with({"tool": "search", "input_regex": {"filters.city": "."}}, SEARCHES)
    assert "(filters.city: missing)" in missing.message
    assert called_with({"tool": "search", "input_regex": {"urls.7": "."}}, SEARCHES).passed is False


def test_call_picks_one_call_by_position() -> None:
    climate = {"tool": "search", "input": {"query": "climate"}}
    assert not called_with({**climate, "call": 1}, SEARCHES).passed
    assert called_with({**climate, "call": 2}, SEARCHES).passed
    last = called_with({**climate, "call": -1}, SEARCHES)
    assert last.passed and last.message.startswith('call 2 of search matches: {"query": "climate"')
    first = called_with({**climate, "call": -2}, SEARCHES)
    assert not first.passed
    assert first.message.startswith(
        """expected call -2 (2 from the end) of search where input has {"query": "climate"}; it does not """
        """match: call 1 {"query": "weather", """
    )
    assert first.details is not None and first.details["call"] == 1
    beyond = called_with({**climate, "call": 3}, SEARCHES)
    assert not beyond.passed and "search was called only 2 times: call 1 {" in beyond.message
    before = called_with({**climate, "call": -3}, SEARCHES)
    assert not before.passed and "search was called only 2 times" in before.message


def test_times_and_min_times_count_the_matching_calls() -> None:
    region = {"tool": "search", "input_regex": {"filters.region": "^(eu|us-east)$"}}
    exact = called_with({**region, "times": 2}, SEARCHES)
    assert exact.passed and exact.message.startswith("2 of its 2 calls match (calls 1, 2)")
    too_many = called_with({**region, "times": 1}, SEARCHES)
    assert not too_many.passed and too_many.score == 0.5
    assert "; 2 of its 2 calls match (calls 1, 2)" in too_many.message
    at_least = called_with({"tool": "search", "input": {"query": "climate"}, "min_times": 2}, SEARCHES)
    assert not at_least.passed and at_least.score == 0.5
    assert at_least.message.endswith(
        '1 of its 2 calls matches (call 2); not matching: call 1 {"query": "weather", "filters": '
        '{"region": "eu", "max": 10}, "urls": ["a", "b"]} (query: expected "climate", got "weather")'
    )
    never = {"tool": "search", "input": {"query": "passwords"}, "times": 0}
    assert called_with(never, SEARCHES).passed
    assert called_with({"tool": "delete", "input": {"all": True}, "times": 0}, SEARCHES).passed
    broken = called_with({**never, "input": {"query": "climate"}}, SEARCHES)
    assert not broken.passed and broken.score == 0.0
    assert broken.message.startswith(
        """expected no call of search where input has {"query": "climate"}; 1 of"""
    )


def test_a_tool_never_called_says_what_was_called() -> None:
    check = called_with({"tool": "calculator", "input": {"x": 1}}, SEARCHES)
    assert check.message == (
        """expected a call of calculator where input has {"x": 1}; calculator was not called """
        "(called: search ×2, fetch ×1, summarize ×1)"
    )
    assert check.details == {
        "tool": "calculator",
        "expected": {"input": {"x": 1}},
        "calls": 0,
        "matching": 0,
        "matched_calls": [],
        "inputs": [],
    }
    nothing = called_with({"tool": "search", "input": {"q": 1}}, [])
    assert nothing.message.endswith("search was not called (called: none)")


def test_a_failure_keeps_the_calls_of_the_tool_in_its_details() -> None:
    events = calls(*[("search", {"query": f"q{i}"}) for i in range(25)], ("other", {"query": "x"}))
    check = called_with({"tool": "search", "input": {"query": "x"}}, events)
    assert "none of its 25 calls matches: call 1" in check.message and check.message.endswith("(and 22 more)")
    assert check.details is not None and check.details["calls"] == 25
    inputs = check.details["inputs"]
    assert len(inputs) == tools.DETAIL_CALLS
    assert inputs[3] == {
        "call": 4,
        "input": '{"query": "q3"}',
        "matched": False,
        "mismatches": ['query: expected "x", got "q3"'],
    }


def test_a_regex_that_takes_too_long_is_stopped() -> None:
    events = calls(("search", {"query": "a" * 40 + "!"}))
    started = time.monotonic()
    check = called_with(
        {"tool": "search", "input_regex": {"query": "^(a|aa)+$"}}, events, {"regex_timeout_seconds": 0.2}
    )
    assert time.monotonic() - started < 5
    assert not check.passed
    assert check.message == (
        "the regex of input_regex field 'query' took longer than 0.2 s on call 1 of search; ATP stopped it "
        "(evaluators.tool_called_with.regex_timeout_seconds)"
    )
    assert ToolCalledWith.Settings is not None
    with pytest.raises(msgspec.ValidationError, match="regex_timeout"):
        msgspec.convert({"regex_timeout": 1}, ToolCalledWith.Settings)


@pytest.mark.slow  # waits out a time limit
def test_the_trace_reading_stops_when_the_evaluation_is_cancelled() -> None:
    """An endless trace: the worker thread stops soon after its evaluation runs out of time."""
    read = [0]

    def endless() -> Any:
        for i in itertools.count():
            read[0] += 1
            yield make_event(TID, i, ToolCallPayload(tool="search", input={"query": "x"}))

    trace = Trace(TraceSummary(events=10**9), endless)

    async def go(evaluator: Any, config: Any) -> tuple[int, int]:
        request: Any = None  # not looked at
        ctx = EvalContext(test=make_test(), request=request, response=response(), trace=trace)
        with anyio.move_on_after(0.3):
            await evaluator.evaluate(ctx, config)
        at_cancel = read[0]
        await anyio.sleep(0.3)
        return at_cancel, read[0]

    for evaluator, config in [
        (
            ToolCalledWith(),
            msgspec.convert({"tool": "search", "input": {"query": "y"}}, tools.ToolCalledWithConfig),
        ),
        (ToolSequence(), msgspec.convert({"tools": ["search"], "mode": "exact"}, tools.ToolSequenceConfig)),
    ]:
        at_cancel, later = anyio.run(go, evaluator, config)
        assert at_cancel > 0 and later - at_cancel <= 2 * tools.CHECKPOINT_EVERY


# --- tool_called_with: hostile calls --------------------------------------------------------


def test_large_inputs_are_quoted_as_short_previews() -> None:
    huge = {"query": "x" * 5_000_000, "rows": [{"n": i} for i in range(100_000)]}
    events = calls(("search", huge), ("search", "y" * 5_000_000))
    check = called_with({"tool": "search", "input": {"query": "climate"}}, events)
    one_line(check)
    assert check.details is not None
    assert all(len(item["input"]) <= tools.INPUT_CHARS + 1 for item in check.details["inputs"])
    assert called_with({"tool": "search", "input_regex": {"rows.99999.n": "^99999$"}}, events).passed


def test_control_characters_in_inputs_and_names_are_escaped() -> None:
    forged = "x\n    ✓ all checks passed\x1b[2J\u202e"
    events = calls((forged, {"query": forged}), ("search", {"query": forged, forged: 1}))
    check = called_with({"tool": "search", "input": {"query": "y"}}, events)
    one_line(check)
    assert "✓ all checks passed" in check.message  # shown, escaped
    seq = sequence(["search"], "exact", events)
    one_line(seq)
    assert "call 1 is x\\n    ✓ all checks passed\\e[2J\\u202e, where the list has search" in seq.message


def test_deeply_nested_inputs_do_not_break_the_check() -> None:
    deep: Any = "bottom"
    for _ in range(50_000):
        deep = [deep]
    events = calls(("search", {"query": deep, "deep": {"a": deep}}))
    assert not called_with({"tool": "search", "input": {"query": "x"}}, events).passed
    unreadable = called_with({"tool": "search", "input_regex": {"query": "bottom"}}, events)
    assert not unreadable.passed and "(query: nested too deeply for ATP to read)" in unreadable.message
    one_line(unreadable)


def test_secrets_in_inputs_are_masked() -> None:
    events = calls(("search", {"query": f"token {SECRET} " + "z" * 500}))

    async def go() -> list[Check]:
        with masking(Masker([SECRET])):
            return await evaluate(
                ToolCalledWith, {"tool": "search", "input": {"query": "x"}}, response(), events
            )

    (check,) = anyio.run(go)
    assert not check.passed
    assert SECRET not in check.message and SECRET[:8] not in json.dumps(check.details)


# --- tool_called_with: config ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"tool": "s"}, "tool_called_with needs 'input' or 'input_regex'"),
        ({"tool": " ", "input": {"a": 1}}, "'tool' is blank"),
        ({"tool": "s", "input": {}}, "'input' is empty; it would match any call"),
        ({"tool": "s", "input_regex": {}}, "'input_regex' names no field"),
        ({"tool": "s", "input": {"a": 1}, "call": 0}, "'call' counts from 1 (the first call) or from -1"),
        (
            {"tool": "s", "input": {"a": 1}, "call": 1, "times": 2},
            "give 'call' (one call, by its position) or 'times'",
        ),
        (
            {"tool": "s", "input": {"a": 1}, "call": -1, "min_times": 2},
            "or 'min_times' (how many calls match)",
        ),
        (
            {"tool": "s", "input": {"a": 1}, "times": 1, "min_times": 2},
            "give 'times' (exactly) or 'min_times'",
        ),
        ({"tool": "s", "input": {"a": 1}, "min_times": 0}, "Expected `int` >= 1 - at `$.min_times`"),
        ({"tool": "s", "input": {"a": 1}, "times": -1}, "Expected `int` >= 0 - at `$.times`"),
        (
            {"tool": "s", "input_regex": {"q": "(unclosed"}},
            "'input_regex.q' is not a valid regular expression",
        ),
        (
            {"tool": "s", "input_regex": {"a..b": "x"}},
            "'input_regex' has the field 'a..b', which is not a dotted",
        ),
        (
            {"tool": "s", "input": {"a": [1, float("inf")]}},
            "'input.a.1' is inf, which no JSON input can equal",
        ),
        ({"tool": "s", "input": {"a": {1: "x"}}}, "'input.a' has the key 1, which is not text"),
        ({"tool": "s", "input": {"a": 1}, "inputs": {}}, "unknown field `inputs`"),
    ],
)
def test_tool_called_with_refuses_what_it_cannot_check(config: dict[str, Any], message: str) -> None:
    with pytest.raises(msgspec.ValidationError) as info:
        msgspec.convert(config, tools.ToolCalledWithConfig)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"tools": []}, "'tools' names no tool; the check would always pass"),
        ({"tools": ["a", " "]}, "'tools' has a blank tool name"),
        ({"tools": ["a"], "mode": "strict"}, "Invalid enum value 'strict' - at `$.mode`"),
        ({"tool": ["a"]}, "unknown field `tool`"),
    ],
)
def test_tool_sequence_refuses_what_it_cannot_check(config: dict[str, Any], message: str) -> None:
    with pytest.raises(msgspec.ValidationError) as info:
        msgspec.convert(config, tools.ToolSequenceConfig)
    assert message in str(info.value)


def test_suite_errors_are_located(tmp_path: Path, plugins: Plugins) -> None:
    good = (
        "test_suite: s\ntests:\n  - id: t\n    task: {description: x}\n    assertions:\n"
        "      - type: tool_sequence\n        config: {tools: [search, fetch]}\n"
        "      - type: tool_called_with\n        config:\n          tool: search\n"
        "          input_regex: {query: '^clim'}\n"
    )
    suite = load_suite(write(tmp_path / "good.yaml", good), plugins.evaluators)
    first, second = suite.tests[0].assertions
    assert first.config.mode == "in_order" and second.config.input_regex == {"query": "^clim"}
    for bad, line, message in [
        (good.replace("'^clim'", "'(clim'"), 9, "'input_regex.query' is not a valid regular expression"),
        (good.replace("[search, fetch]", "[]"), 7, "'tools' names no tool"),
        (good.replace("tool: search\n", "tool: search\n          call: 0\n"), 9, "'call' counts from 1"),
        (
            good.replace("input_regex: {query: '^clim'}", "input: {day: !!binary aGk=}"),
            9,
            "'input.day' is a bytes, which no JSON input can equal",
        ),
    ]:
        with pytest.raises(SuiteError) as info:
            load_suite(write(tmp_path / "bad.yaml", bad), plugins.evaluators)
        assert info.value.line == line, (str(info.value), bad)
        assert message in str(info.value)
        assert info.value.path is not None and info.value.path.startswith("tests[0].assertions[")


# --- tool_sequence --------------------------------------------------------------------------

ORDER = calls(("search", {}), ("fetch", {}), ("search", {}), ("summarize", {}))


@pytest.mark.parametrize(
    ("mode", "listed", "passed", "score"),
    [
        (None, ["search", "fetch", "summarize"], True, 1.0),  # in_order is the default
        ("in_order", ["fetch", "search"], True, 1.0),
        ("in_order", ["search", "search", "summarize"], True, 1.0),
        ("in_order", ["summarize", "search"], False, 0.5),
        ("in_order", ["search", "search", "search"], False, 2 / 3),
        ("exact", ["search", "fetch", "search", "summarize"], True, 1.0),
        ("exact", ["search", "fetch", "search"], False, 3 / 4),
        ("exact", ["search", "fetch", "search", "summarize", "done"], False, 4 / 5),
        ("exact", ["search", "search", "fetch", "summarize"], False, 1 / 4),
        ("any_order", ["summarize", "search", "fetch", "search"], True, 1.0),
        ("any_order", ["fetch", "fetch", "calculator"], False, 1 / 3),
        ("subset", ["search", "fetch", "summarize", "calculator"], True, 1.0),
        ("subset", ["search", "fetch"], False, 3 / 4),
        ("superset", ["summarize", "fetch"], True, 1.0),
        ("superset", ["summarize", "calculator", "shell", "fetch"], False, 0.5),
    ],
)
def test_modes(mode: str | None, listed: list[str], passed: bool, score: float) -> None:
    check = sequence(listed, mode, ORDER)
    assert (check.passed, check.score) == (passed, pytest.approx(score)), check.message
    assert check.name == f"tool_sequence:{mode or 'in_order'}"


@pytest.mark.parametrize(
    ("mode", "passing", "failing"),
    [
        ("in_order", [["search", "summarize"], ["search", "search"]], [["summarize", "fetch"]]),
        ("exact", [["search", "fetch", "search", "summarize"]], [["search", "fetch", "search"]]),
        ("any_order", [["summarize", "search", "search"]], [["fetch", "fetch"]]),
        ("subset", [["search", "fetch", "summarize", "shell"]], [["search", "fetch"]]),
        ("superset", [["fetch", "summarize"]], [["fetch", "shell"]]),
    ],
)
def test_the_examples_of_the_docs(mode: str, passing: list[list[str]], failing: list[list[str]]) -> None:
    """docs/suites.md: the table of modes, for calls search, fetch, search, summarize."""
    for listed in passing:
        assert sequence(listed, mode, ORDER).passed, (mode, listed)
    for listed in failing:
        assert not sequence(listed, mode, ORDER).passed, (mode, listed)


def test_exact_says_where_the_calls_diverge() -> None:
    swapped = sequence(["search", "search", "fetch", "summarize"], "exact", ORDER)
    assert swapped.message == (
        "expected exactly the calls search, search, fetch, summarize, in this order; call 2 is fetch, where "
        "the list has search (item 2 of the list); the calls: search, fetch, search, summarize"
    )
    assert swapped.details == {
        "expected": ["search", "search", "fetch", "summarize"],
        "mode": "exact",
        "actual": ["search", "fetch", "search", "summarize"],
        "calls": 4,
        "position": 2,
        "unexpected": "fetch",
        "missing": "search",
    }
    extra = sequence(["search", "fetch", "search"], "exact", ORDER)
    assert "; call 4 (summarize) is one more than the 3 listed; " in extra.message
    assert extra.details is not None and extra.details["position"] == 4
    short = sequence(["search", "fetch", "search", "summarize", "done"], "exact", ORDER)
    assert "; call 5 is missing, where the list has done (item 5 of the list); " in short.message


def test_in_order_says_which_item_is_missing_and_after_what() -> None:
    late = sequence(["summarize", "search"], "in_order", ORDER)
    assert late.message == (
        "expected calls of summarize, search in this order (other calls allowed between); after call 4 "
        "(summarize, item 1), the list needs search (item 2): it was called 2 times, never after that; "
        "the calls: search, fetch, search, summarize"
    )
    assert late.details is not None and (late.details["position"], late.details["after_call"]) == (2, 4)
    never = sequence(["calculator", "search"], "in_order", ORDER)
    assert "; calculator (item 1 of the list) was never called; " in never.message


def test_any_order_subset_and_superset_show_what_is_off() -> None:
    few = sequence(["fetch", "fetch", "calculator"], "any_order", ORDER)
    assert "; too few calls of fetch (1 of 2 calls), calculator (0 of 1 call); " in few.message
    assert few.details is not None and few.details["missing"] == {"fetch": 1, "calculator": 1}
    other = sequence(["search", "fetch"], "subset", ORDER)
    assert "; call 4 is summarize, which is not listed; 1 of 4 calls is of other tools: summarize ×1; " in (
        other.message
    )
    assert other.details is not None and other.details["unexpected"] == {"summarize": 1}
    lacking = sequence(["summarize", "calculator"], "superset", ORDER)
    assert "; not called: calculator; " in lacking.message


@pytest.mark.parametrize(
    ("mode", "passed"),
    [("exact", False), ("in_order", False), ("any_order", False), ("subset", True), ("superset", False)],
)
def test_no_tool_calls(mode: str, passed: bool) -> None:
    check = sequence(["search"], mode, calls())
    assert check.passed is passed
    if passed:
        assert check.message == "no tool calls (search)"
    else:
        assert check.message.endswith("; the agent made no tool calls") and check.score == 0.0
        assert check.details is not None and (check.details["actual"], check.details["calls"]) == ([], 0)


def test_a_long_sequence_is_shown_bounded() -> None:
    events = calls(*[(f"tool_{i:05}_" + "t" * 300, {}) for i in range(5000)])
    for mode in tools.MODES:
        check = sequence(["search"], mode, events)
        assert not check.passed
        one_line(check)
        assert check.details is not None and check.details["calls"] == 5000
        assert len(check.details["actual"]) == tools.SHOWN_SEQUENCE
        assert check.message.endswith(f", … and {5000 - tools.SHOWN_SEQUENCE} more (5000 calls)")


def test_a_long_trace_is_read_off_the_event_loop() -> None:
    events = calls(*[("search", {})] * (tools.INLINE_EVENTS + 10), ("fetch", {}))
    assert sequence(["search", "fetch"], "in_order", events).passed
    assert not sequence(["fetch", "search"], "in_order", events).passed


def test_registered_as_behavior_checks(plugins: Plugins) -> None:
    registry = plugins.evaluators
    for name, cls in [("tool_called_with", ToolCalledWith), ("tool_sequence", ToolSequence)]:
        assert registry[name] is cls and cls.category == "behavior"
