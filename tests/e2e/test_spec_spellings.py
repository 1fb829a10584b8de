"""The specification's own examples and spellings, through the real `atp` command: the design's
configuration example (section 6.2) as it is written, `runs: 5` and `scoring: {quality: ...}`
from the requirements' acceptance criteria, and the hints for the spellings ATP does not take."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ATP, EXAMPLES, FIXTURES, PYTHON, write
from tests.facts import one_error

DESIGN_CONFIG = FIXTURES / "design_config" / "atp.config.yaml"
NOISY = str(EXAMPLES / "agents" / "noisy_agent.py")


def atp(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    return subprocess.run(
        [ATP, *args], cwd=cwd, env={**env, "NO_COLOR": "1"}, capture_output=True, text=True, timeout=120
    )


def results(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return {test["id"]: test for test in data["tests"]}


def noisy_suite(folder: Path, tests: str) -> Path:
    """A suite of the noisy agent taking 50 steps every run, against max_steps 100."""
    command = [PYTHON, NOISY, "--steps=50", "--spread=0"]
    return write(
        folder / "suite.yaml",
        "test_suite: spellings\n"
        f"agents:\n  - {{name: noisy, type: cli, command: {command!r}}}\n"
        "defaults:\n  constraints: {max_steps: 100}\n"
        "tests:\n" + tests,
    )


def test_the_design_config_example_loads_as_written_and_a_suite_runs_with_it(tmp_path: Path) -> None:
    text = DESIGN_CONFIG.read_text()
    assert "agents:\n  # ... agent definitions\n\nevaluators:" in text  # the seed's, verbatim
    shutil.copy(DESIGN_CONFIG, tmp_path / "atp.config.yaml")
    listed = atp("list-agents", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr == "" and "No agents defined" in listed.stdout
    suite = noisy_suite(tmp_path, "  - {id: one, task: {description: count}}\n")
    out = tmp_path / "results.json"
    run = atp("test", str(suite), "--output=json", f"--output-file={out}", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    (test,) = results(out).values()
    assert len(test["runs"]) == 3  # the config's defaults.runs_per_test


def test_runs_and_scoring_as_the_requirements_write_them_are_taken(tmp_path: Path) -> None:
    """`runs: 5` is runs_per_test; `scoring: {efficiency: 1, ...}` weighs as efficiency_weight
    does: 50 steps of 100 score 50 on efficiency alone; the default weights, with the failed
    check counting for quality and completeness, give 100 × 0.2 × 0.5 / 0.9."""
    missing = "    assertions: [{type: artifact_exists, config: {path: missing.md}}]\n"
    suite = noisy_suite(
        tmp_path,
        "  - id: spelled\n    runs: 5\n    task: {description: count}\n"
        "    scoring: {quality: 0, completeness: 0, efficiency: 1, cost: 0}\n" + missing + "  - id: default\n"
        "    task: {description: count}\n" + missing,
    )
    out = tmp_path / "results.json"
    run = atp("test", str(suite), "--output=json", f"--output-file={out}", cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr  # the checks fail, the suite loads
    tests = results(out)
    assert len(tests["spelled"]["runs"]) == 5 and len(tests["default"]["runs"]) == 1
    assert {r["score"] for r in tests["spelled"]["runs"]} == {50.0}
    assert tests["default"]["runs"][0]["score"] == pytest.approx(100 * 0.2 * 0.5 / 0.9, abs=1e-3)


@pytest.mark.parametrize(
    ("where", "line", "facts"),
    [
        ("    runs: 5\n    runs_per_test: 5\n", 9, ["tests[0].runs", "'runs_per_test'", "keep one"]),
        ("    constraints: {runs: 5}\n", 9, ["tests[0].constraints.runs", "did you mean 'runs_per_test'"]),
        ("    max_steps: 5\n", 9, ["tests[0].max_steps", "did you mean 'constraints: {max_steps: ...}'"]),
        (
            "    scoring: {quality: 1, quality_weight: 1}\n",
            9,
            ["scoring.quality", "'quality_weight'", "keep one"],
        ),
        ("    scoring: {qualty: 1}\n", 9, ["tests[0].scoring.qualty", "did you mean 'quality'"]),
    ],
)
def test_spellings_that_are_not_taken_are_told_the_right_key(
    tmp_path: Path, where: str, line: int, facts: list[str]
) -> None:
    suite = noisy_suite(tmp_path, "  - id: one\n    task: {description: count}\n" + where)
    result = atp("test", str(suite), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    one_error(result.stderr, f"{suite}:{line}:", "unknown field", *facts)


def test_runs_at_the_top_of_a_suite_or_of_the_config_is_told_where_it_goes(tmp_path: Path) -> None:
    suite = write(
        tmp_path / "suite.yaml", "test_suite: s\nruns: 5\ntests: [{id: a, task: {description: d}}]\n"
    )
    result = atp("test", str(suite), cwd=tmp_path)
    assert result.returncode == 2
    one_error(result.stderr, f"{suite}:2:", "at runs:", "did you mean 'defaults: {runs_per_test: ...}'")
    config = write(tmp_path / "atp.config.yaml", "defaults:\n  runs: 2\n  parallel: 2\n")
    result = atp("list-agents", cwd=tmp_path)
    assert result.returncode == 2
    one_error(result.stderr, f"{config}:3:", "defaults.parallel", "did you mean 'parallel_workers'")
