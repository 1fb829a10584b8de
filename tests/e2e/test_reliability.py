"""`atp test` when runs are many, paid for and at the mercy of infrastructure: resume after a
SIGKILL, retries of infrastructure faults only, flaky and quarantined tests, budgets and rate
limits (docs/reliability.md). The agent logs every task it gets, so that the runs made are
counted, not guessed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.conftest import AGENTS, ATP, PYTHON, write
from tests.e2e.test_atp_command import atp

LEDGER_AGENT = [PYTHON, str(AGENTS / "ledger_agent.py")]


def ledger_suite(tmp_path: Path, tests: str, head: str = "", agent_extra: str = "") -> Path:
    return write(
        tmp_path / "suite.yaml",
        f"test_suite: reliability\n{head}agents:\n  - name: agent\n    type: cli\n"
        f"    command: {LEDGER_AGENT!r}\n{agent_extra}tests:\n{tests}",
    )


def ledger_lines(path: Path) -> list[tuple[str, int]]:
    if not path.exists():
        return []
    return [(line.split()[0], int(line.split()[1])) for line in path.read_text().splitlines() if line.strip()]


def run_dirs(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / ".atp" / "runs").iterdir())


def stored_runs(run_dir: Path) -> list[tuple[str, int]]:
    found = []
    for line in (run_dir / "results.jsonl").read_bytes().splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue  # a line cut short by the kill
        found.append((data["test_id"], data["run_number"]))
    return found


def comparable(report: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What must be equal between two runs of a deterministic agent: each test's id, status,
    runs, score and statistics but for time."""
    rows = []
    for test in report["tests"]:
        stats = dict(test.get("statistics") or {})
        stats.get("metrics", {}).pop("wall_time_seconds", None)
        rows.append(
            (
                test["id"],
                test["status"],
                len(test["runs"]),
                test["score"],
                test["flaky"],
                json.dumps(stats, sort_keys=True),
            )
        )
    return rows


def test_a_suite_killed_half_way_resumes_with_exactly_the_missing_runs(tmp_path: Path) -> None:
    tests = "".join(
        f"  - id: t{i:02d}\n    runs_per_test: 2\n    task: {{description: x, input_data: {{sleep: 0.15, outcome: {'fail' if i == 3 else 'pass'}}}}}\n"
        for i in range(12)
    )
    suite = ledger_suite(tmp_path, tests)
    ledger = tmp_path / "ledger.txt"
    env = {**os.environ, "NO_COLOR": "1", "LEDGER": str(ledger)}
    process = subprocess.Popen(
        [ATP, "test", f"--suite={suite}", "--parallel=3", "-q"],
        cwd=tmp_path,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    results = None
    while time.monotonic() < deadline:
        dirs = list((tmp_path / ".atp" / "runs").glob("*/results.jsonl"))
        if dirs and len(stored_runs(dirs[0].parent)) >= 10:
            results = dirs[0].parent
            break
        time.sleep(0.02)
    assert results is not None, "the suite did not get half-way"
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    time.sleep(0.3)  # agents killed with their group; let the last ledger lines land
    before = Counter(stored_runs(results))
    assert 10 <= sum(before.values()) < 24 and max(before.values()) == 1
    header = json.loads((results / "run.json").read_text())
    assert header["finished_at"] is None  # killed: the end was never written
    ledger.write_text("")  # from here on, count only what the resume makes

    resumed = atp(
        "test",
        f"--suite={suite}",
        "--resume",
        "--output=json",
        "--output-file=resumed.json",
        cwd=tmp_path,
        env={"LEDGER": str(ledger)},
    )
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr  # t03 fails, as it would have
    everything = {(f"t{i:02d}", n) for i in range(12) for n in (1, 2)}
    made = Counter(ledger_lines(ledger))
    assert max(made.values()) == 1
    assert set(made) == everything - set(before), "the resume made exactly the runs the directory lacked"
    assert run_dirs(tmp_path) == [results], "the resume appended to the same run directory"
    assert Counter(stored_runs(results)) == Counter(everything)

    ledger.write_text("")
    whole = atp(
        "test",
        f"--suite={suite}",
        "--output=json",
        "--output-file=whole.json",
        cwd=tmp_path,
        env={"LEDGER": str(ledger)},
    )
    assert whole.returncode == 1
    assert len(ledger_lines(ledger)) == 24
    resumed_report = json.loads((tmp_path / "resumed.json").read_text())
    whole_report = json.loads((tmp_path / "whole.json").read_text())
    assert comparable(resumed_report) == comparable(whole_report)
    assert resumed_report["summary"] == whole_report["summary"]
    assert resumed_report["interrupted"] is False and resumed_report["stopped_by"] is None

    again = atp("report", str(results), "--output=json", "--output-file=report.json", cwd=tmp_path)
    assert again.returncode == 1
    assert comparable(json.loads((tmp_path / "report.json").read_text())) == comparable(whole_report)


def test_resume_refuses_a_changed_suite_unless_forced(tmp_path: Path) -> None:
    suite = ledger_suite(tmp_path, "  - id: a\n    task: {description: x, input_data: {outcome: pass}}\n")
    ledger = tmp_path / "ledger.txt"
    env = {"LEDGER": str(ledger)}
    first = atp("test", f"--suite={suite}", "--max-tokens=1", cwd=tmp_path, env=env)
    (run_dir,) = run_dirs(tmp_path)
    header = json.loads((run_dir / "run.json").read_text())
    header["finished_at"] = None  # as if it had been killed before its last run
    (run_dir / "run.json").write_text(json.dumps(header))
    (run_dir / "results.jsonl").write_text("")
    suite.write_text(suite.read_text().replace("description: x", "description: y"))
    refused = atp("test", f"--suite={suite}", f"--resume={run_dir}", cwd=tmp_path, env=env)
    assert refused.returncode == 2, first.stdout + refused.stdout + refused.stderr
    assert (
        "cannot resume" in refused.stderr
        and "'a' changed since" in refused.stderr
        and "--force" in refused.stderr
    )
    forced = atp("test", f"--suite={suite}", f"--resume={run_dir}", "--force", cwd=tmp_path, env=env)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    nothing = atp("test", f"--suite={suite}", "--resume", cwd=tmp_path, env=env)
    assert nothing.returncode == 2 and "no unfinished run of suite 'reliability'" in nothing.stderr


def test_a_flaky_agent_is_marked_flaky(tmp_path: Path) -> None:
    suite = ledger_suite(
        tmp_path,
        "  - id: wobbly\n    runs_per_test: 4\n    task: {description: x, input_data: {outcome: flaky}}\n"
        "  - id: steady\n    runs_per_test: 4\n    task: {description: x}\n",
    )
    result = atp(
        "test",
        f"--suite={suite}",
        "--output=console",
        "--output=json:out.json",
        cwd=tmp_path,
        env={"LEDGER": str(tmp_path / "l")},
    )
    assert result.returncode == 1
    report = json.loads((tmp_path / "out.json").read_text())
    flags = {t["id"]: t["flaky"] for t in report["tests"]}
    assert flags == {"wobbly": True, "steady": False}
    assert report["summary"]["flaky"] == 1
    assert "Flaky: wobbly" in result.stdout


def test_a_quarantined_failing_test_leaves_exit_0(tmp_path: Path) -> None:
    suite = ledger_suite(
        tmp_path,
        "  - id: broken\n    task: {description: x, input_data: {outcome: fail}}\n"
        "  - id: fine\n    task: {description: x}\n",
        head="quarantine: [broken]\n",
    )
    result = atp(
        "test",
        f"--suite={suite}",
        "--output=console",
        "--output=json:out.json",
        cwd=tmp_path,
        env={"LEDGER": str(tmp_path / "l")},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "out.json").read_text())
    broken = next(t for t in report["tests"] if t["id"] == "broken")
    assert broken["status"] == "failed" and broken["quarantined"] is True
    assert report["summary"]["quarantined"] == 1
    assert "Quarantined" in result.stdout and "broken" in result.stdout
    # without the quarantine the same failure fails the run
    suite.write_text(suite.read_text().replace("quarantine: [broken]\n", ""))
    assert atp("test", f"--suite={suite}", cwd=tmp_path, env={"LEDGER": str(tmp_path / "l")}).returncode == 1


def test_a_quarantine_file_named_by_the_config_quarantines_too(tmp_path: Path) -> None:
    write(tmp_path / "quarantine.txt", "# known bad, ticket 42\nbroken\nnot_in_this_suite\n")
    write(tmp_path / "atp.config.yaml", "quarantine_file: quarantine.txt\n")
    suite = ledger_suite(
        tmp_path, "  - id: broken\n    task: {description: x, input_data: {outcome: fail}}\n"
    )
    result = atp("test", f"--suite={suite}", cwd=tmp_path, env={"LEDGER": str(tmp_path / "l")})
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_quarantine_naming_an_unknown_test_is_a_located_error(tmp_path: Path) -> None:
    suite = ledger_suite(tmp_path, "  - id: a\n    task: {description: x}\n", head="quarantine: [a, typo]\n")
    result = atp("test", f"--suite={suite}", cwd=tmp_path, env={"LEDGER": str(tmp_path / "l")})
    assert result.returncode == 2
    assert "suite.yaml:2: at quarantine[1]: the quarantine names test 'typo'" in result.stderr


def test_a_budget_stops_new_runs_and_says_so(tmp_path: Path) -> None:
    tests = "".join(
        f"  - id: t{i}\n    task: {{description: x, input_data: {{cost_usd: 0.4}}}}\n" for i in range(6)
    )
    suite = ledger_suite(tmp_path, tests)
    ledger = tmp_path / "ledger.txt"
    result = atp(
        "test",
        f"--suite={suite}",
        "--max-cost-usd=1.0",
        "--output=console",
        "--output=json:out.json",
        cwd=tmp_path,
        env={"LEDGER": str(ledger)},
    )
    assert result.returncode == 5, result.stdout + result.stderr
    assert [test_id for test_id, _ in ledger_lines(ledger)] == [
        "t0",
        "t1",
        "t2",
    ]  # 1.2 >= 1.0 after the third
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["stopped_by"] == "budget"
    assert (
        report["budget"]["spent_cost_usd"] == 1.2 and "max_cost_usd 1 reached" in report["budget"]["exceeded"]
    )
    skipped = [t for t in report["tests"] if t["status"] == "skipped"]
    assert [t["id"] for t in skipped] == ["t3", "t4", "t5"]
    assert all(t["skip_reason"].startswith("not run: BUDGET_EXCEEDED") for t in skipped)
    assert "BUDGET_EXCEEDED" in result.stdout
    # the rest is made by resuming with more to spend
    more = atp(
        "test", f"--suite={suite}", "--resume", "--max-cost-usd=5", cwd=tmp_path, env={"LEDGER": str(ledger)}
    )
    assert more.returncode == 0, more.stdout + more.stderr
    assert [test_id for test_id, _ in ledger_lines(ledger)] == ["t0", "t1", "t2", "t3", "t4", "t5"]


def test_a_token_budget_from_the_config(tmp_path: Path) -> None:
    write(tmp_path / "atp.config.yaml", "budget:\n  max_tokens: 250\n")
    tests = "".join(
        f"  - id: t{i}\n    task: {{description: x, input_data: {{tokens: 100}}}}\n" for i in range(5)
    )
    suite = ledger_suite(tmp_path, tests)
    ledger = tmp_path / "ledger.txt"
    result = atp("test", f"--suite={suite}", cwd=tmp_path, env={"LEDGER": str(ledger)})
    assert result.returncode == 5, result.stdout + result.stderr
    assert len(ledger_lines(ledger)) == 3


def test_a_rate_limit_spaces_run_starts_whatever_parallel_says(tmp_path: Path) -> None:
    tests = "".join(f"  - id: t{i}\n    task: {{description: x}}\n" for i in range(6))
    suite = ledger_suite(tmp_path, tests, agent_extra="    rate_limit: 5/s\n")
    started = time.monotonic()
    result = atp(
        "test", f"--suite={suite}", "--parallel=6", cwd=tmp_path, env={"LEDGER": str(tmp_path / "l")}
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stdout + result.stderr
    assert elapsed >= 1.0  # six starts 0.2 s apart: the last at 1.0 s at the earliest


class _Flaky503(BaseHTTPRequestHandler):
    """Answers 503 (Retry-After: 0) to the first two requests of each task, then the task's
    response; the 'wrong' task gets a completed response with a wrong answer at once."""

    seen: Counter[str] = Counter()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        test_id = body["metadata"]["test_id"]
        self.seen[test_id] += 1
        if test_id == "recovers" and self.seen[test_id] <= 2:
            data = b"busy"
            self.send_response(503)
            self.send_header("Retry-After", "0")
        else:
            answer = {"answer": 42 if test_id == "recovers" else 41}
            data = json.dumps(
                {
                    "version": "1.0",
                    "task_id": body["task_id"],
                    "status": "completed",
                    "artifacts": [{"type": "structured", "name": "result", "data": answer}],
                    "metrics": {},
                }
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_503_twice_then_200_passes_with_two_recorded_retries_and_a_wrong_answer_is_not_retried(
    tmp_path: Path,
) -> None:
    _Flaky503.seen = Counter()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky503)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        check = "    assertions:\n      - type: artifact_exists\n        config: {name: result}\n      - type: contains\n        config: {name: result, pattern: '42'}\n"
        suite = write(
            tmp_path / "suite.yaml",
            f"test_suite: retries\ndefaults:\n  retries: 3\nagents:\n  - name: agent\n    type: http\n"
            f"    endpoint: http://127.0.0.1:{server.server_port}/\n    stream: false\ntests:\n"
            f"  - id: recovers\n    task: {{description: x}}\n{check}"
            f"  - id: wrong\n    task: {{description: x}}\n{check}",
        )
        write(tmp_path / "atp.config.yaml", "defaults:\n  retry_backoff_seconds: 0.05\n")
        result = atp("test", f"--suite={suite}", "--output=console", "--output=json:out.json", cwd=tmp_path)
    finally:
        server.shutdown()
    assert result.returncode == 1, result.stdout + result.stderr  # 'wrong' fails its check
    report = json.loads((tmp_path / "out.json").read_text())
    tests = {t["id"]: t for t in report["tests"]}
    assert tests["recovers"]["status"] == "passed"
    (run,) = tests["recovers"]["runs"]
    assert [r["attempt"] for r in run["retries"]] == [1, 2]
    assert all("503" in r["reason"] for r in run["retries"])
    assert tests["wrong"]["status"] == "failed" and tests["wrong"]["runs"][0]["retries"] == []
    assert _Flaky503.seen == Counter({"recovers": 3, "wrong": 1})
    assert report["summary"]["retries"] == 2


# --- what hostile use found ------------------------------------------------------------------


def test_a_run_still_going_is_not_resumed_twice(tmp_path: Path) -> None:
    tests = "".join(
        f"  - id: t{i}\n    task: {{description: x, input_data: {{sleep: 0.4}}}}\n" for i in range(6)
    )
    suite = ledger_suite(tmp_path, tests)
    ledger = tmp_path / "ledger.txt"
    env = {**os.environ, "NO_COLOR": "1", "LEDGER": str(ledger)}
    first = subprocess.Popen(
        [ATP, "test", f"--suite={suite}", "-q"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not list((tmp_path / ".atp" / "runs").glob("*/run.json")):
        time.sleep(0.02)
    (run_dir,) = run_dirs(tmp_path)
    bare = atp("test", f"--suite={suite}", "--resume", cwd=tmp_path, env={"LEDGER": str(ledger)})
    named = atp("test", f"--suite={suite}", f"--resume={run_dir}", cwd=tmp_path, env={"LEDGER": str(ledger)})
    first.communicate(timeout=60)
    assert bare.returncode == 2 and "no unfinished run" in bare.stderr
    assert named.returncode == 2 and "still running" in named.stderr
    assert Counter(ledger_lines(ledger)) == Counter({(f"t{i}", 1): 1 for i in range(6)})
    assert first.returncode == 0


def test_a_finished_or_merged_run_is_not_resumed_and_a_resume_that_cannot_start_changes_nothing(
    tmp_path: Path,
) -> None:
    suite = ledger_suite(tmp_path, "  - id: a\n    task: {description: x}\n")
    env = {"LEDGER": str(tmp_path / "l")}
    assert atp("test", f"--suite={suite}", cwd=tmp_path, env=env).returncode == 0
    (run_dir,) = run_dirs(tmp_path)
    finished = atp("test", f"--suite={suite}", f"--resume={run_dir}", cwd=tmp_path, env=env)
    assert finished.returncode == 2 and "it finished; there is nothing to resume" in finished.stderr
    header = json.loads((run_dir / "run.json").read_text())
    header["finished_at"] = None
    (run_dir / "run.json").write_text(json.dumps(header))
    before = (run_dir / "run.json").read_bytes()
    broken = write(
        tmp_path / "broken.yaml", suite.read_text().replace(repr(LEDGER_AGENT), repr(["/no/such/program"]))
    )
    cannot = atp("test", f"--suite={broken}", f"--resume={run_dir}", cwd=tmp_path, env=env)
    assert cannot.returncode == 2, cannot.stdout + cannot.stderr
    assert (run_dir / "run.json").read_bytes() == before
    merged = dict(header, merged_from=["x", "y"])
    (run_dir / "run.json").write_text(json.dumps(merged))
    refused = atp("test", f"--suite={suite}", f"--resume={run_dir}", cwd=tmp_path, env=env)
    assert refused.returncode == 2 and "merged from shards" in refused.stderr


def test_adaptive_tests_never_go_past_max_runs_with_parallel_runs(tmp_path: Path) -> None:
    suite = ledger_suite(
        tmp_path,
        "  - id: slow\n    runs_per_test: 2\n    task: {description: x, input_data: {sleep: 1.0}}\n"
        "  - id: x\n    runs_per_test: auto\n    min_runs: 3\n    max_runs: 6\n"
        "    task: {description: x, input_data: {outcome: flaky, sleep: 0.2}}\n",
    )
    ledger = tmp_path / "ledger.txt"
    atp("test", f"--suite={suite}", "--parallel=3", cwd=tmp_path, env={"LEDGER": str(ledger)})
    made = Counter(test_id for test_id, _ in ledger_lines(ledger))
    assert made["x"] <= 6 and made["slow"] == 2


def test_a_budget_reached_by_the_last_run_leaves_the_suite_complete(tmp_path: Path) -> None:
    tests = "".join(
        f"  - id: t{i}\n    task: {{description: x, input_data: {{cost_usd: 1.0}}}}\n" for i in range(3)
    )
    suite = ledger_suite(tmp_path, tests)
    result = atp(
        "test",
        f"--suite={suite}",
        "--max-cost-usd=3",
        "--output=json:out.json",
        cwd=tmp_path,
        env={"LEDGER": str(tmp_path / "l")},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["stopped_by"] is None and report["budget"]["exceeded"]


def test_an_absurd_cost_fails_its_run_not_the_suite(tmp_path: Path) -> None:
    suite = ledger_suite(
        tmp_path,
        "  - id: a\n    runs_per_test: 2\n    task: {description: x, input_data: {cost_usd: 1.7e+308}}\n",
    )
    result = atp(
        "test", f"--suite={suite}", "--max-tokens=1000", cwd=tmp_path, env={"LEDGER": str(tmp_path / "l")}
    )
    # out of bounds (issue 26): each run fails saying so, and counts as $1e15; no crash
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "Summary: 0 passed, 1 failed" in result.stdout
    assert atp("report", cwd=tmp_path).returncode == 1


def test_resume_takes_away_a_damaged_line_and_makes_its_run_again(tmp_path: Path) -> None:
    suite = ledger_suite(tmp_path, "  - id: a\n    runs_per_test: 3\n    task: {description: x}\n")
    ledger = tmp_path / "ledger.txt"
    assert atp("test", f"--suite={suite}", cwd=tmp_path, env={"LEDGER": str(ledger)}).returncode == 0
    (run_dir,) = run_dirs(tmp_path)
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    lines[1] = lines[1][:40] + "#garbage"
    (run_dir / "results.jsonl").write_text("\n".join(lines) + "\n")
    header = json.loads((run_dir / "run.json").read_text())
    header["finished_at"] = None
    (run_dir / "run.json").write_text(json.dumps(header))
    ledger.write_text("")
    resumed = atp(
        "test",
        f"--suite={suite}",
        "--resume",
        "--output=json:out.json",
        cwd=tmp_path,
        env={"LEDGER": str(ledger)},
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "is not a run result; it is taken away and its run made again" in resumed.stderr
    assert ledger_lines(ledger) == [("a", 2)]
    assert json.loads((tmp_path / "out.json").read_text())["problems"] == []
    assert atp("report", str(run_dir), cwd=tmp_path).returncode == 0


def test_a_shards_report_counts_its_share_not_the_whole_suite(tmp_path: Path) -> None:
    suite = ledger_suite(tmp_path, "  - id: a\n    runs_per_test: 4\n    task: {description: x}\n")
    result = atp(
        "test",
        f"--suite={suite}",
        "--shard=2/2",
        "--output=console",
        "--output=json:out.json",
        cwd=tmp_path,
        env={"LEDGER": str(tmp_path / "l")},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (test,) = json.loads((tmp_path / "out.json").read_text())["tests"]
    assert test["planned_runs"] == 2 and len(test["runs"]) == 2 and test["status"] == "passed"
    assert "not run" not in result.stdout


def test_resume_goes_on_with_the_runs_plan_and_todays_quarantine(tmp_path: Path) -> None:
    suite = ledger_suite(
        tmp_path,
        "  - id: a\n    task: {description: x, input_data: {outcome: fail}}\n"
        "  - id: b\n    task: {description: x}\n",
    )
    ledger = tmp_path / "ledger.txt"
    assert (
        atp(
            "test", f"--suite={suite}", "--max-tokens=1", cwd=tmp_path, env={"LEDGER": str(ledger)}
        ).returncode
        == 1
    )
    (run_dir,) = run_dirs(tmp_path)
    header = json.loads((run_dir / "run.json").read_text())
    header["finished_at"] = None
    (run_dir / "run.json").write_text(json.dumps(header))
    (run_dir / "results.jsonl").write_text((run_dir / "results.jsonl").read_text().splitlines()[0] + "\n")
    text = suite.read_text().replace("  - id: b\n", "  - id: b\n    skip: later\n")
    suite.write_text(text.replace("tests:\n", "quarantine: [a]\ntests:\n", 1))
    ledger.write_text("")
    resumed = atp("test", f"--suite={suite}", "--resume", cwd=tmp_path, env={"LEDGER": str(ledger)})
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr  # a is quarantined now
    assert ledger_lines(ledger) == [("b", 1)]  # b was planned to run: the run's own plan holds


def test_wrong_budgets_and_resume_arguments_say_what_to_write(tmp_path: Path) -> None:
    suite = ledger_suite(tmp_path, "  - id: a\n    task: {description: x}\n")
    nan = atp("test", f"--suite={suite}", "--max-cost-usd=nan", cwd=tmp_path)
    assert nan.returncode == 2 and "--max-cost-usd" in nan.stderr
    eaten = atp("test", "--resume", str(suite), cwd=tmp_path)
    assert eaten.returncode == 2 and "that is a file, not a run directory" in eaten.stderr


def test_runs_waiting_for_their_rate_limited_turn_do_not_start_once_the_budget_is_spent(
    tmp_path: Path,
) -> None:
    tests = "".join(
        f"  - id: t{i}\n    task: {{description: x, input_data: {{cost_usd: 1.0}}}}\n" for i in range(5)
    )
    suite = ledger_suite(tmp_path, tests, agent_extra="    rate_limit: 2/s\n")
    ledger = tmp_path / "ledger.txt"
    result = atp(
        "test",
        f"--suite={suite}",
        "--parallel=5",
        "--max-cost-usd=2",
        cwd=tmp_path,
        env={"LEDGER": str(ledger)},
    )
    assert result.returncode == 5, result.stdout + result.stderr
    assert [test_id for test_id, _ in ledger_lines(ledger)] == ["t0", "t1"]  # t2-t4 were waiting their turn
