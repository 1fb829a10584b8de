"""The agent's error code, details and trace id bounded and masked before they are kept; runs
counted by code within bounds; a test's expectation; a run's limits read from its summary."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from atp.core.error_codes import (
    MAX_CODE_CHARS,
    MAX_COUNTED_CODES,
    MAX_DETAILS_BYTES,
    OTHER_CODES,
    Expectation,
    bounded_code,
    bounded_details,
    bounded_trace_id,
    count_codes,
)
from atp.core.protocol import Constraints
from atp.core.run_limits import RunLimits
from atp.core.secrets import MASK, Masker
from atp.core.trace import TraceSummary

SECRET = "sk-live-0123456789abcdef"
MASKER = Masker([SECRET])


def test_a_code_is_masked_before_it_is_cut_and_shown_printable() -> None:
    # the secret straddles the cut: cutting first would keep a piece of it
    code = "E" * (MAX_CODE_CHARS - 5) + SECRET + "\x1b[2J"
    kept = bounded_code(code, MASKER)
    assert kept is not None and SECRET[:5] not in kept and MASK[:3] in kept
    assert "\x1b" not in kept
    assert bounded_code("  TOOL_NOT_FOUND ", None) == "TOOL_NOT_FOUND"
    assert bounded_code("", None) is None and bounded_code("   ", None) is None
    assert bounded_code(42, None) is None
    assert bounded_code("A" * 1000, None) == "A" * MAX_CODE_CHARS  # one word still, no note of the cut


def test_a_trace_id_is_bounded_and_masked() -> None:
    kept = bounded_trace_id("t-" + SECRET + "x" * 1000, MASKER)
    assert kept is not None and SECRET not in kept and len(kept) < 400
    assert bounded_trace_id("trace_abc123", None) == "trace_abc123"


def test_details_are_masked_and_bounded() -> None:
    assert bounded_details({"key": SECRET, "nested": [{"k": f"x{SECRET}y"}]}, MASKER) == {
        "key": MASK,
        "nested": [{"k": f"x{MASK}y"}],
    }
    huge = {"rows": ["r" * 100] * 1000}
    kept = bounded_details(huge, MASKER)
    assert kept is not None and set(kept) == {"truncated"}
    assert len(msgspec.json.encode(kept)) <= MAX_DETAILS_BYTES
    assert kept["truncated"].startswith('{"rows":["rrrr')


def test_details_that_are_no_json_say_so() -> None:
    class Evil:
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert bounded_details({"x": Evil()}, None) == {
        "truncated": "error_details that are not JSON (TypeError)"
    }
    assert bounded_details({}, None) is None and bounded_details(["a"], None) is None

    class Raising(dict):  # a third-party adapter's dict subclass
        def __len__(self) -> int:
            raise RuntimeError("no")

    assert bounded_details(Raising(a=1), None) is None


def test_counts_by_code_are_bounded() -> None:
    codes: list[Any] = [f"C{i:03}" for i in range(MAX_COUNTED_CODES + 10)] + ["C000"] * 5 + [None]
    counted = count_codes(codes)
    assert len(counted) == MAX_COUNTED_CODES + 1
    assert next(iter(counted)) == "C000" and counted["C000"] == 6  # the most frequent first
    assert counted[OTHER_CODES] == 10
    assert sum(counted.values()) == len(codes) - 1


@pytest.mark.parametrize(
    ("expect", "status", "code", "met"),
    [
        (Expectation(error_code="TOOL_NOT_FOUND"), "failed", "TOOL_NOT_FOUND", True),
        (Expectation(error_code="TOOL_NOT_FOUND"), "failed", "LLM_ERROR", False),
        (Expectation(error_code="TOOL_NOT_FOUND"), "completed", "TOOL_NOT_FOUND", False),
        (Expectation(), "failed", None, True),
        (Expectation(status="partial"), "partial", "X", True),
    ],
)
def test_an_expectation_is_met_by_status_and_code(
    expect: Expectation, status: str, code: str | None, met: bool
) -> None:
    assert expect.met_by(status, code) is met


def test_limits_are_passed_only_beyond_them_and_stop_once() -> None:
    stops: list[int] = []
    limits = RunLimits.of(Constraints(max_steps=5, max_tokens=100, budget_usd=0.5), lambda: stops.append(1))
    assert limits is not None
    summary = TraceSummary(max_step=5, input_tokens=60, output_tokens=40, cost_usd=0.5)
    limits(summary)
    assert limits.passed is None and stops == []  # at a limit is within it
    summary.output_tokens = 41
    limits(summary)
    assert limits.passed is not None and limits.passed.code == "MAX_TOKENS_EXCEEDED" and stops == [1]
    summary.max_step = 9
    limits(summary)
    assert limits.passed.code == "MAX_TOKENS_EXCEEDED" and stops == [1]  # the first one passed stands
    assert RunLimits.of(Constraints(timeout_seconds=3), lambda: None) is None
    over = RunLimits(Constraints(budget_usd=0.0), lambda: None)
    assert over.check(TraceSummary(cost_usd=0.01)) is not None


def test_a_cost_out_of_bounds_fails_the_run_and_is_not_added() -> None:
    from atp.core.protocol import LLMRequestPayload, make_event
    from atp.core.trace import EventOutOfBounds

    summary = TraceSummary()
    good = make_event("t", 1, LLMRequestPayload(cost_usd=0.25))
    summary.add([good], -1)
    assert summary.cost_usd == 0.25
    for bad_cost in (-1.0, float("nan"), float("inf"), 1e16, "3"):
        bad = make_event("t", 2, LLMRequestPayload(cost_usd=bad_cost))  # type: ignore[arg-type]
        with pytest.raises(EventOutOfBounds, match="payload.cost_usd"):
            summary.add([bad], 1)
    assert summary.cost_usd == 0.25
