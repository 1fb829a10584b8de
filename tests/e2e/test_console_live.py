"""The console report of a real `atp test`: progress from the first second (a ticking status line on
a terminal, a line per finished test in a CI log) and failures shown with their evidence."""

from __future__ import annotations

import os
import re
import select
import subprocess
import time
from pathlib import Path

from tests.conftest import ATP, behave_agent
from tests.e2e.test_atp_command import atp, suite_for

ASSERTIONS = (
    "    assertions:\n"
    "      - {type: artifact_exists, config: {path: report.md}}\n"
    "      - {type: contains, config: {path: report.md, pattern: Slack}}\n"
    "      - {type: sections, config: {path: report.md, sections: [Summary]}}\n"
)


def on_a_terminal(args: list[str], cwd: Path, timeout: float = 60) -> tuple[int, str]:
    """Run ``atp`` with stdout on a pseudo-terminal 80 columns wide; its exit code and output."""
    import fcntl
    import pty
    import struct
    import termios

    main, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    process = subprocess.Popen([ATP, *args], cwd=cwd, env=env, stdout=secondary, stderr=subprocess.PIPE)
    os.close(secondary)
    chunks = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.1)
        if not ready:
            if process.poll() is not None:
                break
            continue
        try:
            data = os.read(main, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not data:
            break
        chunks.append(data)
    code = process.wait(timeout=10)
    os.close(main)
    return code, b"".join(chunks).decode()


def test_on_a_terminal_the_header_comes_first_and_elapsed_time_ticks(tmp_path: Path) -> None:
    suite = suite_for(tmp_path, behave_agent("slow", "2.5"), "  - id: slow\n    task: {description: x}\n")
    code, out = on_a_terminal(["test", f"--suite={suite}"], tmp_path)
    assert code == 0, out
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)  # colour off, erasing kept
    header_end = plain.index("Run directory: ")
    first_status = plain.index("running: 0/1 runs done")
    assert header_end < first_status < plain.index("Tests:")
    # no run finished for 2.5 s, yet the elapsed time moved on
    assert "running: 0/1 runs done, 1 in progress, 0 failed, 2s elapsed" in plain
    assert plain.count("ATP Test Results") == 1
    # the status line is erased before the report, and nothing is written after it
    assert "\r\x1b[KTests:\r\n" in plain
    assert re.fullmatch(r"[0-9.ms]+\r\n", plain.rsplit("Total time: ", 1)[1])
    assert "running:" not in plain.split("Tests:")[1]


def test_in_a_ci_log_each_test_is_printed_as_it_finishes(tmp_path: Path) -> None:
    tests = "".join(f"  - id: t{i}\n    task: {{description: x}}\n" for i in range(3))
    suite = suite_for(tmp_path, behave_agent("slow", "1"), tests)
    process = subprocess.Popen(
        [ATP, "test", f"--suite={suite}"],
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    seen: list[tuple[float, str]] = []
    for line in process.stdout:
        seen.append((time.monotonic(), line))
    process.wait(timeout=60)
    assert process.returncode == 0
    out = "".join(line for _, line in seen)
    assert "\r" not in out and "\x1b" not in out
    lines = out.splitlines()
    start = lines.index("Running 3 tests (3 runs):")
    assert lines[start - 1] == "" and lines[start - 2].startswith("Run directory: ")
    assert [line.split()[:2] for line in lines[start + 1 : start + 4]] == [
        ["✓", "t0"],
        ["✓", "t1"],
        ["✓", "t2"],
    ]
    assert lines[start + 4] == "" and lines[start + 5].startswith("Summary: 3 passed")
    assert "Tests:" not in out  # without a terminal each test is printed once, as it finishes
    # each line came as its test finished, not all at the end
    when: dict[str, float] = {}
    for at, line in seen:
        if line.startswith("  ✓ t"):
            when.setdefault(line.split()[1], at)  # the progress line, not the report's
    assert when["t2"] - when["t0"] > 1.5
    assert out.count("ATP Test Results") == 1
    # atp report prints the same report, with the header and without the progress
    (run_dir,) = (tmp_path / ".atp" / "runs").iterdir()
    report = atp("report", str(run_dir), cwd=tmp_path)
    header, body = report.stdout.split("Tests:\n", 1)
    listed, summary = body.split("\n\n", 1)
    # (but for the config the command used, which only atp test knows)
    config = next(line for line in lines if line.startswith("Config: "))
    assert out.replace(config + "\n", "", 1).startswith(header) and out.endswith("\n\n" + summary)
    assert all(out.count(line + "\n") == 1 for line in listed.splitlines())  # the same lines, once
    assert "Running" not in report.stdout


def test_a_crashing_agent_shows_its_error_once_and_folds_what_follows(tmp_path: Path) -> None:
    suite = suite_for(
        tmp_path, behave_agent("crash"), "  - id: crashes\n    task: {description: x}\n" + ASSERTIONS
    )
    result = atp("test", f"--suite={suite}", "--runs=3", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    body = result.stdout[result.stdout.index("Running 1 test") :].splitlines()
    assert body[1].startswith("  ✗ crashes    0.0/100  (σ=0.0)   time ") and body[1].endswith(
        "  0/3 runs passed"
    )
    # the agent's error first (the adapter may add the end of its stderr), then the follow-ons
    assert body[2].startswith("    - runs 1-3: failed: agent exited with code 3 without writing a response")
    assert body[3] == (
        "    - runs 1-3: 3 checks not met: the agent failed and produced no artifacts "
        "(artifact_exists:report.md, contains:report.md, sections:report.md)"
    )
    assert body[4] == ""
    verbose = atp("report", "--verbose", cwd=tmp_path)
    assert "not met" not in verbose.stdout
    assert "    run 2: response: status failed, no artifacts" in verbose.stdout
    assert (
        "    ✗ run 3: contains:report.md: expected artifact 'report.md'; the agent produced no artifacts"
        in verbose.stdout
    )
    assert "      | RuntimeError: the agent broke" in verbose.stdout


def test_quiet_shows_only_what_did_not_pass_and_the_summary(tmp_path: Path) -> None:
    tests = (
        "  - id: fine\n    task: {description: x}\n"
        "  - id: broken\n    task: {description: x}\n"
        "    assertions: [{type: contains, config: {pattern: 'not there at all'}}]\n"
    )
    suite = suite_for(tmp_path, behave_agent("ok"), tests)
    code, out = on_a_terminal(["test", f"--suite={suite}", "--quiet"], tmp_path)
    assert code == 1, out
    plain = re.sub(r"\x1b\[[0-9;]*[mK]", "", out).replace("\r", "")
    assert "running:" not in plain and "ATP Test Results" not in plain  # no progress, no header
    lines = plain.splitlines()
    assert lines[0].split()[:2] == ["✗", "broken"]
    assert any("not there at all" in line for line in lines)  # the failure's evidence
    assert "fine" not in plain
    assert re.fullmatch(r"Summary: 1 passed, 1 failed, 0 skipped \(50.0%\) in [0-9.ms]+", lines[-1]), lines[
        -1
    ]
    # atp report -q says the same; -q with -v is a usage error
    report = atp("report", "-q", cwd=tmp_path)
    assert report.returncode == 1 and report.stdout.splitlines()[-1] == lines[-1]
    both = atp("report", "-q", "-v", cwd=tmp_path)
    assert both.returncode == 2 and "--verbose and --quiet cannot be used together" in both.stderr
