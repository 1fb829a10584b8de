"""Property-based tests: whatever bytes an agent sends, the protocol decoders raise only
ProtocolError, and whatever they accept ATP stores, masked, in a form it reads back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atp.core.errors import ProtocolError
from atp.core.protocol import (
    ATPResponse,
    decode_event,
    decode_event_lines,
    decode_request,
    decode_response,
    sane_metrics,
)
from atp.core.results import PlannedTest, RunHeader, RunResult, RunStore, utcnow
from atp.core.secrets import Masker
from atp.core.trace import RunTrace
from tests.conftest import FIXTURES

pytestmark = pytest.mark.slow  # seconds each (simulations, property tests over many examples)

SETTINGS = settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
TID = "550e8400-e29b-41d4-a716-446655440000"  # the request's task_id (that of the fixtures)
DECODERS = (decode_request, decode_response, decode_event)
SECRET = "sk-prop-Ü-1234"

VALID = [
    json.loads(path.read_text())
    for folder in ("responses/valid", "events/valid", "requests/valid")
    for path in sorted((FIXTURES / folder).glob("*.json"))
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
    | st.sampled_from(["1.0", "1.7", "2.0", "completed", "tool_call", "structured", SECRET]),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.text(max_size=12)
            | st.sampled_from(["version", "task_id", "status", "event_type", "payload", "type", "metrics"]),
            children,
            max_size=6,
        )
    ),
    max_leaves=30,
)


def mutate(base: Any, data: st.DataObject) -> Any:
    """A valid message with one value somewhere replaced by random JSON."""
    if isinstance(base, dict) and base:
        key = data.draw(st.sampled_from(sorted(base)))
        copy = dict(base)
        copy[key] = mutate(base[key], data) if data.draw(st.booleans()) else data.draw(json_values)
        return copy
    if isinstance(base, list) and base:
        index = data.draw(st.integers(0, len(base) - 1))
        copy = list(base)
        copy[index] = mutate(base[index], data)
        return copy
    return data.draw(json_values)


def plant(base: Any, data: st.DataObject) -> Any:
    """A valid message with a secret put into one of its values, somewhere."""
    if isinstance(base, dict) and base:
        key = data.draw(st.sampled_from(sorted(base)))
        return {**base, key: plant(base[key], data)}
    if isinstance(base, list) and base:
        index = data.draw(st.integers(0, len(base) - 1))
        return [*base[:index], plant(base[index], data), *base[index + 1 :]]
    return data.draw(st.sampled_from([SECRET, f"before {SECRET} after", {"k": SECRET}, [SECRET]]))


def decode_all(raw: bytes) -> list[Any]:
    accepted = []
    for decoder in DECODERS:
        try:
            accepted.append(decoder(raw))
        except ProtocolError:
            pass
    try:
        accepted.extend(decode_event_lines(raw))
    except ProtocolError:
        pass
    return accepted


@SETTINGS
@given(st.binary(max_size=2000))
def test_random_bytes_raise_only_protocol_errors(raw: bytes) -> None:
    decode_all(raw)


@SETTINGS
@given(json_values)
def test_random_json_raises_only_protocol_errors(value: Any) -> None:
    decode_all(json.dumps(value).encode())


@SETTINGS
@given(st.data())
def test_mutated_valid_messages_raise_only_protocol_errors(data: st.DataObject) -> None:
    message = mutate(data.draw(st.sampled_from(VALID)), data)
    raw = json.dumps(message, ensure_ascii=data.draw(st.booleans())).encode()
    if data.draw(st.booleans()):  # cut, or a byte flipped, or invalid UTF-8 spliced in
        cut = data.draw(st.integers(0, len(raw)))
        raw = (
            raw[:cut] + data.draw(st.sampled_from([b"", b"\xff", b"\xc3(", b"\\u", b"\n", b"}"])) + raw[cut:]
        )
    decode_all(raw)


@SETTINGS
@given(st.data())
def test_what_decodes_is_stored_masked_and_reads_back(tmp_path_factory: Any, data: st.DataObject) -> None:
    """An accepted response and its events, with a secret somewhere in them in any spelling,
    are written without the secret and read back equal to what was stored. (As in a run, the
    result carries the request's task_id, and events with another one are dropped.)"""
    base = data.draw(st.sampled_from(VALID))
    message = plant(base, data) if data.draw(st.booleans()) else mutate(base, data)
    raw = json.dumps(message, ensure_ascii=data.draw(st.booleans())).encode()
    masker = Masker([SECRET, "completed", "test"])
    directory: Path = tmp_path_factory.mktemp("store")
    for accepted in decode_all(raw):
        trace = RunTrace(TID, events_path=directory / "e.jsonl", log_path=directory / "l.log", masker=masker)
        if isinstance(accepted, ATPResponse):
            metrics, _ = sane_metrics(accepted.metrics)
            header = RunHeader(  # (a result read back counts only when the run planned it)
                run_id="r", suite="s", agent="a", agent_type="cli", started_at=utcnow(),
                tests=[PlannedTest(id="t", name="t")],
            )  # fmt: skip
            store = RunStore.create(
                directory / "runs", msgspec.structs.replace(header, run_id=str(id(accepted))), masker
            )
            store.append(
                RunResult(
                    test_id="t",
                    run_number=1,
                    task_id=TID,
                    outcome="passed",
                    status=accepted.status,
                    score=100.0,
                    duration_seconds=0.1,
                    started_at=utcnow(),
                    metrics=metrics,
                    error=accepted.error,
                    artifacts=accepted.artifacts,
                )
            )
            store.close()
            (stored,) = store.read_results()
            assert not store.problems
            assert stored.status == accepted.status
            assert SECRET not in json.dumps(msgspec.to_builtins(stored), ensure_ascii=False)
        elif hasattr(accepted, "event_type"):
            if accepted.task_id == TID:
                trace.event(accepted, raw if b"\n" not in raw else None)
            else:  # another task_id: dropped (with a warning); the rest is masked as well
                trace.event(accepted)
                trace.event(msgspec.structs.replace(accepted, task_id=TID))
            trace.close()
            written = (directory / "e.jsonl").read_bytes() if (directory / "e.jsonl").exists() else b""
            for line in written.splitlines():
                assert SECRET not in json.dumps(json.loads(line), ensure_ascii=False)
                decode_event(line)
            assert all(SECRET not in warning for warning in trace.warnings)
            if written:
                (directory / "e.jsonl").unlink()
