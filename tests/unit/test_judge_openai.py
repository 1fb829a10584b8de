"""The ``openai`` judge back end's parts, and how the settings choose a back end: the model's
family, the clear error for a model of the other service, the default model, prices, the cache
key carrying the provider, the translation of ATP's turns to Chat Completions messages, the
strict reading of a chat completion, and the bounded body."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from atp.core.config import load_config
from atp.core.errors import ConfigError
from atp.evaluators.judge.backend import (
    JudgeCall,
    JudgeError,
    infer_backend,
    load_backend,
    model_family,
    pairing_problem,
    price_of,
)
from atp.evaluators.judge.cache import cache_key
from atp.evaluators.judge.judge import Judge, JudgeSettings, backend_of, corrected, read_reply, read_settings
from atp.evaluators.judge.openai_backend import chat_messages, function_tool, read_completion
from atp.evaluators.judge.prompt import JUDGEMENT_TOOL, TOOL_NAME, AnswerProblem, build_prompt
from tests.conftest import write
from tests.facts import says
from tests.judge_server import chat_call, chat_judgement, chat_text, completion

pytest.importorskip("openai")

VERDICT = {"score": 0.75, "explanation": "clear", "issues": [], "strengths": ["short"]}


def body_of(reply: Any) -> bytes:
    return json.dumps(reply[2]).encode()


# --- choosing the back end --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("gpt-4.1", "openai"),
        ("gpt-4o-mini-2024-07-18", "openai"),
        ("o3", "openai"),
        ("o4-mini", "openai"),
        ("chatgpt-4o-latest", "openai"),
        ("ft:gpt-4o-mini:acme::abc", "openai"),
        ("claude-sonnet-4-6", "anthropic"),
        ("omni-judge", None),
        ("o3x", None),
        ("llama-3-70b", None),
        (None, None),
    ],
)
def test_a_models_name_says_whose_it_is(model: str | None, family: str | None) -> None:
    assert model_family(model) == family
    assert infer_backend(model) == (family or "anthropic")


def test_the_settings_choose_the_back_end_and_its_default_model() -> None:
    from atp.evaluators.judge.anthropic_backend import AnthropicJudge
    from atp.evaluators.judge.openai_backend import OpenAIJudge

    assert backend_of(read_settings({})) is AnthropicJudge
    assert backend_of(read_settings({"model": "gpt-4.1-mini"})) is OpenAIJudge  # inferred
    # a base_url (a proxy serving any name) keeps the back end it always was, unless named
    assert backend_of(read_settings({"model": "gpt-4o", "base_url": "http://127.0.0.1:9"})) is AnthropicJudge
    assert backend_of(read_settings({"backend": "openai", "base_url": "http://127.0.0.1:9"})) is OpenAIJudge
    assert backend_of(read_settings({"backend": "openai"})) is OpenAIJudge
    # a name that does not say whose it is: the back end named, or the default
    assert backend_of(read_settings({"backend": "openai", "model": "my-judge"})) is OpenAIJudge
    assert backend_of(read_settings({"model": "my-judge"})) is AnthropicJudge

    openai = read_settings({"backend": "openai", "cache": False})
    judge = Judge(openai, backend_of(openai), "k")
    assert (judge.model, judge.backend_name, judge.price) == ("gpt-4.1", "openai", (2.0, 8.0))
    default = read_settings({"cache": False})
    judge = Judge(default, backend_of(default), "k")
    assert (judge.model, judge.backend_name, judge.price) == ("claude-sonnet-4-6", "anthropic", (3.0, 15.0))
    with pytest.raises(ConfigError) as error:
        load_backend("open-ai")
    says(str(error.value), "'open-ai'", "anthropic, openai")


@pytest.mark.parametrize(
    ("settings", "facts"),
    [
        ({"backend": "anthropic", "model": "gpt-4.1"}, ["'gpt-4.1'", "OpenAI", "backend: openai"]),
        ({"backend": "openai", "model": "claude-sonnet-4-6"}, ["'claude-sonnet-4-6'", "backend: anthropic"]),
    ],
)
def test_a_model_the_back_ends_service_does_not_serve_is_a_clear_error(
    settings: dict[str, Any], facts: list[str]
) -> None:
    with pytest.raises(ConfigError) as error:
        read_settings(settings)
    says(str(error.value), "evaluators.llm_judge", *facts, "base_url")
    # a base URL points at a proxy or compatible server, which may serve any model
    read_settings({**settings, "base_url": "http://127.0.0.1:9"})
    variable = "OPENAI_BASE_URL" if settings["backend"] == "openai" else "ANTHROPIC_BASE_URL"
    assert pairing_problem(settings["backend"], settings["model"], None, {variable: "http://proxy"}) is None
    assert pairing_problem(settings["backend"], settings["model"], None, {}) is not None
    with pytest.raises(ConfigError, match="model"):
        read_settings({"model": ""})


def test_the_error_names_the_config_files_line(tmp_path: Path) -> None:
    path = write(
        tmp_path / "atp.config.yaml",
        "version: '1.0'\nevaluators:\n  llm_judge:\n    backend: anthropic\n    model: o3\n",
    )
    config = load_config(path)
    with pytest.raises(ConfigError) as error:
        config.check_evaluator_settings("llm_judge", JudgeSettings)
    says(str(error.value), "atp.config.yaml:", "'o3'", "backend: openai")


def test_prices_match_a_whole_name_or_a_dated_one() -> None:
    assert price_of("gpt-4o-2024-08-06") == (2.5, 10.0)
    assert price_of("gpt-4o-mini") == (0.15, 0.6)
    assert price_of("o3-pro") == (20.0, 80.0)
    assert price_of("gpt-5.2") is None and price_of("gpt-4o1") is None
    assert price_of("claude-sonnet-4-6") == (3.0, 15.0)
    assert price_of("gpt-4.1", (1.0, 2.0)) == (1.0, 2.0)


def test_the_cache_key_carries_the_provider() -> None:
    prompt = build_prompt("task", "artifact", "clarity")
    shared = {"model": "judge-model", "base_url": "http://127.0.0.1:9/v1", "cache": False}
    keys = {}
    for name in ("anthropic", "openai"):
        settings = read_settings({**shared, "backend": name})
        keys[name] = Judge(settings, backend_of(settings), "k").key(prompt, 0)
    assert keys["anthropic"] != keys["openai"]
    # the Anthropic judge's key is what it was before the OpenAI back end: its cache stays valid
    default = read_settings({"cache": False})
    assert Judge(default, backend_of(default), "k").key(prompt, 0) == cache_key(
        {
            "backend": "anthropic",
            "backend_class": "atp.evaluators.judge.anthropic_backend.AnthropicJudge",
            "base_url": None,
            "model": "claude-sonnet-4-6",
            "temperature": None,
            "max_tokens": 1024,
            "system": prompt.system,
            "user": prompt.user,
            "tool": JUDGEMENT_TOOL,
            "sample": 0,
        }
    )


def test_the_base_url_variable_is_part_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    prompt = build_prompt("task", "artifact", "clarity")
    settings = read_settings({"backend": "openai", "cache": False})
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    before = Judge(settings, backend_of(settings), "k").key(prompt, 0)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert backend_of(settings).endpoint(settings) == "http://127.0.0.1:9/v1"
    assert Judge(settings, backend_of(settings), "k").key(prompt, 0) != before


# --- the request --------------------------------------------------------------------------------


def test_the_request_forces_one_call_of_the_judgement_function() -> None:
    from atp.evaluators.judge.openai_backend import OpenAIJudge

    backend = OpenAIJudge(read_settings({"backend": "openai"}), "k")
    call = JudgeCall("gpt-4.1", "system", [{"role": "user", "content": "judge"}], JUDGEMENT_TOOL, None, 512)
    request = backend.request(call)
    assert request["messages"] == [
        {"role": "system", "content": "system"},
        {"role": "user", "content": "judge"},
    ]
    assert request["tools"] == [function_tool(JUDGEMENT_TOOL)]
    assert request["tools"][0]["function"]["parameters"]["required"] == [
        "score",
        "explanation",
        "issues",
        "strengths",
    ]
    assert request["tool_choice"] == {"type": "function", "function": {"name": TOOL_NAME}}
    assert "parallel_tool_calls" not in request and request["max_completion_tokens"] == 512
    assert "temperature" not in request
    assert backend.request(call._replace(temperature=0.0))["temperature"] == 0.0


def test_a_correction_is_translated_to_a_tool_message() -> None:
    reply = read_completion(body_of(chat_call('{"score": 7}', call_id="call_1")), TOOL_NAME)
    with pytest.raises(AnswerProblem):
        read_reply(reply)
    turns = [{"role": "user", "content": "judge"}, *corrected(reply, "'score' is 7")]
    messages = chat_messages("system", turns)
    assert messages[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": TOOL_NAME, "arguments": '{"score": 7}'}}
        ],
    }
    assert messages[3]["role"] == "tool" and messages[3]["tool_call_id"] == "call_1"
    says(messages[3]["content"], "'score' is 7", TOOL_NAME)
    assert len(messages) == 4
    # a text answer is replayed as the assistant's text, the correction as the user's
    text = read_completion(body_of(chat_text("I think 0.8")), TOOL_NAME)
    messages = chat_messages("system", [{"role": "user", "content": "judge"}, *corrected(text, "not JSON")])
    assert messages[2] == {"role": "assistant", "content": "I think 0.8"}
    assert messages[3]["role"] == "user" and "not JSON" in messages[3]["content"]
    # an empty answer
    empty = read_completion(body_of(completion({})), TOOL_NAME)
    messages = chat_messages("system", [{"role": "user", "content": "judge"}, *corrected(empty, "empty")])
    assert messages[2] == {"role": "assistant", "content": "(no answer)"}


# --- reading the answer -------------------------------------------------------------------------


def test_a_judgement_is_read_with_its_usage_and_model() -> None:
    reply = read_completion(
        body_of(chat_call(json.dumps(VERDICT), prompt_tokens=11, completion_tokens=7)), TOOL_NAME
    )
    assert reply.tool_input == VERDICT and reply.tool_use_id == "call_test"
    assert (reply.input_tokens, reply.output_tokens, reply.model) == (11, 7, "gpt-4.1")
    assert read_reply(reply).score == 0.75
    # usage the service reports is passed on as sent, for the judge to check against its bounds
    hostile = read_completion(
        body_of(chat_judgement(0.5, prompt_tokens=-5, completion_tokens="many")), TOOL_NAME
    )
    assert (hostile.input_tokens, hostile.output_tokens) == (-5, "many")
    assert read_completion(b'{"choices": [{"message": {"content": "x"}}]}', TOOL_NAME).input_tokens == 0


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ("{not json", "not the JSON object alone"),
        ('{"score": 0.5, "score": 1}', "gives 'score' twice"),
        ("null", "not an object"),
        ("[" * 100_000, "nested too deeply"),
        ('{"score": 2, "explanation": "", "issues": [], "strengths": []}', "outside 0-1"),
        ("", "record_judgement has no arguments"),
    ],
)
def test_arguments_that_are_not_a_judgement_say_what_is_wrong(arguments: str, problem: str) -> None:
    reply = read_completion(body_of(chat_call(arguments)), TOOL_NAME)
    with pytest.raises(AnswerProblem, match=problem):
        read_reply(reply)


def test_another_function_or_two_calls_or_a_text_answer() -> None:
    other = read_completion(body_of(chat_call(json.dumps(VERDICT), name="run_shell")), TOOL_NAME)
    with pytest.raises(AnswerProblem, match="calls the tool 'run_shell'"):
        read_reply(other)
    two = completion(
        {
            "tool_calls": [
                {
                    "id": f"c{i}",
                    "type": "function",
                    "function": {"name": TOOL_NAME, "arguments": json.dumps(VERDICT)},
                }
                for i in range(2)
            ]
        }
    )
    with pytest.raises(AnswerProblem, match="2 times"):
        read_reply(read_completion(body_of(two), TOOL_NAME))
    assert read_reply(read_completion(body_of(chat_text(json.dumps(VERDICT))), TOOL_NAME)).score == 0.75
    refused = read_completion(body_of(completion({"refusal": "I cannot judge this."})), TOOL_NAME)
    assert refused.text == "I cannot judge this."
    with pytest.raises(AnswerProblem, match="not the JSON object alone"):
        read_reply(refused)


@pytest.mark.parametrize(
    ("body", "facts"),
    [
        (b"<html>busy</html>", ["not a chat completion", "malformed"]),
        (b"[1, 2]", ["not a chat completion", "Expected `object`, got `array`"]),
        (b'{"choices": "none"}', ["not a chat completion", "$.choices"]),
        (b'{"choices": [{"message": {"content": 5}}]}', ["$.choices[0].message.content"]),
        (b'{"choices": [{"message": {"tool_calls": [{"function": {"arguments": {}}}]}}]}', ["arguments"]),
        (b'{"choices": []}', ["no choice"]),
        (b"[" * 100_000, ["not a chat completion"]),
    ],
)
def test_a_body_that_is_not_a_chat_completion_is_a_judge_error(body: bytes, facts: list[str]) -> None:
    with pytest.raises(JudgeError) as error:
        read_completion(body, TOOL_NAME)
    says(str(error.value), "Chat Completions API", *facts)
    assert len(str(error.value)) < 400


# --- the bounded body ---------------------------------------------------------------------------


def test_a_body_past_the_limit_is_not_read() -> None:
    import httpx

    from atp.evaluators.judge.bounded import AnswerTooLarge, bounding

    async def chunks(count: int) -> AsyncIterator[bytes]:
        for _ in range(count):
            yield b"x" * 1000

    def answer(request: httpx.Request) -> httpx.Response:
        count = int(request.url.params["chunks"])
        if request.url.path == "/declared":
            return httpx.Response(200, content=b"y" * count * 1000)  # with its content-length
        return httpx.Response(200, content=chunks(count))  # chunked: no length said

    async def fetch(path: str, count: int) -> bytes:
        async with httpx.AsyncClient(
            transport=httpx.MockTransport(answer), event_hooks={"response": [bounding(4500)]}
        ) as client:
            return (await client.get(f"http://judge{path}", params={"chunks": count})).content

    async def main() -> None:
        assert len(await fetch("/stream", 4)) == 4000
        assert len(await fetch("/declared", 4)) == 4000
        with pytest.raises(AnswerTooLarge, match="larger than 4500 bytes"):
            await fetch("/stream", 5)
        with pytest.raises(AnswerTooLarge, match="5000 bytes, more than 4500"):
            await fetch("/declared", 5)

    anyio.run(main)
