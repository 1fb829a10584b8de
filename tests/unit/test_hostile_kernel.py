"""The kernel against hostile in-process agents, plugins and run directories: nothing an agent
sends crashes the suite, leaks a secret or leaves a run directory ATP cannot read back."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from atp.core.errors import AgentError, StorageError
from atp.core.evaluator import EvalContext, Evaluator, check
from atp.core.hookspecs import hookimpl
from atp.core.plugins import Plugins
from atp.core.protocol import (
    ATPRequest,
    ATPResponse,
    LLMRequestPayload,
    Metrics,
    StructuredArtifact,
    ToolCallPayload,
    decode_event,
    decode_response,
    make_event,
)
from atp.core.results import Check, RunResult, RunStore, build_suite_results
from atp.core.secrets import Masker
from atp.core.text import printable, shorten
from atp.core.trace import EventSink
from tests.facts import says
from tests.unit.test_runner import ONE_TEST, answer, run, suite_text

HERE = "tests.unit.test_hostile_kernel"


def hostile_suite(function: str, tests: str = ONE_TEST, **extra: str) -> str:
    return suite_text(function, tests).replace("tests.unit.test_runner:", f"{HERE}:")


TWO_TESTS = ONE_TEST + ONE_TEST.replace("id: only", "id: other")


# --- agents ------------------------------------------------------------------------------


def agent_negative_metrics(request: ATPRequest, sink: EventSink) -> ATPResponse:
    sink.event(make_event(request.task_id, 0, ToolCallPayload(tool="web_search")))
    return answer(
        request, total_tokens=-5, input_tokens=-3, cost_usd=float("nan"), wall_time_seconds=float("inf")
    )


def agent_negative_tokens(request: ATPRequest, sink: EventSink) -> ATPResponse:
    sink.event(make_event(request.task_id, 0, ToolCallPayload(tool="web_search")))
    sink.event(make_event(request.task_id, 1, LLMRequestPayload(input_tokens=-(10**9), output_tokens=-5)))
    return answer(request)


def agent_completed_with_error(request: ATPRequest, sink: EventSink) -> ATPResponse:
    sink.event(make_event(request.task_id, 0, ToolCallPayload(tool="web_search")))
    response = answer(request)
    response.error = "something went wrong, but here is an answer"
    return response


def agent_returns_dict(request: ATPRequest, sink: EventSink) -> Any:
    return {"status": "completed"}


SECRETS = ["completed", "test", "sk-Ünïcode-secret-42", "sk-ascii-secret-77"]


def agent_spells_secrets(request: ATPRequest, sink: EventSink) -> ATPResponse:
    escaped = json.dumps({"unicode": "sk-Ünïcode-secret-42", "ascii": "sk-ascii-secret-77"})
    fully_escaped = "".join(f"\\u{ord(c):04x}" for c in "sk-ascii-secret-77")
    line = (
        '{"version":"1.0","task_id":"%s","timestamp":"2026-01-01T00:00:00Z","sequence":0,'
        '"event_type":"tool_call","payload":{"tool":"web_search","input":{"key":"%s","more":%s}}}'
        % (request.task_id, fully_escaped, escaped)
    ).encode()
    sink.event(decode_event(line), line)
    response = answer(request, data={"note": "completed test with sk-Ünïcode-secret-42"})
    return response


def agent_error_with_secret_at_the_cut(request: ATPRequest, sink: EventSink) -> ATPResponse:
    evidence = "x" * 190 + "sk-ascii-secret-77" + "y" * 50 + "\x1b[2J"
    raise AgentError("its last stdout line is not an ATP response", evidence=evidence)


def agent_big_events(request: ATPRequest, sink: EventSink) -> ATPResponse:
    for number in range(100):
        sink.event(
            make_event(request.task_id, number, ToolCallPayload(tool="web_search", input="x" * 100_000))
        )
    return answer(request)


def agent_escapes(request: ATPRequest, sink: EventSink) -> ATPResponse:
    response = answer(request, status="failed")
    response.error = "\x1b[2J\x1b]0;pwned\x07\r  ✓ everything passed\u202e"
    return response


# --- a hostile evaluator -----------------------------------------------------------------


class NeverReturns(Evaluator):
    name = "never_returns"

    async def evaluate(self, ctx: EvalContext, config: Any) -> list[Check]:
        await anyio.sleep(3600)
        return []


class OnlyCheck(Evaluator):
    name = "plain"

    async def evaluate(self, ctx: EvalContext, config: Any) -> list[Check]:
        return [check("plain", True, "fine")]


class Extra:
    @hookimpl
    def atp_register_evaluators(self, register: Any) -> None:
        register(NeverReturns)
        register(OnlyCheck)


# --- the tests ---------------------------------------------------------------------------


def test_a_hanging_evaluator_is_stopped_at_its_time_limit(tmp_path: Path, plugins: Plugins) -> None:
    plugins.register(Extra(), "extra")
    tests = """
  - id: hangs
    task: {description: "x"}
    assertions: [{type: never_returns}]
  - id: fine
    task: {description: "x"}
    assertions: [{type: plain}]
"""
    started = time.monotonic()
    results, _ = run(
        tmp_path,
        plugins,
        suite_text("agent_ok", tests),
        evaluator_settings=lambda name: {"timeout_seconds": 0.3} if name == "never_returns" else {},
    )
    assert time.monotonic() - started < 5
    hangs, fine = results.tests
    assert hangs.status == "error"
    assert hangs.runs[0].checks[0].message == (
        "evaluator 'never_returns' did not finish within 0.3 s (evaluators.never_returns.timeout_seconds)"
    )
    assert fine.status == "passed"


def test_negative_and_non_finite_metrics_fail_the_run_and_count_as_the_most(
    tmp_path: Path, plugins: Plugins
) -> None:
    tests = ONE_TEST.replace(
        "input_data: {x: 1}}", "input_data: {x: 1}}\n    constraints: {max_tokens: 100, budget_usd: 1.0}"
    )
    results, runner = run(tmp_path, plugins, hostile_suite("agent_negative_metrics", tests))
    run_ = results.tests[0].runs[0]
    assert run_.outcome == "failed" and 0 <= run_.score <= 100
    says(run_.error, "metrics.total_tokens = -5", "metrics.input_tokens = -3", "metrics.cost_usd = nan")
    says(run_.error, "metrics.wall_time_seconds = inf", "1e15")
    assert run_.metrics.total_tokens == 10**15 and run_.metrics.cost_usd == 1e15
    assert run_.metrics.wall_time_seconds == 1e15 and run_.metrics.input_tokens == 10**15
    assert runner.store is not None and RunStore.open(runner.store.directory).results() == results


def test_negative_tokens_in_an_event_fail_the_run_keeping_the_events_before(
    tmp_path: Path, plugins: Plugins
) -> None:
    results, runner = run(tmp_path, plugins, hostile_suite("agent_negative_tokens", TWO_TESTS))
    bad, other = (test.runs[0] for test in results.tests)
    assert bad.outcome == "failed" and other.outcome == "failed"  # (the same agent in both)
    says(bad.error, "event 1 (llm_request)", "payload.input_tokens = -1000000000", "out of bounds")
    assert bad.trace.tool_calls == {"web_search": 1} and bad.trace.input_tokens == 0
    assert runner.store is not None and RunStore.open(runner.store.directory).results() == results


def test_completed_with_an_error_is_a_warning(tmp_path: Path, plugins: Plugins) -> None:
    results, _ = run(tmp_path, plugins, hostile_suite("agent_completed_with_error"))
    run_ = results.tests[0].runs[0]
    assert run_.outcome == "passed"
    assert run_.warnings == [
        "the agent reported status 'completed' with an error: something went wrong, but here is an answer"
    ]


def test_an_agent_function_returning_something_else_fails_its_run(tmp_path: Path, plugins: Plugins) -> None:
    results, _ = run(tmp_path, plugins, hostile_suite("agent_returns_dict", TWO_TESTS))
    assert [t.status for t in results.tests] == ["failed", "failed"]
    assert results.tests[0].runs[0].error == (
        f"the agent function {HERE}:agent_returns_dict returned dict, not an ATPResponse: "
        "'{'status': 'completed'}'"
    )


def test_secrets_equal_to_atp_words_and_escaped_secrets_are_masked_readably(
    tmp_path: Path, plugins: Plugins
) -> None:
    results, runner = run(tmp_path, plugins, hostile_suite("agent_spells_secrets"), masker=Masker(SECRETS))
    assert runner.store is not None
    directory = runner.store.directory
    reread = RunStore.open(directory).results()
    assert reread == results and results.tests[0].status == "passed"
    run_ = results.tests[0].runs[0]
    assert run_.status == "completed" and run_.test_id == "only"
    written = b"".join(p.read_bytes() for p in directory.rglob("*") if p.is_file())
    decoded = json.dumps([json.loads(line) for line in written.splitlines() if line.startswith(b"{")])
    for secret in ("sk-Ünïcode-secret-42", "sk-ascii-secret-77"):
        assert secret not in decoded and secret.encode() not in written
    artifact = run_.artifacts[0]
    assert isinstance(artifact, StructuredArtifact) and artifact.data == {"note": "*** *** with ***"}
    event = next(iter(runner.store.events(run_)))
    assert event.payload.input == {"key": "***", "more": {"unicode": "***", "ascii": "***"}}  # type: ignore[union-attr]


def test_evidence_is_masked_before_it_is_cut_and_escaped(tmp_path: Path, plugins: Plugins) -> None:
    results, _ = run(
        tmp_path,
        plugins,
        hostile_suite("agent_error_with_secret_at_the_cut"),
        masker=Masker(["sk-ascii-secret-77"]),
    )
    error = results.tests[0].runs[0].error
    assert error is not None
    assert "sk-ascii" not in error and "***" in error and "\x1b" not in error
    assert error.startswith("its last stdout line is not an ATP response: 'xxxx")


def test_events_are_bounded_in_bytes_too(tmp_path: Path, plugins: Plugins) -> None:
    results, runner = run(
        tmp_path, plugins, hostile_suite("agent_big_events", TWO_TESTS), max_event_bytes=1_000_000
    )
    for test in results.tests:
        run_ = test.runs[0]
        assert run_.status == "failed"
        assert run_.error == "agent flooded ATP with events: more than 1000000 bytes of events in one run"
    assert runner.store is not None
    assert all(p.stat().st_size <= 1_000_000 for p in (runner.store.directory / "events").iterdir())


def test_a_full_disk_stops_the_suite_and_keeps_what_was_written(
    tmp_path: Path, plugins: Plugins, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write
    appended: list[int] = []

    def full_after_two(fd: int, data: Any) -> int:
        if bytes(data[:12]) == b'{"test_id":"':
            appended.append(fd)
            if len(appended) > 2:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full_after_two)
    text = hostile_suite("agent_completed_with_error", ONE_TEST)
    with pytest.raises(
        StorageError, match="No space left on device; the suite was stopped. The results written"
    ):
        run(tmp_path, plugins, text, runs=5)
    (directory,) = (tmp_path / "runs").iterdir()
    monkeypatch.undo()
    stored = RunStore.open(directory).results()
    assert stored.summary.runs == 2 and stored.interrupted and not stored.problems
    assert not list(directory.glob("*.partial"))


def test_an_unwritable_run_directory_is_an_atp_error(tmp_path: Path, plugins: Plugins) -> None:
    (tmp_path / "runs").write_text("")  # where the run directories should go is a file
    with pytest.raises(StorageError, match="cannot create the run directory .*runs/.*: Not a directory"):
        run(tmp_path, plugins, hostile_suite("agent_completed_with_error"))


def test_what_cannot_be_stored_readably_becomes_an_error_result(tmp_path: Path) -> None:
    from tests.unit.test_trace_results_scoring import header

    store = RunStore.create(tmp_path, header())
    result = RunResult(
        test_id="a",
        run_number=1,
        task_id="x",
        outcome="passed",
        status="completed",
        score=float("nan"),
        duration_seconds=1.0,
        started_at=header().started_at,
    )
    store.append(result)
    store.close()
    (stored,) = store.read_results()
    assert stored.outcome == "error" and stored.score == 0.0
    assert stored.error is not None and stored.error.startswith(
        "ATP could not store this run's result readably"
    )


def test_damaged_and_stray_results_are_problems(tmp_path: Path) -> None:
    from tests.unit.test_trace_results_scoring import header, result

    store = RunStore.create(tmp_path, header())
    good = msgspec.json.encode(result("a", 1, "passed"))
    stray = msgspec.json.encode(result("not-planned", 1, "passed"))
    (store.directory / "results.jsonl").write_bytes(good + b"\n" + stray + b"\n" + good[:40])
    results = RunStore.open(store.directory).results()  # read back (the writer counts its own lines only)
    assert results.summary.runs == 1  # the stray is not counted
    assert len(results.problems) == 2
    assert "results.jsonl:3 was cut short" in results.problems[0]
    says(results.problems[1], "'not-planned'", "run 1", "did not plan", "not counted")
    assert build_suite_results(header(), []).problems == []


def test_damaged_event_lines_are_left_out_of_reports(tmp_path: Path) -> None:
    from tests.unit.test_trace_results_scoring import header, result

    store = RunStore.create(tmp_path, header())
    run_ = msgspec.structs.replace(result("a", 1, "passed"), events_file="events/a.1.jsonl")
    line = '{"version":"1.0","task_id":"x","timestamp":"2026-01-01T00:00:00Z","sequence":0,"event_type":"progress","payload":{}}'
    (store.directory / "events").mkdir()
    (store.directory / "events" / "a.1.jsonl").write_text(line + "\n" + line[:30])
    assert store.event_lines(run_) == [line.encode()]
    assert len(list(store.events(run_))) == 1
    assert store.problems and "event 2 is damaged" in store.problems[0]


def test_the_newest_run_is_the_one_started_last(tmp_path: Path) -> None:
    from datetime import timedelta

    from tests.unit.test_trace_results_scoring import header

    first = header()
    later = msgspec.structs.replace(
        first, run_id="00000000-000000-aaaaaa", started_at=first.started_at + timedelta(seconds=5)
    )
    earlier = msgspec.structs.replace(first, run_id="99999999-999999-ffffff")
    RunStore.create(tmp_path, earlier)
    RunStore.create(tmp_path, later)
    assert RunStore.latest(tmp_path).name == "00000000-000000-aaaaaa"


def test_long_and_odd_test_ids_make_bounded_distinct_file_names(tmp_path: Path, plugins: Plugins) -> None:
    store = RunStore(tmp_path)
    long_id = "t" * 300
    name = store.events_file(long_id, 1)
    assert len(Path(name).name) < 120 and name != store.events_file("t" * 299, 1)
    assert "/" not in Path(store.log_file("../../etc/passwd", 1)).name
    tests = ONE_TEST.replace("id: only", f"id: {long_id}")
    results, _ = run(tmp_path, plugins, suite_text("agent_ok", tests))
    assert results.tests[0].status == "passed"


def test_control_characters_from_an_agent_are_escaped_in_the_console(
    tmp_path: Path, plugins: Plugins
) -> None:
    import io

    from atp.core.reporter import ReportOptions
    from atp.reporters.console import ConsoleReporter

    results, runner = run(tmp_path, plugins, hostile_suite("agent_escapes"))
    stream = io.StringIO()
    assert runner.store is not None
    ConsoleReporter(ReportOptions(stream=stream, color=False)).report(results, runner.store)
    out = stream.getvalue()
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out and "\u202e" not in out
    assert "\\e[2J\\e]0;pwned\\x07\\r  ✓ everything passed\\u202e" in out


def test_printable_and_shorten() -> None:
    assert printable("a\tb\nc") == "a\\tb\\nc"
    assert printable("a\tb\nc", newlines=True) == "a\tb\nc"
    assert printable("plain ✓ text") == "plain ✓ text"
    assert printable("\x00\x9b\u200b\ufeff") == "\\x00\\x9b\\u200b\\ufeff"
    assert shorten("abc", 5) == "abc" and shorten("abcdefgh", 3) == "abc… (5 more characters)"


def test_invalid_utf8_and_deep_nesting_are_protocol_errors() -> None:
    from atp.core.errors import ProtocolError

    response = b'{"version":"1.0","task_id":"t\xff","status":"completed","artifacts":[],"metrics":{}}'
    with pytest.raises(ProtocolError, match=r"ATP response is not valid UTF-8: byte 29 is b'\\xff'"):
        decode_response(response)
    deep = (
        b'{"version":"1.0","task_id":"t","status":"completed","artifacts":[{"type":"structured","name":"x","data":{"a":'
        + b"[" * 10000
        + b"]" * 10000
        + b'}}],"metrics":{}}'
    )
    with pytest.raises(ProtocolError, match="nested too deeply"):
        decode_response(deep)
    with pytest.raises(ProtocolError, match="not valid UTF-8"):
        decode_event(
            b'{"version":"1.0","task_id":"\xc3(","timestamp":"2026-01-01T00:00:00Z","sequence":0,"event_type":"progress","payload":{}}'
        )


def test_sane_metrics_keeps_what_is_sane() -> None:
    from atp.core.protocol import sane_metrics

    metrics = Metrics(total_tokens=10, cost_usd=0.5, wall_time_seconds=0.0)
    assert sane_metrics(metrics) == (metrics, [])
    fixed, problems = sane_metrics(Metrics(tool_calls=True, llm_calls=1.5, total_steps=-1))  # type: ignore[arg-type]
    assert fixed == Metrics(tool_calls=10**15, llm_calls=10**15, total_steps=10**15) and len(problems) == 3


def test_masker_value_leaves_atp_words_alone() -> None:
    masker = Masker(["completed", "sk-1234"])
    response = ATPResponse(
        version="1.0",
        task_id="sk-1234",
        status="completed",
        artifacts=[StructuredArtifact(name="r", data={"completed": ["completed sk-1234", 3]})],
        metrics=Metrics(),
    )
    masked = masker.value(response)
    assert masked.status == "completed"
    assert masked.artifacts[0].data == {"***": ["*** ***", 3]}
    assert masker.value("nothing") == "nothing" and masker.value(5) == 5
    deep: Any = "sk-1234"
    for _ in range(100_000):
        deep = [deep]
    masked = masker.value(deep)
    for _ in range(100_000):
        (masked,) = masked
    assert masked == "***"


def test_within_a_run_shorten_masks_before_it_cuts() -> None:
    from atp.core.text import masking

    text = "x" * 190 + "sk-ascii-secret-77" + "y" * 50
    assert "sk-ascii-s…" in shorten(text)
    with masking(Masker(["sk-ascii-secret-77"])):
        cut = shorten(text)
        assert "sk-" not in cut and "***" in cut
        assert shorten("short sk-ascii-secret-77") == "short ***"  # masked whatever its length
    assert "sk-ascii-s…" in shorten(text)


def test_clean_json_is_sure_only_when_no_spelling_can_hide_a_secret() -> None:
    plain = Masker(["sk-plain-1234"])
    assert plain.clean_json(b'{"a": "line\\nbreak \\"quoted\\""}')  # these escapes cannot spell it
    assert not plain.clean_json(b'{"a": "\\u0073k-plain-1234"}')
    assert not plain.clean_json(b'{"a": "sk-plain-1234"}')
    slashed = Masker(["sk/slash/1234"])
    assert not slashed.clean_json(b'{"a": "sk\\/slash\\/1234"}')
    assert slashed.clean_json(b'{"a": "nothing here"}')


@pytest.mark.parametrize("value", ["-1", "0", ".inf", ".nan", "'soon'", "true", "1e300"])
def test_an_evaluators_time_limit_must_be_a_sane_number(tmp_path: Path, value: str) -> None:
    from atp.core.config import load_config
    from atp.core.errors import ConfigError
    from tests.conftest import write

    path = write(tmp_path / "atp.config.yaml", f"evaluators:\n  contains:\n    timeout_seconds: {value}\n")
    with pytest.raises(
        ConfigError,
        match=r"atp.config.yaml:3: at evaluators.contains.timeout_seconds: an evaluator's timeout_seconds must be",
    ):
        load_config(path)
    write(path, "evaluators:\n  contains:\n    timeout_seconds: 2.5\n")
    assert load_config(path).evaluator_settings("contains") == {"timeout_seconds": 2.5}


def test_secrets_are_masked_in_every_escaped_spelling() -> None:
    masker = Masker(["hunter2-TOPSECRET", "hunter2/TOP", "pässwört\\1234", "sk-😀-emoji"])
    line = (
        r"a \u0068unter2-TOPSECRET b hunter2\/TOP c 'p\xe4ssw\xf6rt\\1234' d \"p\u00E4ssw\u00f6rt\\1234\""
        r" e sk-\ud83d\ude00-emoji f HUNTER2-TOPSECRET"
    )
    assert masker.text(line) == r"a *** b *** c *** d \"***\" e *** f HUNTER2-TOPSECRET".replace(
        " *** d", " '***' d"
    )
    for secret in ("pässwört\\1234", "sk-😀-emoji"):
        assert masker.text(json.dumps(secret)) == '"***"' and masker.text(repr(secret)) == "'***'"


def test_a_piece_of_a_stream_shows_no_part_of_a_secret() -> None:
    masker = Masker(["hunter2-TOPSECRET"])
    assert masker.piece("x" * 10 + "hunter2-TOPSECRET" + "y" * 5 + "hunter2-TO") == "x" * 10 + "***"
    assert masker.piece("x" * 10 + "hunter2-TOPSECRET" + "y" * 30) == "x" * 10 + "***" + "y" * 14
    assert Masker().piece("abc") == "abc"
