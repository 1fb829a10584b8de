"""The ``llm_eval`` evaluator with the ``openai`` back end: the real ``openai`` SDK against a
Chat Completions server on loopback (tests/judge_server.py, :class:`ChatServer`): judgements,
the correction, retries, errors, the key (from the settings, the environment, the secrets),
the base URL from ``OPENAI_BASE_URL``, redirects, a body too large, the cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from atp.core.evaluator import CannotEvaluate
from atp.core.results import Usage
from atp.evaluators.judge.evaluator import LlmEval
from tests.facts import says
from tests.integration.test_llm_judge import REPORT, context, judge
from tests.judge_server import ChatServer, chat_call, chat_error, chat_judgement, chat_text, raw

pytest.importorskip("openai")

KEY = "sk-proj-test-0123456789abcdef"


def evaluator(server: ChatServer, tmp_path: Path, **settings: Any) -> LlmEval:
    base = {"backend": "openai", "base_url": server.api, "api_key": KEY, "cache_dir": str(tmp_path / "cache")}
    return LlmEval({**base, **settings})


def test_a_judgement_passes_with_its_evidence_and_the_judges_usage(tmp_path: Path) -> None:
    with ChatServer() as server:
        server.script.append(
            chat_judgement(0.85, "Accurate figures.", issues=["no sources"], strengths=["clear"])
        )
        (check,), ctx = judge(
            evaluator(server, tmp_path), {"criteria": "factual_accuracy", "artifact": "report.md"}
        )
    assert check.passed and check.score == 0.85
    says(check.message, "factual_accuracy", "0.85", "0.70", "Accurate figures.")
    details = check.details or {}
    assert details["issues"] == ["no sources"] and details["strengths"] == ["clear"]
    assert details["model"] == "gpt-4.1" and details["cached"] == 0
    (request,) = server.requests
    assert request["model"] == "gpt-4.1" and "temperature" not in request
    assert request["tool_choice"] == {"type": "function", "function": {"name": "record_judgement"}}
    assert "parallel_tool_calls" not in request and request["max_completion_tokens"] == 1024
    assert request["messages"][0]["role"] == "system" and REPORT in server.prompt_of()
    assert server.key_of() == KEY
    # 150 input and 50 output tokens at gpt-4.1's $2 / $8 per million
    assert ctx.usage == {
        "llm_eval/gpt-4.1": Usage(calls=1, input_tokens=150, output_tokens=50, cost_usd=0.0007)
    }


def test_a_failing_verdict_fails_and_a_text_answer_is_read(tmp_path: Path) -> None:
    with ChatServer() as server:
        server.script.append(chat_judgement(0.3, "Off topic."))
        server.script.append(
            chat_text(json.dumps({"score": 0.8, "explanation": "ok", "issues": [], "strengths": []}))
        )
        (low,), _ = judge(evaluator(server, tmp_path, cache=False), {"criteria": "relevance"})
        (read,), _ = judge(evaluator(server, tmp_path, cache=False), {"criteria": "relevance"})
    assert not low.passed and low.score == 0.3 and low.message == "relevance scored 0.30 < 0.70: Off topic."
    assert read.passed and read.score == 0.8


def test_malformed_arguments_are_corrected_once_then_fail_showing_both_answers(tmp_path: Path) -> None:
    with ChatServer() as server:
        server.script.extend([chat_call('{"score": 0.9, "explanation": "ok"'), chat_judgement(0.9)])
        (check,), ctx = judge(evaluator(server, tmp_path), {"criteria": "clarity"})
        assert check.passed and (check.details or {})["corrections"] == 1
        assert ctx.usage["llm_eval/gpt-4.1"].calls == 2
        retry = server.requests[1]["messages"]
        assert retry[2]["tool_calls"][0]["function"]["arguments"] == '{"score": 0.9, "explanation": "ok"'
        assert retry[3]["role"] == "tool" and retry[3]["tool_call_id"] == "call_test"

        server.default = lambda body: chat_call("score: high")
        with pytest.raises(CannotEvaluate) as raised:
            judge(evaluator(server, tmp_path, cache=False), {"criteria": "coherence"})
    says(
        str(raised.value),
        "answered twice with something that is not a judgement",
        "not the JSON object alone",
    )
    assert raised.value.details["answers"] == ["score: high", "score: high"]


def test_a_body_that_is_not_a_chat_completion_is_a_clear_error_not_retried(tmp_path: Path) -> None:
    for body, fact in [
        (b"<html>gateway</html>", "JSON is malformed"),
        (b'{"choices": [{"message": {"tool_calls": "x"}}]}', "$.choices[0].message.tool_calls"),
    ]:
        with ChatServer() as server:
            server.default = lambda request, body=body: raw(body)
            with pytest.raises(CannotEvaluate) as raised:
                judge(evaluator(server, tmp_path, cache=False), {"criteria": "clarity"})
            assert len(server.requests) == 1
        says(str(raised.value), "cannot answer", "not a chat completion", fact)


def test_429_and_500_are_retried_a_401_is_not_and_the_key_is_masked(tmp_path: Path) -> None:
    with ChatServer() as server:
        server.script.extend(
            [
                chat_error(429, "rate_limit_exceeded", "slow down", retry_after=0.3),
                chat_error(500, "server_error", "boom", retry_after=0),
                chat_judgement(0.9),
            ]
        )
        (check,), ctx = judge(evaluator(server, tmp_path), {"criteria": "relevance"})
        assert check.passed and (check.details or {})["retries"] == 2
        assert server.times[1] - server.times[0] >= 0.29
        assert ctx.usage["llm_eval/gpt-4.1"].calls == 3
    with ChatServer() as server:
        server.default = lambda body: chat_error(
            401, "invalid_request_error", f"Incorrect API key provided: {KEY}. " + "x" * 600
        )
        with pytest.raises(CannotEvaluate) as raised:
            judge(evaluator(server, tmp_path), {"criteria": "relevance"})
        assert len(server.requests) == 1
    says(
        str(raised.value),
        "cannot answer",
        "Chat Completions API answered HTTP 401",
        "Incorrect API key provided: ***",
    )
    assert KEY not in str(raised.value) and KEY[:8] not in str(raised.value)


def test_the_key_and_the_base_url_from_the_environment_and_the_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with ChatServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.api)
        keyless = LlmEval({"backend": "openai", "cache": False})
        checks, _ = judge(keyless, {"criteria": ["clarity", "coherence"]})
        assert server.requests == []
        for check in checks:
            assert check.skipped == check.message and not check.passed
            says(
                check.message,
                "the LLM judge (openai) has no API key",
                "OPENAI_API_KEY",
                "secrets.openai_api_key",
            )
        assert LlmEval.secret_values({"model": "gpt-4.1"}) == []
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-openai")
        assert LlmEval.secret_values({"model": "gpt-4.1"}) == [
            "sk-from-env-openai"
        ]  # masked wherever it shows
        (check,), _ = judge(
            LlmEval({"model": "gpt-4.1-mini", "cache": False}), {"criteria": "clarity"}
        )  # inferred
        assert check.passed
        monkeypatch.delenv("OPENAI_API_KEY")
        from_secrets = LlmEval({"backend": "openai", "cache": False})
        from_secrets.secrets = {"openai_api_key": "sk-from-secrets-openai"}
        judge(from_secrets, {"criteria": "clarity"})
    assert [server.key_of(i) for i in range(len(server.headers))] == [
        "sk-from-env-openai",
        "sk-from-secrets-openai",
    ]
    assert server.requests[0]["model"] == "gpt-4.1-mini"


def test_a_redirect_is_not_followed_and_a_huge_body_is_not_read(tmp_path: Path) -> None:
    with ChatServer() as elsewhere, ChatServer() as server:
        server.default = lambda body: (307, {"location": f"{elsewhere.api}/chat/completions"}, {})
        with pytest.raises(CannotEvaluate) as raised:
            judge(evaluator(server, tmp_path, max_retries=0), {"criteria": "relevance"})
        assert elsewhere.requests == [] and len(server.requests) == 1
        says(str(raised.value), "307")
    with ChatServer() as server:
        server.default = lambda body: raw(b" " * (5 * 1024 * 1024))
        with pytest.raises(CannotEvaluate) as raised:
            judge(evaluator(server, tmp_path), {"criteria": "relevance"})
        assert len(server.requests) == 1  # not retried
    says(str(raised.value), "cannot answer", "not read", "more than 4194304")


def test_a_compressed_answer_is_not_inflated(tmp_path: Path) -> None:
    """The bound counts the bytes read: 5 KiB of gzip standing for 5 MiB is refused unread
    (the judge asks for an uncompressed answer), and the request asked for none."""
    import gzip

    bomb = gzip.compress(b" " * (5 * 1024 * 1024))
    with ChatServer() as server:
        server.default = lambda body: (200, {"content-encoding": "gzip"}, bomb)
        with pytest.raises(CannotEvaluate) as raised:
            judge(evaluator(server, tmp_path), {"criteria": "relevance"})
        assert len(server.requests) == 1 and server.headers[0]["accept-encoding"] == "identity"
    says(str(raised.value), "not read", "gzip-encoded")


def test_an_unchanged_artifact_is_answered_from_the_cache(tmp_path: Path) -> None:
    with ChatServer() as server:
        first, _ = judge(evaluator(server, tmp_path), {"criteria": "clarity"})
        again, ctx = judge(evaluator(server, tmp_path), {"criteria": "clarity"})
        assert len(server.requests) == 1 and again[0].score == first[0].score
        assert ctx.usage == {"llm_eval/gpt-4.1": Usage(cached=1, cost_usd=0.0)}
        judge(
            evaluator(server, tmp_path), {"criteria": "clarity"}, context({"report.md": REPORT + "More.\n"})
        )
        assert len(server.requests) == 2


def test_usage_out_of_bounds_is_refused_and_counted_as_the_most(tmp_path: Path) -> None:
    with ChatServer() as server:
        server.default = lambda body: chat_judgement(0.9, prompt_tokens=-1_000_000_000, completion_tokens=5)
        with pytest.raises(CannotEvaluate) as raised:
            judge(evaluator(server, tmp_path, cache=False), {"criteria": "clarity"})
    says(str(raised.value), "usage.input_tokens = -1000000000", "out of bounds")
