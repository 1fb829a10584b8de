"""`atp` against hostile agents, full disks and damaged run directories: each gives a result or
an `atp: error:` saying what happened, never a traceback, and what was finished is kept."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time
from pathlib import Path

from tests.conftest import AGENTS, ATP, PYTHON, behave_agent, write
from tests.e2e.test_atp_command import atp, suite_for
from tests.facts import one_error, says

SECRET = "sk-Ünïcode-ſecret-0042"


def hostile(mode: str) -> list[str]:
    return [PYTHON, str(AGENTS / "hostile_output.py"), mode]


def two_tests(agent: list[str], tmp_path: Path, extra: str = "") -> Path:
    tests = "  - id: hostile\n    task: {description: x}\n  - id: fine\n    task: {description: x}\n"
    suite = suite_for(tmp_path, agent, tests)
    if extra:
        suite.write_text(suite.read_text().replace("tests:\n", extra + "tests:\n", 1))
    return suite


def only_run_dir(tmp_path: Path) -> Path:
    (run_dir,) = (tmp_path / ".atp" / "runs").iterdir()
    return run_dir


def test_terminal_escapes_from_an_agent_are_shown_escaped(tmp_path: Path) -> None:
    suite = suite_for(tmp_path, hostile("escapes"), "  - id: t\n    task: {description: x}\n")
    result = atp("test", f"--suite={suite}", "--verbose", cwd=tmp_path)
    assert result.returncode == 1
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout and "\r" not in result.stdout
    assert "- failed: \\e[2J\\e[1;32m✓ all 100 tests passed\\e[0m\\r" in result.stdout
    assert "| \\e[2J\\e[H\\e]0;pwned\\x07 ✓ everything passed" in result.stdout


def test_a_secret_in_any_json_spelling_is_masked_everywhere(tmp_path: Path) -> None:
    write(tmp_path / "atp.config.yaml", "secrets:\n  key: ${THE_KEY}\n")
    suite = suite_for(tmp_path, hostile("secrets"), "  - id: t\n    task: {description: x}\n")
    env = {"THE_KEY": SECRET, "SECRET_VALUE": SECRET}
    result = atp(
        "test", f"--suite={suite}", "--output=json", "--output-file=out.json", "-v", cwd=tmp_path, env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = only_run_dir(tmp_path)
    for path in [tmp_path / "out.json", *run_dir.rglob("*")]:
        if path.is_file():
            raw = path.read_bytes()
            assert SECRET.encode() not in raw, path
            if path.suffix in (".json", ".jsonl"):
                for line in raw.splitlines() if path.suffix == ".jsonl" else [raw]:
                    assert SECRET not in json.dumps(json.loads(line), ensure_ascii=False), path
    data = json.loads((tmp_path / "out.json").read_text())
    run_ = data["tests"][0]["runs"][0]
    assert run_["artifacts"][0]["data"] == {"key": "***"}
    assert [e["payload"].get("input", e["payload"].get("thought")) for e in run_["events"]] == [
        {"key": "***"},
        "the key is ***",
    ]
    assert SECRET not in result.stdout + result.stderr


def test_no_part_of_a_secret_shows_where_a_preview_is_cut(tmp_path: Path) -> None:
    write(tmp_path / "atp.config.yaml", "secrets:\n  key: ${THE_KEY}\n")
    suite = suite_for(tmp_path, hostile("secret_at_cut"), "  - id: t\n    task: {description: x}\n")
    env = {"THE_KEY": SECRET, "SECRET_VALUE": SECRET}
    result = atp(
        "test", f"--suite={suite}", "--output=json", "--output-file=out.json", "-v", cwd=tmp_path, env=env
    )
    assert result.returncode == 1
    error = json.loads((tmp_path / "out.json").read_text())["tests"][0]["runs"][0]["error"]
    assert "its last stdout line is not an ATP response" in error and "***" in error
    written = (
        result.stdout
        + (tmp_path / "out.json").read_text()
        + (only_run_dir(tmp_path) / "results.jsonl").read_text()
    )
    assert SECRET[:6] not in written and "\\u00dc" not in written


def test_negative_metrics_do_not_stop_the_suite(tmp_path: Path) -> None:
    suite = write(
        tmp_path / "suite.yaml",
        f"""
        test_suite: metrics
        agents:
          - {{name: bad, type: cli, command: {hostile("negative_metrics")!r}}}
        tests:
          - id: scored
            task: {{description: x}}
            constraints: {{max_tokens: 100, budget_usd: 1}}
          - id: other
            task: {{description: x}}
        """,
    )
    result = atp("test", f"--suite={suite}", "--verbose", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    # its first event has negative token counts: each run fails there, saying so (issue 26)
    says(result.stdout, "event 0 (llm_request)", "payload.input_tokens = -1000000", "out of bounds")
    assert "Summary: 0 passed, 2 failed, 0 skipped" in result.stdout
    assert "Traceback" not in result.stderr
    assert atp("report", cwd=tmp_path).returncode == 1


def test_stdout_on_a_full_device_is_an_atp_error(tmp_path: Path) -> None:
    suite = two_tests(hostile("ok"), tmp_path)
    with open("/dev/full", "w") as full:
        process = subprocess.run(
            [ATP, "test", f"--suite={suite}"],
            cwd=tmp_path,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert process.returncode == 2
    one_error(process.stderr, "cannot write", "standard output", "No space left on device")
    assert atp("report", cwd=tmp_path).returncode == 0


def test_an_impossible_run_directory_is_an_atp_error(tmp_path: Path) -> None:
    suite = two_tests(hostile("ok"), tmp_path)
    (tmp_path / "a-file").write_text("")
    result = atp("test", f"--suite={suite}", "--run-dir=a-file/runs", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("atp: error: cannot create the run directory a-file/runs/")
    assert result.stderr.rstrip().endswith(": Not a directory") and "Traceback" not in result.stderr


def test_a_full_disk_stops_the_suite_and_keeps_every_result_written(tmp_path: Path) -> None:
    suite = suite_for(tmp_path, hostile("ok"), "  - id: t\n    task: {description: x}\n")

    def small_files() -> None:  # files ATP writes may not grow past 3,000 bytes: a disk that fills up
        resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000))

    process = subprocess.run(
        [ATP, "test", f"--suite={suite}", "--runs=20"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=small_files,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert process.returncode == 2, process.stdout + process.stderr
    assert "Traceback" not in process.stderr
    assert "atp: error: cannot append a result to" in process.stderr and "File too large" in process.stderr
    run_dir = only_run_dir(tmp_path)
    assert f"the suite was stopped. The results written before are kept in {run_dir}" in process.stderr
    assert not list(run_dir.glob("*.partial"))
    kept = len((run_dir / "results.jsonl").read_text().splitlines())
    assert 1 <= kept < 20
    report = atp("report", str(run_dir), "--output=json", "--output-file=-", cwd=tmp_path)
    data = json.loads(report.stdout)
    assert data["summary"]["runs"] == kept and data["interrupted"] is True and data["problems"] == []


def test_report_of_damaged_run_directories(tmp_path: Path) -> None:
    suite = two_tests(behave_agent("ok"), tmp_path)
    assert atp("test", f"--suite={suite}", cwd=tmp_path).returncode == 0
    run_dir = only_run_dir(tmp_path)
    # an events file ending in a partial line: the report leaves it out and says so
    events = next((run_dir / "events").iterdir())
    events.write_bytes(events.read_bytes() + b'{"version":"1.0","task_id')
    report = atp("report", str(run_dir), "--output=json", cwd=tmp_path)
    assert report.returncode == 1
    data = json.loads(report.stdout)
    assert all(len(r["events"]) == 2 for t in data["tests"] for r in t["runs"])
    assert "event 3 is damaged" in report.stderr and "event 3 is damaged" in " ".join(data["problems"])
    # a last results line cut short: reported as damaged, with a non-zero exit
    results = run_dir / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    results.write_bytes(lines[0] + lines[1][:50])
    report = atp("report", str(run_dir), cwd=tmp_path)
    assert report.returncode == 1
    assert "results.jsonl:2 was cut short" in report.stdout and "skipped: not run" in report.stdout
    assert "1 problem with the run directory" in report.stdout
    # results.jsonl that is a directory
    results.unlink()
    results.mkdir()
    report = atp("report", str(run_dir), cwd=tmp_path)
    assert report.returncode == 2
    one_error(report.stderr, "cannot read", str(results), "directory", "not a regular file")


def test_output_file_must_not_be_the_suite_and_dash_means_stdout(tmp_path: Path) -> None:
    suite = two_tests(behave_agent("ok"), tmp_path)
    before = suite.read_text()
    result = atp("test", f"--suite={suite}", "--output=json", f"--output-file={suite}", cwd=tmp_path)
    assert result.returncode == 2
    one_error(result.stderr, f"--output-file {suite}", f"input file {suite}", "overwritten")
    assert suite.read_text() == before
    result = atp("test", f"--suite={suite}", "--output=json", "--output-file=-", cwd=tmp_path)
    assert result.returncode == 0 and json.loads(result.stdout)["summary"]["passed"] == 2
    assert not (tmp_path / "-").exists()
    (tmp_path / "plain").write_text("")
    result = atp("report", "--output=json", "--output-file=plain/out.json", cwd=tmp_path)
    assert result.returncode == 2
    one_error(result.stderr, "--output-file plain/out.json", "plain is not a folder")


def test_parallel_beyond_the_open_file_limit_runs_fewer_at_once(tmp_path: Path) -> None:
    suite = suite_for(tmp_path, behave_agent("ok"), "  - id: t\n    task: {description: x}\n")

    def few_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (160, 160))

    process = subprocess.run(
        [ATP, "test", f"--suite={suite}", "--runs=40", "--parallel=200"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=few_files,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert process.returncode == 0, process.stdout + process.stderr
    assert (
        "atp: warning: --parallel 200 needs about 2064 open files, but this process may open 160 (ulimit -n); running 9 at once instead"
        in process.stderr
    )
    assert "Summary: 1 passed, 0 failed, 0 skipped" in process.stdout


def test_limits_in_the_config_bound_what_a_run_may_send(tmp_path: Path) -> None:
    write(tmp_path / "atp.config.yaml", "limits:\n  max_events: 5\n  max_log_bytes: 2048\n")
    suite = suite_for(tmp_path, behave_agent("flood", "10"), "  - id: t\n    task: {description: x}\n")
    result = atp("test", f"--suite={suite}", cwd=tmp_path)
    assert result.returncode == 1
    assert "agent flooded ATP with events: more than 5 in one run" in result.stdout
    write(tmp_path / "atp.config.yaml", "limits:\n  max_event_bytes: 10\n")
    result = atp("test", f"--suite={suite}", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"atp: error: {tmp_path / 'atp.config.yaml'}:2: at limits.max_event_bytes: expected int >= 1024"
    )


def test_a_thread_abandoned_at_a_time_limit_does_not_keep_atp_from_exiting(tmp_path: Path) -> None:
    """An evaluator stuck in a blocking call on a worker thread is abandoned at its time limit;
    Python would wait for that thread at exit, ATP does not."""
    code = (
        "import sys, threading, time\n"
        "threading.Thread(target=time.sleep, args=(3600,)).start()\n"
        "sys.argv = ['atp', 'version']\n"
        "from atp.cli.main import run\n"
        "run()\n"
    )
    started = time.monotonic()
    result = subprocess.run([PYTHON, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 30
    assert result.returncode == 0 and result.stdout.startswith("atp-kernel ")


def test_a_fifo_planted_in_the_run_directory_does_not_stall_atp(tmp_path: Path) -> None:
    suite = suite_for(tmp_path, hostile("plant_fifo"), "  - id: t\n    task: {description: x}\n")
    started = time.monotonic()
    result = atp("test", f"--suite={suite}", "--runs=3", cwd=tmp_path, timeout=60)
    assert time.monotonic() - started < 20
    assert result.returncode == 2
    log = next((tmp_path / ".atp" / "runs").iterdir()) / "logs" / "t.2.log"
    assert result.stderr.startswith(f"atp: error: cannot write {log}: it is a FIFO, not a regular file")
    assert "the suite was stopped" in result.stderr


def test_report_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    suite = two_tests(behave_agent("ok"), tmp_path)
    assert atp("test", f"--suite={suite}", cwd=tmp_path).returncode == 0
    run_dir = only_run_dir(tmp_path)
    results = run_dir / "results.jsonl"
    kept = results.read_bytes()
    results.unlink()
    results.symlink_to("/dev/zero")
    started = time.monotonic()
    report = atp("report", str(run_dir), cwd=tmp_path, timeout=60)
    assert report.returncode == 2
    one_error(
        report.stderr, "cannot read", str(results), "symbolic link", "not a regular file"
    )  # not followed
    results.unlink()
    os.mkfifo(results)
    report = atp("report", str(run_dir), cwd=tmp_path, timeout=60)
    assert report.returncode == 2 and "it is a FIFO, not a regular file" in report.stderr
    results.unlink()
    results.write_bytes(kept)
    events = next((run_dir / "events").iterdir())
    events.unlink()
    os.mkfifo(events)
    report = atp("report", str(run_dir), "--output=json", cwd=tmp_path, timeout=60)
    assert report.returncode == 1
    assert f"cannot read {events}: it is a FIFO, not a regular file" in report.stderr
    assert json.loads(report.stdout)["summary"]["passed"] == 2
    assert time.monotonic() - started < 30


def test_output_files_that_are_links_devices_or_fifos(tmp_path: Path) -> None:
    import stat
    import threading

    suite = two_tests(behave_agent("ok"), tmp_path)
    assert atp("test", f"--suite={suite}", cwd=tmp_path).returncode == 0
    # a link: the file it names is written, the link stays
    (tmp_path / "target.json").write_text("old")
    (tmp_path / "link.json").symlink_to("target.json")
    result = atp("report", "--output=json", "--output-file=link.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "link.json").is_symlink()
    assert json.loads((tmp_path / "target.json").read_text())["summary"]["passed"] == 2
    # a FIFO nobody reads: an error at once; one that is read: written into
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    result = atp("report", "--output=json", f"--output-file={fifo}", cwd=tmp_path, timeout=30)
    assert result.returncode == 2
    one_error(result.stderr, f"cannot write {fifo}", "FIFO no process reads")
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    time.sleep(0.2)
    result = atp("report", "--output=json", f"--output-file={fifo}", cwd=tmp_path, timeout=30)
    reader.join(timeout=30)
    assert result.returncode == 0 and json.loads(received[0])["summary"]["passed"] == 2
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    # devices are written into, never replaced by a file (a full one is an error)
    try:
        os.mknod(tmp_path / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        os.mknod(tmp_path / "full", stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except PermissionError:
        return  # making device files needs root
    result = atp("report", "--output=json", "--output-file=null", cwd=tmp_path)
    assert result.returncode == 0 and stat.S_ISCHR((tmp_path / "null").lstat().st_mode)
    result = atp("report", "--output=json", "--output-file=full", cwd=tmp_path)
    assert result.returncode == 2
    one_error(result.stderr, "cannot write full", "No space left on device")
    assert stat.S_ISCHR((tmp_path / "full").lstat().st_mode)


def test_control_characters_in_names_and_paths_are_escaped_in_messages(tmp_path: Path) -> None:
    suite = write(
        tmp_path / "suite.yaml",
        f"""
        test_suite: "s\\e[2J"
        agents:
          - {{name: "ag\\e[5mblink", type: cli, command: {hostile("ok")!r}}}
        tests:
          - id: t
            tags: ["tag\\e[31m"]
            task: {{description: x}}
        """,
    )
    outputs = []
    for args in (
        ["test", f"--suite={suite}", "--agent=x"],
        ["test", f"--suite={suite}", "--tags=zz"],
        ["list-agents", f"--suite={suite}"],
        ["report", "x\x1b]0;PWNED\x07"],
        ["test", f"--suite={suite}"],
    ):
        result = atp(*args, cwd=tmp_path)
        outputs.append(result.stdout + result.stderr)
    everything = "".join(outputs)
    assert "\x1b" not in everything and "\x07" not in everything
    assert "no agent named 'x' (defined: ag\\e[5mblink)" in outputs[0]
    assert "(tags in the suite: tag\\e[31m)" in outputs[1]
    assert "ag\\e[5mblink  type=cli" in outputs[2]
    assert "x\\e]0;PWNED\\x07" in outputs[3]
    assert "Suite: s\\e[2J" in outputs[4] and "Agent: ag\\e[5mblink (cli)" in outputs[4]


def test_evaluator_settings_are_checked_before_any_run(tmp_path: Path) -> None:
    suite = write(
        tmp_path / "suite.yaml",
        f"""
        test_suite: s
        agents:
          - {{name: a, type: cli, command: {hostile("ok")!r}}}
        tests:
          - id: t
            task: {{description: x}}
            assertions:
              - {{type: contains, config: {{name: result, pattern: "o+", regex: true}}}}
        """,
    )
    config = tmp_path / "atp.config.yaml"
    for value, expected in [
        ("1.0e+300", "expected float <= 3600.0"),
        (".nan", "expected float > 0.0"),
        ("-1", "expected float > 0.0"),
        ("'5'", "expected float, got str"),
    ]:
        config.write_text(f"evaluators:\n  contains:\n    regex_timeout_seconds: {value}\n")
        result = atp("test", f"--suite={suite}", cwd=tmp_path)
        assert result.returncode == 2, value
        one_error(result.stderr, f"{config}:3:", "evaluators.contains.regex_timeout_seconds", expected)
        assert not (tmp_path / ".atp").exists()
    config.write_text("evaluators:\n  contains:\n    regex_timout_seconds: 5\n")
    result = atp("test", f"--suite={suite}", cwd=tmp_path)
    one_error(
        result.stderr,
        f"{config}:3:",
        "evaluators.contains.regex_timout_seconds",
        "unknown field",
        "'regex_timout_seconds'",
    )
    config.write_text(
        "evaluators:\n  contians: {regex_timeout_seconds: 5}\n  contains: {timeout_seconds: 9}\n"
    )
    result = atp("test", f"--suite={suite}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (
        "atp: warning: the config has settings for 'contians', which no installed evaluator checks"
        in result.stderr
    )
