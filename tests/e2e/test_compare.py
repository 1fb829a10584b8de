"""`atp compare` as a user runs it: a clearly worse agent against a good one is found worse,
overall and test by test; two agents of the same quality are not told apart; the agents' runs
are interleaved (with --parallel=1 they take turns, run by run); each agent keeps a run
directory of its own; adaptive run counts are refused; Ctrl-C keeps the finished runs and says
where they are."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ATP, EXAMPLES, PYTHON, write

NOISY = str(EXAMPLES / "agents" / "noisy_agent.py")
TESTS = ("alpha", "beta", "gamma", "delta")
RUNS = 6
AUTO_REFUSED = "adaptive comparison of several agents is not supported yet"


def atp(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([ATP, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def agent(name: str, *command: str) -> str:
    return f"  - {{name: {name}, type: cli, command: {list(command)!r}}}\n"


def suite_text(name: str, agents: str, runs: int | str = RUNS) -> str:
    return (
        f"test_suite: {name}\n"
        "defaults:\n"
        f"  runs_per_test: {runs}\n"
        "  constraints: {max_steps: 100}\n"
        "  scoring: {quality_weight: 0, completeness_weight: 0, cost_weight: 0, efficiency_weight: 1}\n"
        "  pass_rule: {min_score: 50}\n"
        "agents:\n"
        + agents
        + "tests:\n"
        + "".join(f"  - {{id: {t}, task: {{description: {t}}}}}\n" for t in TESTS)
    )


@dataclass
class Setup:
    folder: Path
    suite: Path


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    """A suite of 4 tests, 6 runs each, scored on efficiency alone (about 100 - steps): a good
    agent (20 steps on average), a clearly worse one (35) and two more of the good one's quality."""
    folder = tmp_path_factory.mktemp("compare")
    agents = (
        agent("good", PYTHON, NOISY, "--steps=20", "--spread=5", "--seed=0")
        + agent("worse", PYTHON, NOISY, "--steps=35", "--spread=5", "--seed=1")
        + agent("same1", PYTHON, NOISY, "--steps=20", "--spread=5", "--seed=2")
        + agent("same2", PYTHON, NOISY, "--steps=20", "--spread=5", "--seed=3")
    )
    return Setup(folder, write(folder / "suite.yaml", suite_text("compare_e2e", agents)))


def started(run_dirs: list[str]) -> list[tuple[str, str, str, int]]:
    """Every run of the run directories, by the time it started: (started_at, agent, test, run)."""
    found = []
    for directory in run_dirs:
        agent_name = json.loads((Path(directory) / "run.json").read_text())["agent"]
        for line in (Path(directory) / "results.jsonl").read_text().splitlines():
            result = json.loads(line)
            found.append((result["started_at"], agent_name, result["test_id"], result["run_number"]))
    return sorted(found)


@dataclass
class Compared:
    result: subprocess.CompletedProcess[str]
    data: dict[str, Any]


@pytest.fixture(scope="module")
def worse_good(setup: Setup) -> Compared:
    """worse against good, one run at a time, the JSON written to a file."""
    output = setup.folder / "worse-good.json"
    result = atp(
        "compare",
        "--agents=worse,good",
        f"--suite={setup.suite}",
        "--parallel=1",
        "--output=json",
        f"--output-file={output}",
        f"--run-dir={setup.folder / 'runs-worse-good'}",
        cwd=setup.folder,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return Compared(result, json.loads(output.read_text()))


def test_a_clearly_worse_agent_is_found_worse_overall_and_per_test(worse_good: Compared) -> None:
    data = worse_good.data
    assert data["format"] == "atp-comparison" and data["suite"] == "compare_e2e"
    assert data["agents"] == ["worse", "good"] and not data["interrupted"] and not data["problems"]
    (overall,) = data["overall"]
    assert (overall["a"], overall["b"]) == ("worse", "good")
    assert overall["verdict"] == "b_better" and overall["better"] == "good" and overall["significant"]
    assert overall["tests"] == len(TESTS) and overall["delta"] < -10 and overall["ci_95"][1] < 0
    assert overall["p_value"] < 0.05 and overall["p_holm"] < 0.05
    assert [row["id"] for row in data["tests"]] == list(TESTS)
    better = [row["id"] for row in data["tests"] if row["pairs"][0]["better"] == "good"]
    assert len(better) >= 3, better
    assert overall["b_better_tests"] == len(better) and overall["a_better_tests"] == 0
    for row in data["tests"]:
        worse, good = row["scores"]
        assert worse["agent"] == "worse" and good["agent"] == "good"
        assert worse["n"] == good["n"] == RUNS
        assert 55 < worse["mean"] < 75 < good["mean"] < 90
        assert good["ci_95"][0] < good["mean"] < good["ci_95"][1]
    totals = {t["agent"]: t for t in data["agent_totals"]}
    assert totals["good"]["n"] == len(TESTS) and totals["good"]["mean"] > totals["worse"]["mean"]


def test_the_console_table_goes_with_the_json_file(worse_good: Compared, setup: Setup) -> None:
    out = worse_good.result.stdout
    assert out.startswith("ATP Agent Comparison\n")
    assert "worse - good" in out and "good better than worse" in out
    for test_id in TESTS:
        assert f"\n  {test_id} " in out
    assert f"({RUNS})" in out and " ± " in out and " *" in out  # mean ± half-width (n), a significant delta
    assert "(mean over tests)" in out
    for run in worse_good.data["runs"]:
        assert run["run_dir"] in out
    assert f"json comparison written to {setup.folder / 'worse-good.json'}" in worse_good.result.stderr


def test_each_agent_has_a_run_directory_of_its_own(worse_good: Compared, setup: Setup) -> None:
    runs = worse_good.data["runs"]
    assert [run["agent"] for run in runs] == ["worse", "good"]
    directories = sorted(str(p) for p in (setup.folder / "runs-worse-good").iterdir())
    assert sorted(run["run_dir"] for run in runs) == directories
    for run in runs:
        header = json.loads((Path(run["run_dir"]) / "run.json").read_text())
        assert header["agent"] == run["agent"] and header["run_id"] == run["run_id"]
        assert header["finished_at"] and not header["interrupted"]
        assert run["runs"] == len(TESTS) * RUNS and not run["interrupted"]
    report = atp("report", runs[1]["run_dir"], cwd=setup.folder)
    assert report.returncode == 0, report.stdout + report.stderr
    assert "Agent: good" in report.stdout


def test_with_one_run_at_a_time_the_agents_take_turns_run_by_run(worse_good: Compared) -> None:
    order = started([run["run_dir"] for run in worse_good.data["runs"]])
    assert len(order) == 2 * len(TESTS) * RUNS
    agents = [entry[1] for entry in order]
    assert all(first != second for first, second in itertools.pairwise(agents)), agents
    runs = [(entry[2], entry[3]) for entry in order]
    assert runs[0::2] == runs[1::2]  # each turn: the same run of the same test, for each agent
    assert runs[0::2] == [(t, n) for t in TESTS for n in range(1, RUNS + 1)]


def test_agents_of_the_same_quality_are_not_told_apart(setup: Setup) -> None:
    result = atp(
        "compare",
        "--agents=same1,same2",
        f"--suite={setup.suite}",
        "--parallel=3",
        "--output=json",
        f"--run-dir={setup.folder / 'runs-same'}",
        cwd=setup.folder,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)  # the JSON alone on standard output
    (overall,) = data["overall"]
    assert overall["verdict"] == "no_difference" and not overall["significant"] and overall["better"] is None
    assert overall["p_holm"] >= 0.05 and overall["ci_95"][0] < 0 < overall["ci_95"][1]
    assert overall["a_better_tests"] == overall["b_better_tests"] == 0
    assert len(data["runs"]) == 2
    # runs were interleaved: no agent ever took a run more than one round ahead of the other
    order = started([run["run_dir"] for run in data["runs"]])
    assert len(order) == 2 * len(TESTS) * RUNS
    position = {(agent_name, test_id, number): i for i, (_, agent_name, test_id, number) in enumerate(order)}
    rounds = [(t, n) for t in TESTS for n in range(1, RUNS + 1)]
    for earlier, later in zip(
        rounds, rounds[2:], strict=False
    ):  # within the 3 in flight, the start order may vary
        for first in ("same1", "same2"):
            for second in ("same1", "same2"):
                assert position[(first, *earlier)] < position[(second, *later)]


def test_three_agents_are_compared_pair_by_pair_on_the_console(setup: Setup) -> None:
    result = atp(
        "compare",
        "--agents=good,worse",
        "--agents=same1",
        f"--suite={setup.suite}",
        "--runs=3",
        "--test=alpha",
        "--test=beta",
        "--parallel=4",
        f"--run-dir={setup.folder / 'runs-three'}",
        cwd=setup.folder,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "good - worse" in out and "good - same1" in out and "worse - same1" in out
    assert "Holm-corrected over 3 pairs" in out and "(3)" in out
    assert "Comparing good, worse, same1 on suite compare_e2e: 2 tests, 6 runs per agent" in result.stderr
    assert len(list((setup.folder / "runs-three").iterdir())) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--agents=good",), "at least 2"),
        (("--agents=good,good",), "'good' more than once"),
        (("--agents=good,worse", "--runs=auto"), AUTO_REFUSED),
        (("--agents=good,nobody",), "no agent named 'nobody'"),
        (("--agents=good,worse", "--output-file=x.json"), "--output-file takes --output=json"),
    ],
)
def test_usage_errors_exit_2_before_any_run(
    setup: Setup, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    result = atp("compare", *args, f"--suite={setup.suite}", f"--run-dir={tmp_path / 'runs'}", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert not (tmp_path / "runs").exists()


def test_a_suite_with_adaptive_runs_is_refused(tmp_path: Path) -> None:
    agents = agent("a", PYTHON, NOISY) + agent("b", PYTHON, NOISY, "--seed=1")
    suite = write(tmp_path / "auto.yaml", suite_text("auto_e2e", agents, runs="auto"))
    result = atp(
        "compare", "--agents=a,b", f"--suite={suite}", f"--run-dir={tmp_path / 'runs'}", cwd=tmp_path
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert AUTO_REFUSED in result.stderr and "--runs=N" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_ctrl_c_keeps_each_agents_finished_runs_and_says_where(tmp_path: Path) -> None:
    slow = write(
        tmp_path / "slow_agent.py",
        f"""
        import runpy, sys, time
        time.sleep(0.2)
        sys.argv = [{NOISY!r}, *sys.argv[1:]]
        runpy.run_path({NOISY!r}, run_name="__main__")
        """,
    )
    agents = agent("a", PYTHON, str(slow)) + agent("b", PYTHON, str(slow), "--seed=1")
    suite = write(tmp_path / "slow.yaml", suite_text("slow_e2e", agents, runs=20))
    runs = tmp_path / "runs"
    process = subprocess.Popen(
        [ATP, "compare", "--agents=a,b", f"--suite={suite}", "--parallel=2", f"--run-dir={runs}"],
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            lines = (
                [len(p.read_text().splitlines()) for p in runs.glob("*/results.jsonl")]
                if runs.is_dir()
                else []
            )
            if len(lines) == 2 and min(lines) >= 2:
                break
            time.sleep(0.05)
        else:
            pytest.fail("no agent finished its first runs")
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, out + err
    directories = sorted(runs.iterdir())
    assert len(directories) == 2
    assert "Interrupted: finished runs are kept in" in err
    for directory in directories:
        header = json.loads((directory / "run.json").read_text())
        assert header["stopped_by"] == "SIGINT" and header["interrupted"]
        assert f"  {header['agent']}: {directory}" in err
        assert (directory / "results.jsonl").read_text().strip()
    assert "The runs were interrupted: the agents are compared on the runs that finished." in out
