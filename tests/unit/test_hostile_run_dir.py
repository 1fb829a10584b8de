"""What ATP reads back from a run directory is untrusted input (issue 26, kind 5): files opened
without following links and bounded (atp.core.files), the header's plan within bounds, result
lines counted once and only when ATP's (atp.core.readback through RunStore), logs and events
masked again, and the process ledger acted on only for processes that prove ATP started them
(atp.core.ledger). The `atp` command's side is tests/e2e/test_hostile_run_dir.py."""

from __future__ import annotations

import io
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from atp.core import files, readback
from atp.core.errors import AtpError
from atp.core.ledger import LEDGER_FILE, ProcessLedger, boot_id, new_token, start_time, stop_abandoned
from atp.core.results import RESULTS_FILE, RunResult, RunStore
from atp.core.secrets import Masker
from tests.facts import says
from tests.unit.test_ledger import dead_owner, gone, owner_line, sleeper, write_ledger
from tests.unit.test_trace_results_scoring import header, result

SECRET = "sk-the-secret-1234"
EVENT = (
    '{"version":"1.0","task_id":"x","timestamp":"2026-01-01T00:00:00Z","sequence":0,'
    '"event_type":"progress","payload":{"message":"%s"}}'
)


def line(run: RunResult) -> bytes:
    return msgspec.json.encode(run) + b"\n"


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


# --- files: read inside a directory, without links, bounded ---------------------------------


def test_open_inside_refuses_links_paths_out_and_what_is_not_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text(SECRET)
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "a.log").write_text("fine")
    (run / "logs" / "link.log").symlink_to(tmp_path / "secret.txt")
    (run / "events").symlink_to(run / "logs")  # a folder replaced by a link
    os.mkfifo(run / "logs" / "fifo.log")
    assert files.read_inside(run, "logs/a.log", 100) == (b"fine", False)
    refusals = {
        "logs/link.log": "it is a symbolic link",
        "events/a.log": "its folder events is a symbolic link",
        "logs/fifo.log": "it is a FIFO, not a regular file",
        "logs/../../secret.txt": "not a path inside the run directory",
        str(tmp_path / "secret.txt"): "not a path inside the run directory",
        "logs": "it is a directory",
    }
    for relative, why in refusals.items():
        with pytest.raises(OSError) as raised:
            files.read_inside(run, relative, 100)
        says(str(raised.value), why, relative if not relative.startswith("/") else "")
    with pytest.raises(FileNotFoundError):
        files.open_inside(run, "logs/missing.log")


def test_read_inside_is_bounded_at_either_end_and_lines_are_bounded(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"0123456789")
    assert files.read_inside(tmp_path, "big", 4) == (b"0123", True)
    assert files.read_inside(tmp_path, "big", 4, end=True) == (b"6789", True)
    assert files.read_inside(tmp_path, "big", 10, end=True) == (b"0123456789", False)
    handle = io.BytesIO(b"short\n" + b"x" * 50 + b"\nlast\n" + b"y" * 5)
    assert list(files.lines(handle, 10)) == [b"short\n", None, b"last\n", b"yyyyy"]
    assert list(files.lines(io.BytesIO(b"x" * 10 + b"\n"), 10)) == [b"x" * 10 + b"\n"]


# --- run.json: the plan within bounds --------------------------------------------------------


def write_header(directory: Path, data: dict[str, object]) -> None:
    directory.mkdir(exist_ok=True)
    (directory / "run.json").write_bytes(msgspec.json.encode(data))


def test_a_header_planning_beyond_the_bounds_is_refused_naming_the_field(tmp_path: Path) -> None:
    good = msgspec.to_builtins(header())
    cases = [
        (lambda h: h["tests"][0].update(runs=10**9), "$.tests[0].runs", "10000"),
        (lambda h: h["tests"][1].update(run_numbers=[1, 5]), "$.tests[1].run_numbers", "from 1 to its runs"),
        (lambda h: h["tests"][0].update(run_numbers=[2, 2]), "$.tests[0].run_numbers", "distinct"),
        (lambda h: h["tests"][2].update(adaptive={"min_runs": 9, "max_runs": 3}), "$.tests[2].adaptive", "9"),
        (lambda h: h.update(shard={"index": 1, "count": 10**9}), "$.shard.count", "10000"),
        (lambda h: h.update(shard={"index": 3, "count": 2}), "$.shard.index", "3"),
    ]
    for change, field, bound in cases:
        data = json.loads(json.dumps(good))
        change(data)
        write_header(tmp_path, data)
        with pytest.raises(AtpError) as raised:
            RunStore.open(tmp_path).results()
        says(str(raised.value), tmp_path / "run.json", field, bound)


def test_a_header_too_large_is_refused_before_it_is_decoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_header(tmp_path, msgspec.to_builtins(header()))
    assert RunStore.open(tmp_path).read_header().run_id == "r1"
    monkeypatch.setattr(readback, "MAX_HEADER_BYTES", 100)
    with pytest.raises(AtpError) as raised:
        RunStore.open(tmp_path).read_header()
    says(str(raised.value), tmp_path / "run.json", "more than 100 bytes")
    (tmp_path / "run.json").rename(tmp_path / "real.json")
    (tmp_path / "run.json").symlink_to(tmp_path / "real.json")
    with pytest.raises(AtpError) as raised:
        RunStore.open(tmp_path)
    says(str(raised.value), "symbolic link")


# --- results.jsonl: each run once, ATP's own ------------------------------------------------


def test_the_writing_store_counts_only_the_lines_it_wrote(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, header())
    forged = msgspec.structs.replace(result("a", 1, "passed", 100.0), error=None)
    with open(store.directory / RESULTS_FILE, "ab") as handle:  # an agent writes first
        handle.write(line(forged) + line(result("b", 1, "passed")))
    store.append(result("a", 1, "failed", 10.0))
    store.append(result("c", 1, "passed"))
    results = store.results()
    assert [(t.id, [r.outcome for r in t.runs]) for t in results.tests[:3]] == [
        ("a", ["failed"]),
        ("b", []),
        ("c", ["passed"]),
    ]
    assert len(results.problems) == 2
    says(results.problems[0], "results.jsonl:1", "run 1 of test 'a'", "not written by this atp test")
    says(results.problems[1], "results.jsonl:2", "run 1 of test 'b'", "not written by this atp test")
    # a line of its own taken away is named too
    (store.directory / RESULTS_FILE).write_bytes(b"")
    results = store.results()
    assert results.summary.runs == 0
    says(" ".join(results.problems), "run 1 of test 'a'", "no longer in")
    store.close()


def test_read_back_a_run_stored_twice_counts_not_at_all_and_runs_outside_the_plan_are_named(
    tmp_path: Path,
) -> None:
    store = RunStore.create(tmp_path, header())
    store.close()
    (store.directory / RESULTS_FILE).write_bytes(
        line(result("a", 1, "passed", 100.0))  # the forged line, written first
        + line(result("a", 2, "passed"))
        + line(result("a", 1, "failed", 10.0))  # ATP's
        + line(result("a", 3, "passed"))  # test a plans 2 runs
        + line(result("b", 1, "passed"))
    )
    reader = RunStore.open(store.directory)
    results = reader.results()
    assert [r.run_number for r in results.tests[0].runs] == [2]
    assert [r.outcome for r in results.tests[1].runs] == ["passed"]
    says(results.problems[0], "results.jsonl:4", "run 3 of test 'a'", "did not plan")
    says(results.problems[1], "run 1 of test 'a'", "stored 2 times", "lines 1, 3", "none is counted")
    assert len(results.problems) == 2


def test_reading_results_is_bounded_per_line_and_in_problems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RunStore.create(tmp_path, header())
    store.close()
    good = line(result("b", 1, "passed"))
    (store.directory / RESULTS_FILE).write_bytes(b"x" * 5000 + b"\n" + good + b"{}\n" * 500)
    monkeypatch.setattr(readback, "MAX_RESULT_LINE_BYTES", 1000)
    results = RunStore.open(store.directory).results()
    assert [t.id for t in results.tests if t.runs] == ["b"]
    says(results.problems[0], "results.jsonl:1", "more than 1000 bytes")
    assert len(results.problems) == readback.MAX_PROBLEMS + 1
    says(results.problems[-1], "more problems", str(readback.MAX_PROBLEMS))


def test_resume_takes_away_every_line_of_a_run_stored_twice(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, header())
    store.close()
    (store.directory / RESULTS_FILE).write_bytes(
        line(result("a", 1, "passed", 100.0))
        + line(result("a", 2, "passed"))
        + line(result("a", 1, "failed"))
        + line(result("zz", 1, "passed"))
    )
    reopened = RunStore.reopen(store.directory)
    assert [r.run_number for r in reopened.read_results()] == [2]
    problems = " | ".join(reopened.problems)
    says(problems, "results.jsonl:4", "'zz'", "did not plan", "taken away")
    says(problems, "run 1 of test 'a'", "stored 2 times", "made again")
    assert (store.directory / RESULTS_FILE).read_bytes() == line(result("a", 2, "passed"))
    reopened.append(result("a", 1, "passed"))
    reopened.problems = []
    assert sorted(r.run_number for r in reopened.read_results()) == [1, 2] and reopened.problems == []
    reopened.close()


def test_results_read_back_are_masked_again(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, header())
    store.close()
    forged = msgspec.structs.replace(result("a", 1, "failed"), error=f"it said {SECRET}")
    stray = result(f"{SECRET}-{'x' * 10_000}", 1, "passed")  # an id the plan does not hold: the agent's
    (store.directory / RESULTS_FILE).write_bytes(line(forged) + line(stray))
    results = RunStore.open(store.directory, Masker([SECRET])).results()
    assert results.tests[0].runs[0].error == "it said ***"
    (problem,) = results.problems
    says(problem, "'***-xxx", "did not plan")
    assert SECRET not in problem and len(problem) < 500


# --- logs and events: no link, masked, bounded -----------------------------------------------


def test_logs_and_events_are_read_without_links_and_masked(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, header(), Masker([SECRET]))
    store.close()
    directory = store.directory
    (directory / "logs").mkdir()
    (directory / "events").mkdir()
    run = msgspec.structs.replace(
        result("a", 1, "passed"), log_file="logs/a.1.log", events_file="events/a.1.jsonl"
    )
    (directory / "logs" / "a.1.log").write_text(f"written later: {SECRET}\n")
    escaped = "".join(f"\\u{ord(c):04x}" for c in SECRET)  # JSON escapes spell it
    (directory / "events" / "a.1.jsonl").write_text(EVENT % escaped + "\n")
    reader = RunStore.open(directory, Masker([SECRET]))
    assert reader.log(run) == "written later: ***\n"
    assert SECRET not in b"".join(reader.event_lines(run)).decode()
    assert [e.payload.message for e in reader.events(run)] == ["***"]  # type: ignore[union-attr]
    (tmp_path / "key").write_text(SECRET)
    os.replace(directory / "logs", directory / "real-logs")
    (directory / "logs").symlink_to(tmp_path)  # the folder itself a link: logs/key would be read
    linked = msgspec.structs.replace(run, log_file="logs/key", events_file="events/../../key")
    assert reader.log(linked) == "" and reader.event_lines(linked) == [] and list(reader.events(linked)) == []
    says(reader.problems[0], "its folder logs is a symbolic link")
    says(reader.problems[1], "not a path inside the run directory")


def test_a_long_log_keeps_its_end_and_shows_no_part_of_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.log").write_text("x" * 100 + SECRET + "\n" + "the end\n")
    monkeypatch.setattr(readback, "MAX_LOG_BYTES", 20)  # the cut falls inside the secret
    problems: list[str] = []
    text = readback.log_text(tmp_path, "logs/a.log", Masker([SECRET]), problems)
    assert text.endswith("\nthe end\n") and "1234" not in text and problems == []
    says(text, "start of the log is left out")


def test_an_events_file_beyond_the_bound_keeps_its_whole_first_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "events").mkdir()
    one = (EVENT % "hi").encode() + b"\n"
    (tmp_path / "events" / "a.jsonl").write_bytes(one * 10)
    monkeypatch.setattr(readback, "MAX_EVENTS_BYTES", len(one) * 3 + 5)
    problems: list[str] = []
    assert readback.event_lines(tmp_path, "events/a.jsonl", None, problems) == [one.strip()] * 3
    says(problems[0], "events/a.jsonl", "only those before are read")


# --- the process ledger: only what proves ATP started it ------------------------------------


def test_the_owner_line_records_the_boot_and_the_ledger_is_never_written_through_a_link(
    tmp_path: Path,
) -> None:
    recorder = ProcessLedger.create(tmp_path)
    recorder.started(1234, "aa" * 8, start=42)
    owner = json.loads((tmp_path / LEDGER_FILE).read_text().splitlines()[0])
    assert owner["boot"] == boot_id() and owner["boot"]
    recorder.close()
    target = tmp_path / "elsewhere.txt"
    target.write_text("")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / LEDGER_FILE).symlink_to(target)
    linked = ProcessLedger.create(tmp_path / "run")
    linked.started(1234, "bb" * 8, start=42)
    linked.close()
    assert target.read_text() == ""


def test_a_recorded_line_kills_only_a_process_that_carries_its_token(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    owner, owner_start = dead_owner()
    token = new_token()
    mine = sleeper(sleepers, token)
    stranger = sleeper(sleepers)  # pid and start time right, no token: not ATP's
    unmarked = sleeper(sleepers)
    other = sleeper(sleepers, new_token())  # another process's token than the recorded one
    write_ledger(
        tmp_path / "run",
        [
            owner_line(owner, owner_start),
            {"pid": stranger.pid, "start": start_time(stranger.pid), "token": new_token()},
            {"pid": unmarked.pid, "start": start_time(unmarked.pid)},  # no token at all
            {"pid": other.pid, "start": start_time(other.pid), "token": new_token()},
            {"pid": mine.pid, "start": start_time(mine.pid), "token": token},
        ],
    )
    assert stop_abandoned(tmp_path) == [
        f"stopped 1 agent process left running by ATP process {owner} (run run)"
    ]
    assert gone(mine)
    assert stranger.poll() is None and unmarked.poll() is None and other.poll() is None


def test_a_ledger_of_another_boot_a_link_or_a_running_atps_tokens_are_left_alone(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    owner, owner_start = dead_owner()
    token, live_token = new_token(), new_token()
    agent = sleeper(sleepers, token)
    live_agent = sleeper(sleepers, live_token)
    old = write_ledger(
        tmp_path / "old",
        [
            {"owner": owner, "start": owner_start, "boot": "another-boot"},
            {"pid": agent.pid, "start": start_time(agent.pid), "token": token},
        ],
    )
    write_ledger(  # a running ATP (this process) records the live agent ...
        tmp_path / "live",
        [
            owner_line(os.getpid(), start_time("self")),
            {"pid": live_agent.pid, "start": start_time(live_agent.pid), "token": live_token},
        ],
    )
    write_ledger(  # ... and a forged ledger names it too
        tmp_path / "forged",
        [
            owner_line(owner, owner_start),
            {"pid": live_agent.pid, "start": start_time(live_agent.pid), "token": live_token},
        ],
    )
    outside = write_ledger(
        tmp_path.parent / f"{tmp_path.name}-outside",
        [owner_line(owner, owner_start), {"pid": agent.pid, "start": start_time(agent.pid), "token": token}],
    )
    (tmp_path / "linked").symlink_to(outside.parent)
    assert stop_abandoned(tmp_path) == []
    assert agent.poll() is None and live_agent.poll() is None
    assert not old.exists() and outside.exists() and not (tmp_path / "forged" / LEDGER_FILE).exists()


def test_a_ledger_that_is_a_fifo_or_has_endless_lines_does_not_stall_atp(tmp_path: Path) -> None:
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / LEDGER_FILE)
    long_line = tmp_path / "long" / LEDGER_FILE
    long_line.parent.mkdir()
    long_line.write_bytes(b"x" * (1 << 20))
    done: list[list[str]] = []
    thread = threading.Thread(target=lambda: done.append(stop_abandoned(tmp_path)), daemon=True)
    thread.start()
    thread.join(10)
    assert done == [[]]
