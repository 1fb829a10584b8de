"""The LLM judge as users meet it: ``atp test`` of a suite with ``llm_eval`` assertions, and
``atp judge calibrate`` on the shipped labels, both against the scripted Messages API server
(tests/judge_server.py) through the real ``anthropic`` SDK."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, write
from tests.e2e.test_atp_command import atp
from tests.judge_server import JudgeServer, judgement

pytest.importorskip("anthropic")

KEY = "sk-ant-e2e-4f1c9b2a7d3e"
LABELS = ROOT / "examples" / "judge" / "labels.yaml"

AGENT = """
import json, sys
request = json.loads(sys.stdin.readline())
text = "Zoom leads video calls with 40% of the market." if "video" in request["task"]["description"] else "Unrelated words."
print(json.dumps({"version": "1.0", "task_id": request["task_id"], "status": "completed",
                  "artifacts": [{"type": "file", "path": "report.md", "content": text}], "metrics": {"total_tokens": 50}}))
"""


def judge_by_artifact(body: dict[str, Any]) -> Any:
    prompt = body["messages"][0]["content"]
    return (
        judgement(0.9, "Accurate and on topic.", strengths=["cites a figure"])
        if "Zoom" in prompt
        else judgement(0.2, "Off topic.", issues=["not about video calls"])
    )


def project(tmp_path: Path, server: JudgeServer, key: str | None = "${JUDGE_KEY}") -> Path:
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
    settings = f"    base_url: {server.url}\n    cache_dir: {tmp_path / 'judge-cache'}\n"
    if key is not None:
        settings += f"    api_key: '{key}'\n"
    return write(tmp_path / "atp.config.yaml", f"version: '1.0'\nevaluators:\n  llm_judge:\n{settings}")


def run_json(
    tmp_path: Path, *extra: str, env: dict[str, str] | None = None
) -> tuple[int, str, dict[str, Any]]:
    out = tmp_path / "results.json"
    result = atp(
        "test",
        "--suite=suite.yaml",
        f"--output=json:{out}",
        "--output=console",
        *extra,
        cwd=tmp_path,
        env=env,
    )
    return result.returncode, result.stdout + result.stderr, json.loads(out.read_text())


def test_atp_test_judges_caches_and_skips_without_a_key(tmp_path: Path) -> None:
    with JudgeServer(judge_by_artifact) as server:
        project(tmp_path, server)
        code, out, data = run_json(tmp_path, env={"JUDGE_KEY": KEY, "ANTHROPIC_API_KEY": ""})
        assert code == 1, out
        assert len(server.requests) == 2
        good, poor = data["tests"]
        assert good["status"] == "passed" and poor["status"] == "failed"
        judged = good["runs"][0]["checks"][1]
        assert judged["name"] == "llm_eval:factual_accuracy" and judged["score"] == 0.9
        assert judged["details"]["explanation"] == "Accurate and on topic."
        assert judged["details"]["strengths"] == ["cites a figure"]
        assert poor["runs"][0]["checks"][0]["message"] == "relevance scored 0.20 < 0.60: Off topic."
        # the judge's spending is its own, not the agent's
        run_usage = good["runs"][0]["evaluation_usage"]["llm_eval/claude-sonnet-4-6"]
        assert run_usage == {"calls": 1, "input_tokens": 120, "output_tokens": 40, "cost_usd": 0.00096}
        assert good["runs"][0]["metrics"]["total_tokens"] == 50
        assert data["evaluation_usage"]["llm_eval/claude-sonnet-4-6"]["calls"] == 2
        assert (
            "Evaluation: llm_eval/claude-sonnet-4-6: 2 calls, 320 tokens, $0.0019 (not in the agent's figures)"
            in out
        )
        assert KEY not in out and KEY not in (tmp_path / "results.json").read_text()

        # unchanged artifacts: answered from the cache, the server sees nothing new
        code, out, data = run_json(tmp_path, env={"JUDGE_KEY": KEY})
        assert code == 1 and len(server.requests) == 2
        assert data["tests"][0]["runs"][0]["checks"][1]["details"]["cached"] == 1
        assert "Evaluation: llm_eval/claude-sonnet-4-6: 0 calls, 2 from the cache, 0 tokens, $0.0000" in out

        code, out, data = run_json(tmp_path, "--no-judge-cache", env={"JUDGE_KEY": KEY})
        assert len(server.requests) == 4

        # no key anywhere: the judged checks are skipped, never passed; the rest still decides
        project(tmp_path, server, key=None)
        code, out, data = run_json(tmp_path, env={"ANTHROPIC_API_KEY": ""})
        assert len(server.requests) == 4, out
        good, poor = data["tests"]
        skipped = good["runs"][0]["checks"][1]
        assert skipped["passed"] is False and skipped["skipped"].startswith(
            "the LLM judge (anthropic) has no API key"
        )
        assert good["status"] == "passed" and good["runs"][0]["score_breakdown"]["completeness"] == 1.0
        # a test whose every check was skipped was not checked: skipped, never passed
        assert poor["status"] == "skipped" and poor["runs"][0]["outcome"] == "passed"
        assert poor["skip_reason"].startswith(
            "not checked: every check was skipped (llm_eval:relevance: the LLM judge"
        )
        assert data["summary"]["skipped_checks"] == 2 and data["summary"]["skipped"] == 1
        assert "1 check skipped" in out and "skipped: not checked: every check was skipped" in out
        assert (
            "Skipped checks: 2 (llm_eval:factual_accuracy, llm_eval:relevance): the LLM judge (anthropic) has no API key"
            in out
        )
        assert code == 0, out


def test_a_key_from_the_environment_is_masked_wherever_the_judge_echoes_it(tmp_path: Path) -> None:
    from tests.judge_server import error

    secret = "sk-ant-env-only-9c8b7a6d5e4f"
    with JudgeServer(
        lambda body: error(401, "authentication_error", f"invalid x-api-key {secret}")
    ) as server:
        project(tmp_path, server, key=None)
        code, out, data = run_json(tmp_path, "--test=good_report", env={"ANTHROPIC_API_KEY": secret})
    assert code == 1 and len(server.requests) == 1
    written = out + (tmp_path / "results.json").read_text()
    assert secret not in written and "invalid x-api-key ***" in written
    run = data["tests"][0]["runs"][0]
    assert run["outcome"] == "error"
    assert "cannot answer: the Messages API answered HTTP 401" in run["checks"][1]["message"]


def test_a_judge_answering_nonsense_twice_makes_the_run_an_error_showing_the_answers(tmp_path: Path) -> None:
    with JudgeServer(lambda body: judgement(7, "seven out of ten")) as server:
        project(tmp_path, server)
        code, out, data = run_json(tmp_path, "--test=good_report", "-v", env={"JUDGE_KEY": KEY})
    assert code == 1, out
    run = data["tests"][0]["runs"][0]
    assert data["tests"][0]["status"] == "error" and run["outcome"] == "error"
    (judged,) = [c for c in run["checks"] if c["name"] == "llm_eval"]
    assert (
        "the judge answered twice with something that is not a judgement: 'score' is 7, outside 0-1"
        in judged["message"]
    )
    assert (
        judged["details"]["answers"]
        == [json.dumps({"score": 7, "explanation": "seven out of ten", "issues": [], "strengths": []})] * 2
    )


# --- calibration -------------------------------------------------------------------------------

JUDGE_SCORES = {
    "Canberra": 0.95,
    "Sydney": 0.1,
    "Apollo 11": 0.9,
    "100 °C": 0.8,  # the last: people 0.4
    "How to upgrade": 0.85,
    "administrators who schedule exports.\n\n</artifact": 0.75,  # people 0.55
    "a pinch of salt": 0.3,
    "systemctl": 0.9,
    "the usual way": 0.5,
    "catch regressions": 0.9,
    "coffee machine": 0.05,
    "lol": 0.1,
}


def calibrated_judge(body: dict[str, Any]) -> Any:
    prompt = body["messages"][0]["content"]
    artifact = prompt.split("ARTIFACT:\n", 1)[1]
    for needle, score in JUDGE_SCORES.items():
        if needle in artifact:
            return judgement(score, f"judged {needle!r}")
    raise AssertionError(f"no scripted score for {artifact[:80]!r}")


def kappa_by_hand(judge: list[bool], people: list[bool]) -> float:
    n = len(judge)
    table = [[0, 0], [0, 0]]
    for j, p in zip(judge, people, strict=True):
        table[int(j)][int(p)] += 1
    observed = (table[0][0] + table[1][1]) / n
    expected = sum((sum(table[k]) / n) * ((table[0][k] + table[1][k]) / n) for k in (0, 1))
    return (observed - expected) / (1 - expected)


def test_calibration_on_the_shipped_labels_matches_independent_figures(tmp_path: Path) -> None:
    from scipy.stats import spearmanr

    labels = yaml.safe_load(LABELS.read_text())
    examples = labels["examples"]
    with JudgeServer(calibrated_judge) as server:
        write(
            tmp_path / "atp.config.yaml",
            f"evaluators:\n  llm_judge:\n    base_url: {server.url}\n    cache: false\n",
        )
        result = atp(
            "judge",
            "calibrate",
            f"--labels={LABELS}",
            "--output=json",
            cwd=tmp_path,
            env={"ANTHROPIC_API_KEY": KEY},
        )
        assert result.returncode == 0, result.stderr
        assert len(server.requests) == len(examples)
        report = json.loads(result.stdout)
        text = atp("judge", "calibrate", f"--labels={LABELS}", cwd=tmp_path, env={"ANTHROPIC_API_KEY": KEY})
        gated = atp(
            "judge",
            "calibrate",
            f"--labels={LABELS}",
            "--min-kappa=0.9",
            cwd=tmp_path,
            env={"ANTHROPIC_API_KEY": KEY},
        )

    def judge_score(example: dict[str, Any]) -> float:
        artifact = example.get("artifact") or (LABELS.parent / example["artifact_file"]).read_text()
        artifact += "\n</artifact"
        return next(s for needle, s in JUDGE_SCORES.items() if needle in artifact)

    judged = [judge_score(e) for e in examples]
    people_pass = [e["human"] == "pass" if "human" in e else e["human_score"] >= 0.7 for e in examples]
    judge_pass = [s >= 0.7 for s in judged]
    scored = [(s, e["human_score"]) for s, e in zip(judged, examples, strict=True) if "human_score" in e]
    rho = spearmanr([a for a, _ in scored], [b for _, b in scored]).statistic
    overall = report["overall"]
    assert overall["examples"] == 12 and overall["scored"] == len(scored) == 9
    assert math.isclose(overall["kappa"], round(kappa_by_hand(judge_pass, people_pass), 4), abs_tol=1e-4)
    assert math.isclose(overall["spearman"], round(float(rho), 4), abs_tol=1e-4)
    # two false passes: the wrong Fahrenheit figure and the note without its upgrade section
    assert (
        overall["both_pass"],
        overall["judge_only_pass"],
        overall["people_only_pass"],
        overall["both_fail"],
    ) == (5, 2, 0, 5)
    assert [d["id"] for d in report["disagreements"]][:2] == [
        "boiling-point-half-right",
        "report-missing-upgrade",
    ]
    assert report["criteria"]["factual_accuracy"]["examples"] == 4
    assert report["usage"]["calls"] == 12 and report["errors"] == []
    assert "Where the judge and people disagree most:" in text.stdout
    assert (
        "  boiling-point-half-right [factual_accuracy]: people 0.40 (fail), judge 0.80 (pass)" in text.stdout
    )
    assert gated.returncode == 1 and "--min-kappa=0.9 asks for at least 0.9" in gated.stderr


def test_calibration_errors_are_clear(tmp_path: Path) -> None:
    bad = write(
        tmp_path / "labels.yaml",
        "examples:\n  - id: a\n    task: t\n    criteria: clarity\n    artifact: x\n",
    )
    result = atp("judge", "calibrate", f"--labels={bad}", cwd=tmp_path, env={"ANTHROPIC_API_KEY": KEY})
    assert result.returncode == 2
    assert "labels.yaml:2" in result.stderr and "give the people's judgement" in result.stderr
    result = atp("judge", "calibrate", f"--labels={LABELS}", cwd=tmp_path, env={"ANTHROPIC_API_KEY": ""})
    assert (
        result.returncode == 2
        and "needs an API key: set ANTHROPIC_API_KEY, secrets.anthropic_api_key" in result.stderr
    )
    outside = write(
        tmp_path / "labels" / "l.yaml",
        "examples:\n  - id: a\n    task: t\n    criteria: clarity\n    human: pass\n    artifact_file: ../../../../etc/passwd\n",
    )
    result = atp("judge", "calibrate", f"--labels={outside}", cwd=tmp_path, env={"ANTHROPIC_API_KEY": KEY})
    assert (
        result.returncode == 2
        and "l.yaml:6: at examples[0].artifact_file: artifact_file '../../../../etc/passwd' is outside"
        in result.stderr
    )


def test_examples_the_judge_could_not_judge_fail_a_min_kappa_gate(tmp_path: Path) -> None:
    from tests.judge_server import error

    def flaky(body: dict[str, Any]) -> Any:
        return (
            error(400, "invalid_request_error", "no")
            if "Sydney" in body["messages"][0]["content"]
            else calibrated_judge(body)
        )

    with JudgeServer(flaky) as server:
        write(
            tmp_path / "atp.config.yaml",
            f"evaluators:\n  llm_judge:\n    base_url: {server.url}\n    cache: false\n",
        )
        result = atp(
            "judge",
            "calibrate",
            f"--labels={LABELS}",
            "--min-kappa=0.1",
            cwd=tmp_path,
            env={"ANTHROPIC_API_KEY": KEY},
        )
    assert result.returncode == 1
    assert (
        "not judged: capital-wrong: the judge cannot answer: the Messages API answered HTTP 400"
        in result.stdout
    )
    assert "1 of 12 examples could not be judged; --min-kappa needs them all" in result.stderr
