"""`atp baseline save` and `atp baseline compare`, and `atp test --baseline`, as a user runs them:
a baseline of a good version of an agent, a worse version detected as a regression, an
unchanged version not flagged, run directories compared later."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from atp.cli.main import main
from tests.conftest import ATP, EXAMPLES, PYTHON, write
from tests.facts import one_error, says

NOISY = str(EXAMPLES / "agents" / "noisy_agent.py")
TESTS = ("alpha", "beta", "gamma", "delta")
RUNS = 8
SAME_SEEDS = range(100, 120)
"""The 20 repetitions of an unchanged version (another seed each)."""


def atp(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([ATP, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def agent(name: str, *args: str) -> str:
    return f"  - {{name: {name}, type: cli, command: {[PYTHON, NOISY, *args]!r}}}\n"


Worse = tuple[subprocess.CompletedProcess[str], Path, dict[str, Any]]
"""The live run of the worse version, its run directory and its JSON results."""


def only_child(folder: Path) -> Path:
    (child,) = folder.iterdir()
    return child


@dataclass
class Setup:
    folder: Path
    suite: Path
    baseline: Path
    good_runs: Path
    saved: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    """A suite of 4 tests, 8 runs each, scored on efficiency alone (about 100 - steps), and the
    baseline of its good version (20 steps on average)."""
    folder = tmp_path_factory.mktemp("baseline")
    agents = (
        agent("good", "--steps=20", "--spread=5", "--seed=0")
        + agent("worse", "--steps=30", "--spread=5", "--seed=1")
        + agent("bad", "--steps=70", "--spread=5", "--seed=3")
        + "".join(agent(f"same{seed}", "--steps=20", "--spread=5", f"--seed={seed}") for seed in SAME_SEEDS)
    )
    suite = write(
        folder / "suite.yaml",
        "test_suite: baseline_e2e\n"
        "defaults:\n"
        f"  runs_per_test: {RUNS}\n"
        "  constraints: {max_steps: 100}\n"
        "  scoring: {quality_weight: 0, completeness_weight: 0, cost_weight: 0, efficiency_weight: 1}\n"
        "  pass_rule: {min_score: 50}\n"
        "agents:\n"
        + agents
        + "tests:\n"
        + "".join(f"  - {{id: {t}, task: {{description: {t}}}}}\n" for t in TESTS),
    )
    baseline = folder / "baseline.json"
    saved = atp(
        "baseline",
        "save",
        f"--suite={suite}",
        "--agent=good",
        f"--output={baseline}",
        f"--run-dir={folder / 'good-runs'}",
        cwd=folder,
    )
    assert saved.returncode == 0, saved.stdout + saved.stderr
    return Setup(folder, suite, baseline, only_child(folder / "good-runs"), saved)


def test_save_runs_the_suite_and_writes_every_test_with_its_runs(setup: Setup) -> None:
    out = setup.saved.stdout
    assert "Suite: baseline_e2e" in out and "Agent: good (cli)" in out  # the usual report, while it runs
    assert "Summary: 4 passed, 0 failed, 0 skipped" in out
    assert out.rstrip().endswith(f"Baseline of 4 tests written to {setup.baseline}")
    assert setup.saved.stderr == ""
    data = json.loads(setup.baseline.read_text())
    assert data["format"] == "atp-baseline" and data["version"] == "1.0"
    assert data["suite"] == "baseline_e2e" and data["agent"] == "good"
    assert data["run_id"] == setup.good_runs.name
    assert list(data["tests"]) == list(TESTS)
    for test in data["tests"].values():
        scores = [run["score"] for run in test["runs"]]
        assert test["n_runs"] == len(scores) == RUNS
        assert test["mean_score"] == pytest.approx(sum(scores) / RUNS)
        assert 70 < test["mean_score"] < 90 and test["std"] > 0 and test["fingerprint"]
        assert all(run["passed"] for run in test["runs"]) and "total_steps" in test["runs"][0]["metrics"]
    assert [p.name for p in setup.folder.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_save_from_a_stored_run_gives_the_same_baseline(setup: Setup) -> None:
    again = setup.folder / "again.json"
    result = atp("baseline", "save", f"--from={setup.good_runs}", f"--output={again}", cwd=setup.folder)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == f"Baseline of 4 tests written to {again}\n"
    assert again.read_bytes() == setup.baseline.read_bytes()


@pytest.fixture(scope="module")
def worse(setup: Setup) -> Worse:
    """A worse version (30 steps on average) run with --baseline."""
    results = setup.folder / "worse.json"
    live = atp(
        "test",
        f"--suite={setup.suite}",
        "--agent=worse",
        f"--baseline={setup.baseline}",
        f"--run-dir={setup.folder / 'worse-runs'}",
        "--output=json",
        f"--output-file={results}",
        cwd=setup.folder,
    )
    return live, only_child(setup.folder / "worse-runs"), json.loads(results.read_text())


def test_a_worse_version_is_a_regression_and_fails_the_run(setup: Setup, worse: Worse) -> None:
    live, _, data = worse
    assert live.returncode == 1, live.stdout + live.stderr
    assert data["summary"]["failed"] == 0  # every test passed: only the regression fails the run
    comparison = data["baseline"]
    assert comparison["file"] == str(setup.baseline) and comparison["compared"] == 4
    assert comparison["regressions_holm"] == 4
    for test in data["tests"]:
        verdict = test["baseline"]
        assert verdict["verdict"] == verdict["verdict_holm"] == "regression", test["id"]
        assert verdict["p_value"] < 0.05 and verdict["p_holm"] < 0.05
        assert verdict["delta"] < 0 and verdict["ci_95"][1] < 0
        assert verdict["baseline_runs"] == verdict["current_runs"] == RUNS


def test_a_regression_need_not_fail_the_run(setup: Setup) -> None:
    result = atp(
        "test",
        f"--suite={setup.suite}",
        "--agent=worse",
        f"--baseline={setup.baseline}",
        "--fail-on-regression=false",
        f"--run-dir={setup.folder / 'lenient-runs'}",
        cwd=setup.folder,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_compare_a_stored_run_says_the_same(setup: Setup, worse: Worse) -> None:
    _, run_dir, live = worse
    result = atp("baseline", "compare", f"--baseline={setup.baseline}", str(run_dir), cwd=setup.folder)
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert f"Baseline: {setup.baseline} (suite baseline_e2e, agent good" in out
    assert f"Run:      {run_dir} (suite baseline_e2e, agent worse)" in out
    lines = out.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("Test "))
    for column in ("Baseline", "Current", "Delta", "Delta %", "95% CI of delta", "p", "p (Holm)", "Verdict"):
        assert column in header
    for test in live["tests"]:
        (row,) = [line for line in lines if line.startswith(f"  {test['id']} ")]
        assert row.endswith("✗ regression")
        assert f"({RUNS})" in row and f"{test['baseline']['delta']:+.1f}" in row
    widths = {len(line) for line in lines if any(line.startswith(f"  {t} ") for t in TESTS)}
    assert len(widths) == 1  # aligned columns
    assert (
        "Summary: 4 regressions, 0 improvements, 0 no significant change, 0 not compared "
        "(Holm-corrected over 4 compared tests; without the correction: 4 regressions, 0 improvements)"
    ) in out
    assert "Result: FAILED, 4 regressions" in out
    as_json = atp(
        "baseline", "compare", f"--baseline={setup.baseline}", str(run_dir), "--output=json", cwd=setup.folder
    )
    assert as_json.returncode == 1
    data = json.loads(as_json.stdout)
    assert (
        data["format"] == "atp-baseline-comparison"
        and data["exit_code"] == 1
        and data["failing_regressions"] == 4
    )
    assert data["comparison"]["correction"] == "holm" and data["comparison"]["regressions_holm"] == 4
    for test in live["tests"]:
        mine = data["tests"][test["id"]]
        assert mine["verdict_holm"] == "regression"
        assert mine["p_value"] == pytest.approx(test["baseline"]["p_value"], rel=1e-12)
        assert mine["p_holm"] == pytest.approx(test["baseline"]["p_holm"], rel=1e-12)
    written = setup.folder / "comparison.json"
    lenient = atp(
        "baseline",
        "compare",
        f"--baseline={setup.baseline}",
        str(run_dir),
        "--fail-on-regression=false",
        "--correction=none",
        "--output=json",
        f"--output-file={written}",
        cwd=setup.folder,
    )
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr
    assert "(not failing: --fail-on-regression=false)" in lenient.stdout  # the table, as the file is written
    assert (
        "(each test's own p < 0.05, uncorrected; Holm-corrected: 4 regressions, 0 improvements)"
        in lenient.stdout
    )
    assert lenient.stderr == f"json comparison written to {written}\n"
    data = json.loads(written.read_text())
    assert data["comparison"]["correction"] == "none" and data["comparison"]["fail_on_regression"] is False
    assert data["exit_code"] == 0 and data["failing_regressions"] == 4


def test_compare_runs_the_suite_in_the_designs_form_and_finds_the_regression(setup: Setup) -> None:
    """Design 6.1: atp baseline compare --agent=NAME --suite=FILE --baseline=FILE runs the suite
    as atp test does, then compares its run as the stored-run form does, with its exit codes."""
    runs = setup.folder / "compare-worse"
    result = atp(
        "baseline",
        "compare",
        "--agent=worse",
        f"--suite={setup.suite}",
        f"--baseline={setup.baseline}",
        f"--run-dir={runs}",
        cwd=setup.folder,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "Suite: baseline_e2e" in out and "Agent: worse (cli)" in out  # the run's own report, first
    assert out.index("Agent: worse (cli)") < out.index("ATP Baseline Comparison")
    assert f"Run:      {only_child(runs)} (suite baseline_e2e, agent worse)" in out
    assert "Summary: 4 regressions" in out and out.rstrip().endswith("Result: FAILED, 4 regressions")
    assert out.count("regression") == out.count(
        "regression", out.index("ATP Baseline Comparison")
    )  # shown once


def test_compare_runs_the_suite_and_an_unchanged_agent_passes(setup: Setup) -> None:
    runs = setup.folder / "compare-good"
    result = atp(
        "baseline",
        "compare",
        "--agent=good",
        f"--suite={setup.suite}",
        f"--baseline={setup.baseline}",
        f"--run-dir={runs}",
        "--output=json",
        cwd=setup.folder,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)  # standard output holds the comparison only
    assert data["run_dir"] == str(only_child(runs)) and data["agent"] == "good"
    assert data["exit_code"] == 0 and data["failing_regressions"] == 0
    assert {t["verdict_holm"] for t in data["tests"].values()} == {"no_change"}
    assert "Agent: good (cli)" in result.stderr  # the run's report goes to stderr


def test_report_of_the_run_exits_as_the_live_run_did(setup: Setup, worse: Worse) -> None:
    live, run_dir, _ = worse
    report = atp("report", str(run_dir), cwd=setup.folder)
    assert report.returncode == live.returncode == 1, report.stdout + report.stderr


def test_save_from_a_run_has_its_tests_and_means(setup: Setup, worse: Worse) -> None:
    _, run_dir, live = worse
    output = setup.folder / "worse-baseline.json"
    result = atp("baseline", "save", f"--from={run_dir}", f"--output={output}", cwd=setup.folder)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(output.read_text())
    assert data["agent"] == "worse" and data["run_id"] == run_dir.name
    assert {t: v["mean_score"] for t, v in data["tests"].items()} == {
        t["id"]: pytest.approx(t["statistics"]["score"]["mean"]) for t in live["tests"]
    }
    assert {t: [r["score"] for r in v["runs"]] for t, v in data["tests"].items()} == {
        t["id"]: [r["score"] for r in t["runs"]] for t in live["tests"]
    }


def test_an_unchanged_version_is_rarely_flagged(
    setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """20 runs of the same version (other seeds) against the baseline: with Holm's correction
    over the 4 tests, at most 1 of them is a false alarm (the family-wise error rate is 5%).
    In-process, so that 20 repetitions take seconds."""
    monkeypatch.setenv("NO_COLOR", "1")
    flagged, flagged_uncorrected = [], []
    for seed in SAME_SEEDS:
        output = tmp_path / f"same{seed}.json"
        code = main(
            [
                "test",
                f"--suite={setup.suite}",
                f"--agent=same{seed}",
                f"--baseline={setup.baseline}",
                f"--run-dir={tmp_path / 'runs'}",
                "--parallel=4",
                "--output=json",
                f"--output-file={output}",
            ]
        )
        data = json.loads(output.read_text())
        verdicts = [t["baseline"] for t in data["tests"]]
        assert len(verdicts) == 4 and all(v["verdict"] != "not_compared" for v in verdicts)
        holm = any(v["verdict_holm"] == "regression" for v in verdicts)
        assert code == (1 if holm else 0), seed
        if holm:
            flagged.append(seed)
        if any(v["verdict"] == "regression" for v in verdicts):
            flagged_uncorrected.append(seed)
    capsys.readouterr()
    assert len(flagged) <= 1, flagged
    assert len(flagged) <= len(flagged_uncorrected)


def test_a_baseline_of_failing_tests_with_one_run_is_saved_with_warnings(setup: Setup) -> None:
    output = setup.folder / "bad.json"
    runs = setup.folder / "bad-runs"
    result = atp(
        "baseline",
        "save",
        f"--suite={setup.suite}",
        "--agent=bad",
        "--runs=1",
        f"--output={output}",
        f"--run-dir={runs}",
        cwd=setup.folder,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Summary: 0 passed, 4 failed" in result.stdout
    assert f"Baseline of 4 tests written to {output}\n" in result.stdout
    assert (
        "4 tests of the run failed (alpha, beta, gamma, delta); the baseline records their scores all the same"
        in result.stdout
    )
    assert result.stderr.startswith("atp: warning: ") and len(result.stderr.splitlines()) == 1, result.stderr
    says(result.stderr, "'alpha', 'beta', 'gamma', 'delta'", "fewer than 2 runs", "--runs=5")
    assert all(len(t["runs"]) == 1 for t in json.loads(output.read_text())["tests"].values())
    compared = atp("baseline", "compare", f"--baseline={output}", str(only_child(runs)), cwd=setup.folder)
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert "0 regressions, 0 improvements, 0 no significant change, 4 not compared" in compared.stdout
    assert (
        "  alpha: a comparison needs at least 2 runs on each side (the baseline has 1 run and this run has 1); "
        "run with --runs=2 or more"
    ) in compared.stdout


def test_compare_defaults_to_the_latest_run_of_the_suite(setup: Setup, tmp_path: Path) -> None:
    runs = tmp_path / ".atp" / "runs"
    runs.mkdir(parents=True)
    (runs / setup.good_runs.name).symlink_to(setup.good_runs, target_is_directory=True)
    result = atp("baseline", "compare", f"--baseline={setup.baseline}", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Run:      {runs / setup.good_runs.name} (suite baseline_e2e, agent good)" in result.stdout
    assert "0 regressions, 0 improvements, 4 no significant change, 0 not compared" in result.stdout
    empty = atp("baseline", "compare", f"--baseline={setup.baseline}", cwd=tmp_path / ".atp")
    assert empty.returncode == 2
    assert empty.stderr.startswith("atp: error: no run directories of suite 'baseline_e2e'")


def test_compare_with_a_baseline_of_another_suite_compares_nothing_and_exits_2(
    setup: Setup, tmp_path: Path
) -> None:
    other = tmp_path / "other.json"
    data = json.loads(setup.baseline.read_text())
    data["suite"] = "another"
    other.write_text(json.dumps(data))
    result = atp("baseline", "compare", f"--baseline={other}", str(setup.good_runs), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "4 not compared" in result.stdout and "Problems:" in result.stdout
    assert "the baseline is of another suite ('another'; this run is of 'baseline_e2e')" in result.stdout
    assert "Result: nothing compared" in result.stdout


def test_an_interrupted_run_is_saved_only_with_force(setup: Setup, tmp_path: Path) -> None:
    run_dir = tmp_path / "interrupted"
    run_dir.mkdir()
    header = json.loads((setup.good_runs / "run.json").read_text())
    header.update(finished_at=None, interrupted=True, stopped_by="SIGINT")
    (run_dir / "run.json").write_text(json.dumps(header))
    lines = (setup.good_runs / "results.jsonl").read_text().splitlines()
    (run_dir / "results.jsonl").write_text("\n".join(lines[:10]) + "\n")
    output = tmp_path / "b.json"
    refused = atp("baseline", "save", f"--from={run_dir}", f"--output={output}", cwd=tmp_path)
    assert refused.returncode == 2 and not output.exists()
    one_error(refused.stderr, f"run in {run_dir}", "interrupted", "SIGINT", "fewer runs", "--force")
    forced = atp("baseline", "save", f"--from={run_dir}", f"--output={output}", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert sum(t["n_runs"] for t in json.loads(output.read_text())["tests"].values()) == 10


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["baseline", "save", "--output=b.json"],
            "name the suite to run with --suite=FILE, or a stored run with --from=RUN_DIR",
        ),
        (
            ["baseline", "save", "--from=runs", "--agent=good", "--output=b.json"],
            "--from takes a stored run; --agent would run the suite again",
        ),
        (
            ["baseline", "compare", "--baseline=b.json", "--output-file=x.json", "runs"],
            "--output-file takes --output=json",
        ),
        (["baseline", "compare", "runs"], "Missing option '--baseline'"),
        (["baseline", "compare", "--baseline=b.json", "--agent=good"], "--agent names how to run a suite"),
        (
            ["baseline", "compare", "--baseline=b.json", "--suite=s.yaml", "runs"],
            "a stored run (RUN_DIR) or a suite run now (--suite=FILE), not both",
        ),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    result = atp(*args, cwd=tmp_path)
    assert result.returncode == 2 and says in result.stderr, result.stderr


def test_a_malformed_baseline_file_exits_2_naming_it(setup: Setup, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "atp-baseline", "suite": 3}')
    result = atp("baseline", "compare", f"--baseline={broken}", str(setup.good_runs), cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"atp: error: {broken} is not an ATP baseline file")
    live = atp(
        "test",
        f"--suite={setup.suite}",
        "--agent=good",
        f"--baseline={broken}",
        f"--run-dir={tmp_path}",
        cwd=tmp_path,
    )
    assert live.returncode == 2 and f"{broken} is not an ATP baseline file" in live.stderr


def test_save_refuses_an_output_that_cannot_be_written_before_running(setup: Setup, tmp_path: Path) -> None:
    result = atp(
        "baseline",
        "save",
        f"--suite={setup.suite}",
        "--agent=good",
        f"--output={tmp_path / 'no' / 'b.json'}",
        f"--run-dir={tmp_path / 'runs'}",
        cwd=tmp_path,
    )
    assert result.returncode == 2 and "the directory" in result.stderr and "does not exist" in result.stderr
    assert not (tmp_path / "runs").exists()
    same = atp("baseline", "save", f"--suite={setup.suite}", f"--output={setup.suite}", cwd=tmp_path)
    assert same.returncode == 2 and "is the input file" in same.stderr
