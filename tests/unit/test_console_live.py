"""The console reporter during a live `atp test`: the header first, a status line on a terminal
(ticking, erased, never written after the report), a line per finished test without one."""

from __future__ import annotations

import io
import re
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from atp.core.baseline import Baseline, BaselineTest
from atp.core.reporter import ReportOptions
from atp.core.results import PlannedTest, RunHeader, RunResult, RunStore, make_test_result
from atp.reporters.console import ConsoleReporter, StatusLine, clock
from atp.reporters.terminal import status as console  # the status line's module: TICK_SECONDS, atexit

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
TID = "550e8400-e29b-41d4-a716-446655440000"
ERASE = "\r\033[K"


class Tty(io.StringIO):
    """A terminal that records every write, to check none is torn or late."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []
        self.lock = threading.Lock()

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self.lock:
            self.writes.append(text)
        return super().write(text)


class Broken(io.StringIO):
    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def make_run(test_id: str, number: int, outcome: str = "passed") -> RunResult:
    return RunResult(
        test_id=test_id,
        run_number=number,
        task_id=TID,
        outcome=outcome,  # type: ignore[arg-type]
        status="completed",
        score=100.0 if outcome == "passed" else 0.0,
        duration_seconds=0.25,
        started_at=NOW,
    )


def new_store(tmp_path: Path) -> tuple[RunHeader, RunStore]:
    header = RunHeader(
        run_id="r",
        suite="live",
        agent="bot",
        agent_type="cli",
        started_at=NOW,
        tests=[
            PlannedTest(id="first", name="F", runs=2),
            PlannedTest(id="second_test", name="S"),
            PlannedTest(id="later", name="L", skip="not ready"),
        ],
    )
    return header, RunStore.create(tmp_path, header)


def play(
    reporter: ConsoleReporter, header: RunHeader, store: RunStore, outcomes: dict[str, list[str]]
) -> None:
    """Call the hooks as the runner does, storing each run, then finish the suite."""
    reporter.atp_suite_started(header, store.directory)
    planned = {p.id: p for p in header.tests}
    for test_id, test_outcomes in outcomes.items():
        runs = []
        for number, outcome in enumerate(test_outcomes, 1):
            reporter.atp_run_started()
            run = make_run(test_id, number, outcome)
            store.append(run)
            runs.append(run)
            reporter.atp_run_finished(run)
        reporter.atp_test_finished(make_test_result(planned[test_id], runs, False))
    header.finished_at = NOW + timedelta(seconds=2)
    store.write_header(header)
    store.close()
    reporter.atp_suite_finished()


def test_without_a_terminal_the_header_comes_first_then_a_line_per_finished_test(tmp_path: Path) -> None:
    header, store = new_store(tmp_path)
    stream = io.StringIO()
    reporter = ConsoleReporter(ReportOptions(stream=stream))
    reporter.atp_suite_started(header, store.directory)
    started = stream.getvalue()
    assert started.startswith("ATP Test Results\n================\n\nSuite: live\nAgent: bot (cli)\n")
    assert f"Run directory: {store.directory}\n\nRunning 2 tests (3 runs):\n" in started
    run = make_run("second_test", 1, "failed")
    reporter.atp_run_started()
    reporter.atp_run_finished(run)
    assert stream.getvalue() == started  # runs are not listed, tests are
    reporter.atp_test_finished(make_test_result(header.tests[1], [run], False))
    assert stream.getvalue() == started + "  ✗ second_test    0.0/100  time 0.25s\n"
    runs = [make_run("first", 1), make_run("first", 2, "failed")]
    reporter.atp_test_finished(make_test_result(header.tests[0], runs, False))
    assert stream.getvalue().endswith(
        "  ✗ first         50.0/100  (σ=70.7)  time 0.25s/run, 0.50s total  1/2 runs passed, very unstable, flaky\n"
    )
    assert "\r" not in stream.getvalue() and "\033" not in stream.getvalue()


def test_the_live_report_does_not_repeat_the_header_but_atp_report_prints_it(tmp_path: Path) -> None:
    header, store = new_store(tmp_path)
    stream = io.StringIO()
    reporter = ConsoleReporter(ReportOptions(stream=stream))
    play(reporter, header, store, {"first": ["passed", "passed"], "second_test": ["passed"]})
    results = store.results()
    reporter.report(results, store)
    live = stream.getvalue()
    assert live.count("ATP Test Results") == 1 and live.count("Run directory:") == 1
    again = io.StringIO()
    ConsoleReporter(ReportOptions(stream=again)).report(results, RunStore.open(store.directory))  # atp report
    header_part, body = again.getvalue().split("Tests:\n", 1)
    assert header_part.startswith("ATP Test Results\n") and header_part.endswith(
        f"Run directory: {store.directory}\n\n"
    )
    assert live.startswith(header_part)
    listed = body[: body.index("\n\n")].splitlines()
    assert [line.split()[1] for line in listed] == ["first", "second_test", "later"]
    for line in listed:  # without a terminal each test is printed once, the same as atp report prints it
        assert live.count(line.split()[1] + " ") == 1, live
        assert line + "\n" in live
    # printed as they finished: first and second_test; the report lists only the one not printed yet
    assert "  ✓ second_test  100.0/100  time 0.25s\n\nTests:\n  - later " in live
    assert live.endswith(body[body.index("\n\n") :])  # then the same summary as atp report's


def test_without_a_terminal_a_failure_is_printed_once_under_its_test(tmp_path: Path) -> None:
    header, store = new_store(tmp_path)
    stream = io.StringIO()
    reporter = ConsoleReporter(ReportOptions(stream=stream))
    play(reporter, header, store, {"first": ["passed", "failed"], "second_test": ["passed"]})
    reporter.report(store.results(), store)
    live = stream.getvalue()
    printed = live[: live.index("second_test  100.0")]
    assert printed.count("✗ first") == 1 and live.count("✗ first") == 1
    assert "1/2 runs passed, very unstable, flaky" in printed  # with the lines under it, as it finished


def test_without_a_terminal_the_baseline_verdicts_follow_at_the_end(tmp_path: Path) -> None:
    """A verdict with Holm's correction needs every test's p-value: it cannot be printed as a test
    finishes, so the verdicts come at the end, under the test's id, and the line is not repeated."""
    header, _ = new_store(tmp_path / "unused")
    baseline = Baseline(suite="live", tests={"first": BaselineTest(mean_score=50.0, std=5.0, n_runs=3)})
    store = RunStore.create(tmp_path, header, baseline=baseline)
    stream = io.StringIO()
    reporter = ConsoleReporter(ReportOptions(stream=stream))
    play(reporter, header, store, {"first": ["passed", "passed"], "second_test": ["passed"]})
    results = store.results()
    assert results.tests[0].baseline is not None
    reporter.report(results, store)
    live = stream.getvalue()
    assert live.count("✓ first ") == 1 and live.count("✓ second_test ") == 1
    verdicts = live[live.index("Against the baseline:\n") :].splitlines()
    assert verdicts[1] == "  first" and verdicts[2].startswith("    baseline: improvement +50.0")
    assert live.count("baseline: improvement") == 1


def test_on_a_terminal_a_status_line_is_rewritten_and_erased(tmp_path: Path) -> None:
    header, store = new_store(tmp_path)
    tty = Tty()
    reporter = ConsoleReporter(ReportOptions(stream=tty, color=False))
    play(reporter, header, store, {"first": ["passed", "failed"], "second_test": ["error"]})
    out = tty.getvalue()
    assert out.index("Run directory:") < out.index("running: 0/3 runs done, 0 in progress, 0 failed, ")
    drawn = re.sub(r"\d+s elapsed", "Ns elapsed", out)
    assert f"{ERASE}running: 0/3 runs done, 1 in progress, 0 failed, Ns elapsed" in drawn
    assert f"{ERASE}running: 2/3 runs done, 0 in progress, 1 failed, Ns elapsed" in drawn
    assert f"{ERASE}running: 3/3 runs done, 0 in progress, 2 failed, Ns elapsed" in drawn
    assert "\n  ✗ first" not in out  # no per-test lines on a terminal: the status line says it
    assert out.endswith(ERASE) and "Running" not in out
    reporter.report(store.results(), store)
    report = tty.getvalue()[len(out) :]
    assert report.startswith("Tests:\n") and "ATP Test Results" not in report


def test_elapsed_time_ticks_while_no_run_finishes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "TICK_SECONDS", 0.02)
    header, store = new_store(tmp_path)
    tty = Tty()
    reporter = ConsoleReporter(ReportOptions(stream=tty, color=False))
    reporter.atp_suite_started(header, store.directory)
    reporter.atp_run_started()
    status = reporter.status
    assert status is not None
    status.started -= 61  # as if the run had been going for a minute
    deadline = time.monotonic() + 5
    while "1m01s elapsed" not in tty.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "running: 0/3 runs done, 1 in progress, 0 failed, 1m01s elapsed" in tty.getvalue()
    reporter.report(store.results(), store)  # without atp_suite_finished: report() stops it too
    final = tty.getvalue()
    assert final.rstrip().endswith("Total time: 0.00s")
    time.sleep(0.1)
    assert tty.getvalue() == final  # nothing written after the report
    # every write is whole: the status line is always drawn or erased from the line's start
    status_writes = [w for w in tty.writes if "running:" in w]
    assert status_writes and all(w.startswith(ERASE) and "\n" not in w for w in status_writes)
    assert not any(t.name == "atp-console-status" for t in threading.enumerate())


def test_the_status_line_fits_the_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(StatusLine, "_width", lambda self: 30)
    tty = Tty()
    status = StatusLine(tty, lambda text: text, 4)
    status.start()
    status.close()
    drawn = [w for w in tty.writes if "running" in w]
    assert drawn == [ERASE + "running: 0/4 runs done, 0 in "]  # 29 characters: never wraps
    assert tty.writes[-1] == ERASE
    status.close()  # idempotent
    assert tty.writes[-1] == ERASE and len([w for w in tty.writes if w == ERASE]) == 1


def test_hooks_never_raise_and_a_broken_stream_stops_progress(tmp_path: Path) -> None:
    header, store = new_store(tmp_path)
    reporter = ConsoleReporter(ReportOptions(stream=Broken(), color=False))
    play(reporter, header, store, {"first": ["passed", "failed"]})  # no exception
    # hooks given something unexpected do not raise either
    odd = ConsoleReporter(ReportOptions(stream=io.StringIO()))
    odd.atp_suite_started(None, None)  # type: ignore[arg-type]
    odd.atp_run_finished(None)  # type: ignore[arg-type]
    odd.atp_test_finished(None)  # type: ignore[arg-type]
    odd.atp_suite_finished()


def test_a_status_line_left_open_is_erased_at_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registered = []
    monkeypatch.setattr(console.atexit, "register", registered.append)
    monkeypatch.setattr(console.atexit, "unregister", lambda f: registered.remove(f))
    tty = Tty()
    status = StatusLine(tty, lambda text: text, 2)
    status.start()
    assert registered == [status.close]
    registered[0]()  # what the interpreter does when ATP stops without finishing the suite
    assert tty.getvalue().endswith(ERASE) and registered == []


def test_clock() -> None:
    assert [clock(x) for x in (0.4, 59.9, 60, 125, 3725)] == ["0s", "59s", "1m00s", "2m05s", "1h02m05s"]


def test_a_warning_erases_the_status_line_which_comes_back(tmp_path: Path) -> None:
    import logging

    from atp.cli.running import WarningHandler

    tty = Tty()
    header, store = new_store(tmp_path)
    reporter = ConsoleReporter(ReportOptions(stream=tty))
    reporter.atp_suite_started(header, store.directory)
    err = io.StringIO()
    handler = WarningHandler(err)
    WarningHandler.clear = [reporter]
    try:
        handler.emit(logging.LogRecord("atp", logging.WARNING, __file__, 1, "a warning", None, None))
        assert tty.writes[-1] == ERASE and err.getvalue() == "a warning\n"
        assert reporter.status is not None
        reporter.status.run_started()  # still alive: drawn again
        assert tty.writes[-1].startswith(ERASE) and "running: 0/3 runs done, 1 in progress" in tty.writes[-1]
    finally:
        WarningHandler.clear = []
        reporter.clear_progress()
