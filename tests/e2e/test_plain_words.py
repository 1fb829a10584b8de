"""What ``atp`` shows, read by a newcomer (issue 28, item 8): a score that varies a lot is "very
unstable" (never "critical", a word of checks), a test's time says per run and in total, a CI
log lists each test once, an interval of scores stays within 0-100, and ``-q`` is taken by the
commands that run a suite as ``atp test`` takes it."""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import subprocess
from pathlib import Path
from typing import Any

import pytest

from atp.core.stats import t_quantile
from tests.conftest import ATP, PYTHON, write

AGENT = """\
import json, sys

request = json.loads(sys.stdin.readline())
run = (request.get("metadata") or {}).get("run_number")
text = "no" if run == 3 else "ok"
print(json.dumps({"version": "1.0", "task_id": request["task_id"], "status": "completed",
                  "artifacts": [{"type": "file", "path": "answer.md", "content": text}], "metrics": {}}))
"""
"""Answers ``ok``, except in its third run of a test: the contains check fails there."""

TESTS = ("alpha", "beta", "gamma")


def atp(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([ATP, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def project(folder: Path, runs: int = 3) -> Path:
    agent = write(folder / "agent.py", AGENT)
    return write(
        folder / "suite.yaml",
        "test_suite: words\n"
        f"defaults: {{runs_per_test: {runs}}}\n"
        "agents:\n"
        f"  - {{name: flip, type: cli, command: {[PYTHON, str(agent)]!r}}}\n"
        f"  - {{name: steady, type: cli, command: {[PYTHON, str(agent)]!r}}}\n"
        "tests:\n"
        + "".join(
            f"  - id: {t}\n"
            f"    task: {{description: {t}}}\n"
            "    assertions:\n"
            "      - {type: artifact_exists, config: {path: answer.md}}\n"
            "      - {type: contains, config: {path: answer.md, pattern: ok}}\n"
            for t in TESTS
        ),
    )


@pytest.fixture(scope="module")
def ran(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], Path]:
    """Three tests of three runs, the third failing, run as in a CI job (stdout is a pipe)."""
    folder = tmp_path_factory.mktemp("words")
    suite = project(folder)
    done = atp(
        "test",
        f"--suite={suite}",
        "--agent=flip",
        "--output=console",
        "--output=json:results.json",
        "--output=junit:report.xml",
        cwd=folder,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    return done, json.loads((folder / "results.json").read_text()), folder


def test_without_a_terminal_each_test_is_printed_once(ran: tuple[Any, Any, Path]) -> None:
    out = ran[0].stdout
    for test_id in TESTS:
        lines = [line for line in out.splitlines() if re.match(rf"\s+✗ {test_id}\b", line)]
        assert len(lines) == 1, out
    # its failure is printed under it as it finishes, and not again in the report
    assert out.count("- run 3: contains:answer.md: expected text") == len(TESTS), out
    assert "Tests:" not in out  # every test was printed as it finished
    assert out.index("✗ gamma") < out.index("Summary: 0 passed, 3 failed")


def test_a_very_variable_score_is_very_unstable_not_critical(ran: tuple[Any, Any, Path]) -> None:
    done, results, folder = ran
    line = next(line for line in done.stdout.splitlines() if "✗ alpha" in line)
    assert "2/3 runs passed, very unstable, flaky" in line
    assert "critical" not in done.stdout
    score = results["tests"][0]["statistics"]["score"]
    assert score["stability"] == "critical"  # the JSON value is kept (the format only adds within 1.x)
    report = (folder / "report.xml").read_text()
    assert '<property name="alpha.stability" value="very unstable"' in report


def test_the_time_of_several_runs_says_per_run_and_total(ran: tuple[Any, Any, Path]) -> None:
    done, results, _ = ran
    test = results["tests"][0]
    total = test["duration_seconds"]
    line = next(line for line in done.stdout.splitlines() if "✗ alpha" in line)
    shown = re.search(r"time (\d+\.\d+)s/run, (\d+\.\d+)s total", line)
    assert shown is not None, line
    assert float(shown.group(2)) == pytest.approx(total, abs=0.006)
    assert float(shown.group(1)) == pytest.approx(total / 3, abs=0.006)


def test_the_interval_of_a_score_stays_within_0_to_100(ran: tuple[Any, Any, Path]) -> None:
    _, results, folder = ran
    test = results["tests"][0]
    scores = [run["score"] for run in test["runs"]]
    mean, std = statistics.fmean(scores), statistics.stdev(scores)
    raw_high = mean + t_quantile(0.975, len(scores) - 1) * std / math.sqrt(len(scores))
    assert raw_high > 100  # Student's t alone would pass 100
    low, high = test["statistics"]["score"]["ci_95"]
    assert high == 100.0 and 0.0 <= low < mean
    assert low == pytest.approx(mean - (raw_high - mean))  # the lower end is the t interval's
    junit = re.search(r'name="alpha\.ci_95" value="([^"]+)\.\.([^"]+)"', (folder / "report.xml").read_text())
    assert junit is not None and float(junit.group(2)) == 100.0
    assert float(junit.group(1)) == pytest.approx(low, rel=1e-3)
    verbose = atp("report", str(next((folder / ".atp" / "runs").iterdir())), "-v", cwd=folder)
    assert f"score: 95% CI [{low:.1f}, 100.0]" in verbose.stdout, verbose.stdout


def test_baseline_save_takes_quiet(tmp_path: Path) -> None:
    suite = project(tmp_path)
    saved = atp("baseline", "save", f"--suite={suite}", "--agent=flip", "--output=b.json", "-q", cwd=tmp_path)
    assert saved.returncode == 0, saved.stdout + saved.stderr
    out = saved.stdout
    assert "ATP Test Results" not in out and "Running" not in out  # no header, no progress
    assert "✗ alpha" in out and "Summary: 0 passed, 3 failed" in out  # what did not pass, and the summary
    assert json.loads((tmp_path / "b.json").read_text())["tests"].keys() == set(TESTS)
    both = atp("baseline", "save", f"--suite={suite}", "--output=c.json", "-q", "-v", cwd=tmp_path)
    assert both.returncode == 2 and "--verbose and --quiet cannot be used together" in both.stderr


def test_baseline_compare_and_compare_take_quiet(tmp_path: Path) -> None:
    suite = project(tmp_path)
    assert (
        atp(
            "baseline", "save", f"--suite={suite}", "--agent=flip", "--output=b.json", cwd=tmp_path
        ).returncode
        == 0
    )
    compared = atp(
        "baseline",
        "compare",
        f"--suite={suite}",
        "--agent=flip",
        "--baseline=b.json",
        "--quiet",
        cwd=tmp_path,
    )
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert "ATP Test Results" not in compared.stdout and "Summary: 0 passed, 3 failed" in compared.stdout
    assert "ATP Baseline Comparison" in compared.stdout
    stored = atp("baseline", "compare", "--baseline=b.json", "-q", cwd=tmp_path)
    assert stored.returncode == 2 and "--quiet names how to run a suite" in stored.stderr
    agents = atp("compare", "--agents=flip,steady", f"--suite={suite}", "-q", cwd=tmp_path)
    assert agents.returncode == 0, agents.stdout + agents.stderr
    assert "Comparing" not in agents.stderr and "alpha" in agents.stdout
    # each agent's mean with its interval, clipped at 100: no longer "mean ± half"
    assert re.search(r"\d+\.\d \[\d+\.\d, 100\.0\] \(3\)", agents.stdout), agents.stdout
    loud = atp("compare", "--agents=flip,steady", f"--suite={suite}", cwd=tmp_path)
    assert "Comparing flip, steady on suite words" in loud.stderr
