"""An OpenAI model as the judge, as users meet it: ``atp test`` of a suite with ``llm_eval``
assertions and ``atp judge calibrate``, the config choosing ``backend: openai`` (or a model's
name choosing it), against the scripted Chat Completions server (tests/judge_server.py,
:class:`ChatServer`) through the real ``openai`` SDK."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write
from tests.e2e.test_atp_command import atp
from tests.e2e.test_llm_judge_e2e import AGENT, JUDGE_SCORES, LABELS, kappa_by_hand, run_json
from tests.facts import says
from tests.judge_server import ChatServer, chat_call, chat_error, chat_judgement, prompt_in, raw

pytest.importorskip("openai")

KEY = "sk-proj-e2e-7b1d4c9e2a6f"
NO_KEYS = {"OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": "", "OPENAI_BASE_URL": ""}


def judge_by_artifact(body: dict[str, Any]) -> Any:
    return (
        chat_judgement(0.9, "Accurate and on topic.", strengths=["cites a figure"])
        if "Zoom" in prompt_in(body)
        else chat_judgement(0.2, "Off topic.", issues=["not about video calls"])
    )


def project(
    tmp_path: Path,
    server: ChatServer,
    judge: str = "    backend: openai\n",
    key: bool = True,
    base_url: bool = True,
) -> Path:
    import sys

    agent = write(tmp_path / "agent.py", AGENT)
    write(
        tmp_path / "suite.yaml",
        "test_suite: judged\n"
        f"agents:\n  - name: writer\n    type: cli\n    command: [{sys.executable!r}, {str(agent)!r}]\n"
        "tests:\n"
        "  - id: good_report\n    task: {description: 'Report on video calls'}\n"
        "    assertions:\n"
        "      - {type: artifact_exists, config: {path: report.md}}\n"
        "      - {type: llm_eval, config: {criteria: factual_accuracy, artifact: report.md}}\n"
        "  - id: poor_report\n    task: {description: 'Report on chat tools'}\n"
        "    assertions: [{type: llm_eval, config: {criteria: relevance, threshold: 0.6}}]\n",
    )
    settings = judge + (f"    base_url: {server.api}\n" if base_url else "")
    settings += f"    cache_dir: {tmp_path / 'judge-cache'}\n"
    if key:
        settings += "    api_key: ${JUDGE_KEY}\n"
    return write(tmp_path / "atp.config.yaml", f"version: '1.0'\nevaluators:\n  llm_judge:\n{settings}")


def test_atp_test_with_an_openai_judge_passes_fails_and_caches(tmp_path: Path) -> None:
    with ChatServer(judge_by_artifact) as server:
        project(tmp_path, server)
        code, out, data = run_json(tmp_path, env={**NO_KEYS, "JUDGE_KEY": KEY})
        assert code == 1, out
        assert len(server.requests) == 2 and {server.key_of(i) for i in range(2)} == {KEY}
        good, poor = data["tests"]
        assert good["status"] == "passed" and poor["status"] == "failed"
        judged = good["runs"][0]["checks"][1]
        assert judged["name"] == "llm_eval:factual_accuracy" and judged["score"] == 0.9
        assert (
            judged["details"]["explanation"] == "Accurate and on topic."
            and judged["details"]["model"] == "gpt-4.1"
        )
        assert poor["runs"][0]["checks"][0]["message"] == "relevance scored 0.20 < 0.60: Off topic."
        # the judge's spending, apart from the agent's: 150 + 50 tokens at gpt-4.1's $2 / $8 per million
        run_usage = good["runs"][0]["evaluation_usage"]["llm_eval/gpt-4.1"]
        assert run_usage == {"calls": 1, "input_tokens": 150, "output_tokens": 50, "cost_usd": 0.0007}
        assert good["runs"][0]["metrics"]["total_tokens"] == 50
        assert (
            "Evaluation: llm_eval/gpt-4.1: 2 calls, 400 tokens, $0.0014 (not in the agent's figures)" in out
        )
        assert KEY not in out and KEY not in (tmp_path / "results.json").read_text()

        code, out, data = run_json(tmp_path, env={**NO_KEYS, "JUDGE_KEY": KEY})
        assert code == 1 and len(server.requests) == 2
        assert "Evaluation: llm_eval/gpt-4.1: 0 calls, 2 from the cache, 0 tokens, $0.0000" in out


def test_the_models_name_chooses_openai_and_no_key_skips_the_checks(tmp_path: Path) -> None:
    with ChatServer(judge_by_artifact) as server:
        # (the server's address from the SDK's variable: a base_url in the settings would keep
        # the back end the one it always was, anthropic)
        project(tmp_path, server, judge="    model: gpt-4.1-mini\n", key=False, base_url=False)
        code, out, data = run_json(tmp_path, env={**NO_KEYS, "OPENAI_BASE_URL": server.api})
        assert server.requests == [] and code == 0, out
        skipped = data["tests"][0]["runs"][0]["checks"][1]
        assert skipped["passed"] is False
        says(
            skipped["skipped"],
            "the LLM judge (openai) has no API key",
            "OPENAI_API_KEY",
            "secrets.openai_api_key",
        )
        assert data["tests"][1]["status"] == "skipped"

        code, out, data = run_json(
            tmp_path, env={**NO_KEYS, "OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": server.api}
        )
        assert code == 1 and len(server.requests) == 2, out
        assert server.requests[0]["model"] == "gpt-4.1-mini" and server.key_of(0) == KEY
        assert "Evaluation: llm_eval/gpt-4.1-mini: 2 calls, 400 tokens, $0.0003" in out
        assert KEY not in out and KEY not in (tmp_path / "results.json").read_text()


def test_rate_limits_and_server_errors_are_retried(tmp_path: Path) -> None:
    with ChatServer(judge_by_artifact) as server:
        server.script.extend(
            [
                chat_error(429, "rate_limit_exceeded", "slow down", retry_after=0),
                chat_error(500, retry_after=0),
            ]
        )
        project(tmp_path, server)
        code, out, data = run_json(tmp_path, "--test=good_report", env={**NO_KEYS, "JUDGE_KEY": KEY})
    assert code == 0, out
    assert len(server.requests) == 3
    judged = data["tests"][0]["runs"][0]["checks"][1]
    assert judged["passed"] and judged["details"]["retries"] == 2
    assert data["tests"][0]["runs"][0]["evaluation_usage"]["llm_eval/gpt-4.1"]["calls"] == 3


def test_a_malformed_answer_makes_the_run_an_error_saying_what_came_back(tmp_path: Path) -> None:
    with ChatServer(lambda body: chat_call('{"score": 0.9, "explanation": "fine",}')) as server:
        project(tmp_path, server)
        code, out, data = run_json(tmp_path, "--test=good_report", env={**NO_KEYS, "JUDGE_KEY": KEY})
        assert code == 1 and len(server.requests) == 2, out
        run = data["tests"][0]["runs"][0]
        assert data["tests"][0]["status"] == "error" and run["outcome"] == "error"
        (judged,) = [c for c in run["checks"] if c["name"] == "llm_eval"]
        says(judged["message"], "answered twice with something that is not a judgement", "not valid JSON")
        assert judged["details"]["answers"] == ['{"score": 0.9, "explanation": "fine",}'] * 2

        server.default = lambda body: raw(b"<html>502 Bad Gateway</html>")
        code, out, data = run_json(
            tmp_path, "--test=good_report", "--no-judge-cache", env={**NO_KEYS, "JUDGE_KEY": KEY}
        )
        assert code == 1 and len(server.requests) == 3, out  # not retried
        run = data["tests"][0]["runs"][0]
        assert run["outcome"] == "error"
        (judged,) = [c for c in run["checks"] if c["name"] == "llm_eval"]
        says(judged["message"], "cannot answer", "not a chat completion", "JSON is malformed")


def test_a_key_from_the_environment_is_masked_wherever_the_judge_echoes_it(tmp_path: Path) -> None:
    secret = "sk-proj-env-only-5e4f3a2b1c0d"
    with ChatServer(
        lambda body: chat_error(401, "invalid_request_error", f"Incorrect API key provided: {secret}.")
    ) as server:
        project(tmp_path, server, key=False)
        code, out, data = run_json(
            tmp_path, "--test=good_report", "-v", env={**NO_KEYS, "OPENAI_API_KEY": secret}
        )
    assert code == 1 and len(server.requests) == 1
    written = out + (tmp_path / "results.json").read_text()
    assert secret not in written and "Incorrect API key provided: ***" in written
    run = data["tests"][0]["runs"][0]
    says(run["checks"][1]["message"], "cannot answer", "Chat Completions API answered HTTP 401")


def test_a_model_the_back_ends_service_does_not_serve_is_a_located_config_error(tmp_path: Path) -> None:
    write(
        tmp_path / "suite.yaml",
        "test_suite: s\nagents: [{name: a, type: cli, command: [x]}]\ntests:\n"
        "  - id: t\n    task: {description: d}\n    assertions: [{type: llm_eval, config: {criteria: clarity}}]\n",
    )
    write(
        tmp_path / "atp.config.yaml",
        "version: '1.0'\nevaluators:\n  llm_judge:\n    backend: anthropic\n    model: gpt-4.1\n",
    )
    result = atp("test", "--suite=suite.yaml", cwd=tmp_path, env=NO_KEYS)
    assert result.returncode == 2, result.stdout + result.stderr
    says(result.stderr, "atp.config.yaml:", "'gpt-4.1'", "backend: openai")


def calibrated_judge(body: dict[str, Any]) -> Any:
    artifact = prompt_in(body).split("ARTIFACT:\n", 1)[1]
    for needle, score in JUDGE_SCORES.items():
        if needle in artifact:
            return chat_judgement(score, f"judged {needle!r}")
    raise AssertionError(f"no scripted score for {artifact[:80]!r}")


def test_calibration_with_an_openai_judge(tmp_path: Path) -> None:
    import yaml

    examples = yaml.safe_load(LABELS.read_text())["examples"]
    with ChatServer(calibrated_judge) as server:
        write(
            tmp_path / "atp.config.yaml",
            f"evaluators:\n  llm_judge:\n    backend: openai\n    base_url: {server.api}\n    cache: false\n",
        )
        env = {**NO_KEYS, "OPENAI_API_KEY": KEY}
        result = atp("judge", "calibrate", f"--labels={LABELS}", "--output=json", cwd=tmp_path, env=env)
        assert result.returncode == 0, result.stderr
        assert len(server.requests) == len(examples) and server.key_of() == KEY
        report = json.loads(result.stdout)
        text = atp("judge", "calibrate", f"--labels={LABELS}", cwd=tmp_path, env=env)
        keyless = atp("judge", "calibrate", f"--labels={LABELS}", cwd=tmp_path, env=NO_KEYS)

    def judge_score(example: dict[str, Any]) -> float:
        artifact = example.get("artifact") or (LABELS.parent / example["artifact_file"]).read_text()
        return next(s for needle, s in JUDGE_SCORES.items() if needle in artifact + "\n</artifact")

    judge_pass = [judge_score(e) >= 0.7 for e in examples]
    people_pass = [e["human"] == "pass" if "human" in e else e["human_score"] >= 0.7 for e in examples]
    assert (report["backend"], report["model"]) == ("openai", "gpt-4.1")
    assert math.isclose(
        report["overall"]["kappa"], round(kappa_by_hand(judge_pass, people_pass), 4), abs_tol=1e-4
    )
    assert report["usage"]["calls"] == 12 and report["errors"] == []
    # 12 calls of 150 + 50 tokens at gpt-4.1's prices
    assert math.isclose(report["usage"]["cost_usd"], 12 * 0.0007, abs_tol=1e-9)
    assert "examples; openai gpt-4.1, threshold 0.70" in text.stdout and KEY not in text.stdout + text.stderr
    assert keyless.returncode == 2
    says(keyless.stderr, "needs an API key", "OPENAI_API_KEY", "secrets.openai_api_key")
