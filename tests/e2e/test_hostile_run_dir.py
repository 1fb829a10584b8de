"""The `atp` command against hostile files in the run directory (issue 26, kind 5): an agent
runs as ATP's user and can write there, and a user may get a run directory from elsewhere, so
everything ATP reads back from one is untrusted input (docs/untrusted-agents.md, "What ATP
guarantees about files an agent can write"). One test per way in: `atp clean` (the process
ledger), `atp test` and `atp report` (result lines), `atp report` (logs and events),
`atp test --resume` (the plan and result lines)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from atp.core.ledger import new_token, start_time
from tests.conftest import AGENTS, PYTHON, write
from tests.e2e.test_atp_command import atp
from tests.facts import one_error, says
from tests.unit.test_ledger import dead_owner, gone, owner_line, sleeper, write_ledger

WRITER = [PYTHON, str(AGENTS / "run_dir_writer.py")]
SECRET = "hunter2-the-secret-value"


def writer_suite(tmp_path: Path, modes: list[str], runs: int = 1) -> Path:
    tests = "".join(
        f"  - id: t{i}\n    runs_per_test: {runs}\n    task: {{description: {mode}}}\n"
        for i, mode in enumerate(modes)
    )
    return write(
        tmp_path / "suite.yaml",
        f"test_suite: hostile_run_dir\nagents:\n  - name: agent\n    type: cli\n    command: {WRITER!r}\n"
        f"tests:\n{tests}",
    )


def run_root(tmp_path: Path) -> Path:
    return tmp_path / ".atp" / "runs"


def only_run_dir(tmp_path: Path) -> Path:
    (directory,) = run_root(tmp_path).iterdir()
    return directory


def test_atp_clean_kills_only_what_proves_atp_started_it(tmp_path: Path) -> None:
    """A forged ledger names a process ATP never started (with a token it does not carry, and
    without a token), and a ledger of another boot names a process that carries its token: all
    survive `atp clean`; the process recorded with the token it carries is killed."""
    root = tmp_path / "runs"
    owner, owner_start = dead_owner()
    started: list[subprocess.Popen[bytes]] = []
    try:
        token, old_token = new_token(), new_token()
        recorded = sleeper(started, token)  # as ATP starts an agent: its token in its environment
        stranger = sleeper(started)  # a process of the user's that ATP never started
        unmarked = sleeper(started)
        old = sleeper(started, old_token)
        forged = write_ledger(
            root / "forged",
            [
                owner_line(owner, owner_start),
                {"pid": recorded.pid, "start": start_time(recorded.pid), "token": token},
                {"pid": stranger.pid, "start": start_time(stranger.pid), "token": new_token()},
                {"pid": unmarked.pid, "start": start_time(unmarked.pid)},
            ],
        )
        other_boot = write_ledger(
            root / "other-boot",
            [
                {"owner": owner, "start": owner_start, "boot": "00000000-0000-0000-0000-000000000000"},
                {"pid": old.pid, "start": start_time(old.pid), "token": old_token},
            ],
        )
        elsewhere = write_ledger(tmp_path / "elsewhere", [owner_line(owner, owner_start)])
        (root / "linked").symlink_to(tmp_path / "elsewhere")  # a run directory that is a link: not read

        result = atp("clean", f"--run-dir={root}", cwd=tmp_path)

        assert result.returncode == 0, result.stdout + result.stderr
        says(result.stdout, "stopped 1 agent process", f"ATP process {owner}", "run forged")
        assert gone(recorded) and recorded.returncode == -signal.SIGKILL
        time.sleep(0.2)
        assert stranger.poll() is None and unmarked.poll() is None and old.poll() is None
        assert not forged.exists() and not other_boot.exists() and elsewhere.exists()
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
            process.wait()


def test_a_forged_result_line_is_not_counted_live_or_read_back(tmp_path: Path) -> None:
    """An agent appends a line saying its own run passed, then answers that it failed. The
    `atp test` that ran it counts its own result (in memory) and names the foreign line; read
    back, the run stored twice counts not at all; the other test is intact."""
    suite = writer_suite(tmp_path, ["forge_result", "ok"])
    env = {"RUN_ROOT": str(run_root(tmp_path))}
    live = atp("test", f"--suite={suite}", "--output=json:live.json", cwd=tmp_path, env=env)
    assert live.returncode == 1, live.stdout + live.stderr
    data = json.loads((tmp_path / "live.json").read_text())
    forged, ok = data["tests"]
    assert forged["status"] == "failed" and [r["outcome"] for r in forged["runs"]] == ["failed"]
    assert ok["status"] == "passed"
    (problem,) = data["problems"]
    says(problem, "results.jsonl:1", "run 1 of test 't0'", "not written by this atp test", "not counted")

    run_dir = only_run_dir(tmp_path)
    report = atp("report", str(run_dir), "--output=json:report.json", cwd=tmp_path)
    assert report.returncode == 1, report.stdout + report.stderr
    data = json.loads((tmp_path / "report.json").read_text())
    forged, ok = data["tests"]
    assert forged["runs"] == [] and forged["status"] != "passed"  # neither line wins
    assert ok["status"] == "passed" and len(ok["runs"]) == 1
    (problem,) = data["problems"]
    says(problem, "run 1 of test 't0'", "stored 2 times", "lines 1, 2", "none is counted")
    says(report.stderr, "stored 2 times")


def test_report_reads_no_link_and_masks_what_it_reads(tmp_path: Path) -> None:
    """A log replaced by a link to a file holding a secret, an events file replaced by a link,
    a log rewritten to hold the secret, a result line naming a file outside the run directory as
    its log: the JUnit and HTML reports hold no secret, each refusal is a problem, and the
    results stand."""
    suite = writer_suite(tmp_path, ["ok", "ok", "ok"])
    assert atp("test", f"--suite={suite}", cwd=tmp_path).returncode == 0
    run_dir = only_run_dir(tmp_path)
    secret_file = write(tmp_path / "private" / "key.txt", f"THE_KEY={SECRET}\n")
    lines = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert [line["log_file"] for line in lines] == [f"logs/t{i}.1.log" for i in range(3)]
    lines[2]["log_file"] = str(secret_file)  # an absolute path: outside the run directory
    (run_dir / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (run_dir / "logs" / "t0.1.log").unlink()
    (run_dir / "logs" / "t0.1.log").symlink_to(secret_file)
    (run_dir / "logs" / "t1.1.log").write_text(f"the agent wrote {SECRET} here after ATP\n")
    events = run_dir / "events" / "t1.1.jsonl"
    events.unlink()
    events.symlink_to(secret_file)

    report = atp(
        "report",
        str(run_dir),
        "--output=junit:junit.xml",
        "--output=html:report.html",
        "--output=json:report.json",
        cwd=tmp_path,
        env={"THE_KEY": SECRET},  # a secret-looking variable: `atp report` masks its value
    )

    assert report.returncode == 1, report.stdout + report.stderr  # problems with the run directory
    for name in ("junit.xml", "report.html", "report.json"):
        assert SECRET not in (tmp_path / name).read_text(), name
    assert SECRET not in report.stdout + report.stderr
    assert "the agent wrote *** here after ATP" in (tmp_path / "junit.xml").read_text()
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["summary"]["passed"] == 3
    problems = " | ".join(data["problems"]) + report.stderr
    says(problems, f"{run_dir / 'logs' / 't0.1.log'}: it is a symbolic link")
    says(problems, f"{events}: it is a symbolic link")
    says(problems, str(secret_file), "not a file of the run directory's logs folder")


def test_resume_refuses_a_plan_out_of_bounds_and_makes_a_run_stored_twice_again(tmp_path: Path) -> None:
    suite = writer_suite(tmp_path, ["ok", "ok"], runs=2)
    assert atp("test", f"--suite={suite}", cwd=tmp_path).returncode == 0
    run_dir = only_run_dir(tmp_path)
    header = json.loads((run_dir / "run.json").read_text())
    header["finished_at"] = None
    (run_dir / "run.json").write_text(json.dumps(header))
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    assert len(lines) == 4
    forged = json.loads(lines[0])
    forged.update(outcome="failed", score=0.0)
    (run_dir / "results.jsonl").write_text("\n".join([json.dumps(forged), *lines]) + "\n")

    resumed = atp("test", f"--suite={suite}", f"--resume={run_dir}", "--output=json:out.json", cwd=tmp_path)

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    test_id, number = forged["test_id"], forged["run_number"]
    says(resumed.stderr, f"run {number} of test {test_id!r}", "stored 2 times", "made again")
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["problems"] == [] and data["summary"]["passed"] == 2
    assert all(run["outcome"] == "passed" for test in data["tests"] for run in test["runs"])
    assert sorted(len(test["runs"]) for test in data["tests"]) == [2, 2]

    header = json.loads((run_dir / "run.json").read_text())
    header["finished_at"] = None
    header["tests"][1]["runs"] = 10**9
    (run_dir / "run.json").write_text(json.dumps(header))
    started = time.monotonic()
    refused = atp("test", f"--suite={suite}", f"--resume={run_dir}", cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    one_error(refused.stderr, run_dir / "run.json", "10000", "$.tests[1].runs")
    assert time.monotonic() - started < 30
    report = atp("report", str(run_dir), cwd=tmp_path)  # the same refusal, not a crash
    assert report.returncode == 2
    one_error(report.stderr, run_dir / "run.json", "$.tests[1].runs")
