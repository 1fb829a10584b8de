"""Results: the Structs of the JSON results format and the run directory that stores them.

A run directory (``.atp/runs/<run-id>/``) holds:

- ``run.json``: the :class:`RunHeader` (suite, agent, the planned tests), rewritten when the run ends;
- ``results.jsonl``: one :class:`RunResult` per line, appended the moment a run finishes;
- ``events/<test>.<run>.jsonl`` and ``logs/<test>.<run>.log``: each run's events and agent log.

Every finished run is on disk before anything else looks at it, so an interrupted or crashed
``atp test`` loses no finished result, and :func:`build_suite_results` makes the same
:class:`SuiteResults` from the directory later as it did live.
"""

import contextlib
import math
import os
import re
import stat
import time
import zlib
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from statistics import fmean
from typing import Any, Literal

import msgspec

from atp.core import files
from atp.core.errors import AtpError, StorageError
from atp.core.protocol import Artifact, Event, Metrics, ResponseStatus
from atp.core.secrets import Masker
from atp.core.trace import TraceSummary, read_events

RESULTS_FORMAT = "atp-results"
RESULTS_FORMAT_VERSION = "1.0"

Outcome = Literal["passed", "failed", "error"]
TestStatus = Literal["passed", "failed", "skipped", "error"]


class Check(msgspec.Struct, omit_defaults=True, kw_only=True):
    """One evaluated check: its name, whether it passed, a 0-1 score, expected versus actual."""

    name: str
    passed: bool
    score: float
    message: str
    details: dict[str, Any] | None = None


class RunResult(msgspec.Struct, kw_only=True):
    """One execution of one test against the agent."""

    __atp_unmasked__ = frozenset({"test_id", "task_id", "events_file", "log_file"})

    test_id: str
    run_number: int
    task_id: str
    outcome: Outcome
    status: ResponseStatus
    score: float
    score_breakdown: dict[str, float] = msgspec.field(default_factory=dict)
    duration_seconds: float
    started_at: datetime
    checks: list[Check] = msgspec.field(default_factory=list)
    metrics: Metrics = msgspec.field(default_factory=Metrics)
    error: str | None = None
    warnings: list[str] = msgspec.field(default_factory=list)
    trace: TraceSummary = msgspec.field(default_factory=TraceSummary)
    events_file: str | None = None
    log_file: str | None = None
    log_tail: list[str] = msgspec.field(default_factory=list)
    artifacts: list[Artifact] = msgspec.field(default_factory=list)
    traceback: str | None = None
    """The traceback of the adapter plugin's exception that made this run an error (an
    evaluator's is in its check's ``details.traceback``)."""
    events: list[dict[str, Any]] | None = None
    """The trace itself, as ATP events; filled in by reporters that include it (the run
    directory keeps it in ``events_file``)."""

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]


class PlannedTest(msgspec.Struct, kw_only=True):
    """A selected test as the run planned it."""

    __atp_unmasked__ = frozenset({"id"})

    id: str
    name: str
    description: str | None = None
    tags: list[str] = msgspec.field(default_factory=list)
    runs: int = 1
    skip: str | None = None


class PluginFailure(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A plugin that raised outside any one run's checks (a lifecycle hook, say)."""

    plugin: str
    where: str
    """What ATP was calling: ``atp_run_finished``, ``reporter json``, ..."""
    message: str
    traceback: str | None = None


STOPPED_BY = ("SIGINT", "SIGTERM", "fail-fast", "storage")


class RunHeader(msgspec.Struct, kw_only=True):
    """What a run directory is about; written when the run starts and again when it ends."""

    __atp_unmasked__ = frozenset({"format", "format_version", "run_id"})

    format: str = RESULTS_FORMAT
    format_version: str = RESULTS_FORMAT_VERSION
    run_id: str
    suite: str
    suite_file: str | None = None
    agent: str
    agent_type: str
    started_at: datetime
    finished_at: datetime | None = None
    interrupted: bool = False
    stopped_by: str | None = None
    """What stopped the run before every planned run ran: ``SIGINT``, ``SIGTERM``,
    ``fail-fast`` or ``storage`` (the run directory could not take more)."""
    deselected: int = 0
    tests: list[PlannedTest] = msgspec.field(default_factory=list)
    plugin_failures: list[PluginFailure] = msgspec.field(default_factory=list)


class TestResult(msgspec.Struct, kw_only=True):
    """A test with all its runs and the status they add up to."""

    __test__ = False  # not a pytest test class

    id: str
    name: str
    description: str | None = None
    tags: list[str] = msgspec.field(default_factory=list)
    status: TestStatus
    score: float
    duration_seconds: float
    runs: list[RunResult] = msgspec.field(default_factory=list)
    planned_runs: int = 1
    skip_reason: str | None = None

    @property
    def failed_checks(self) -> list[Check]:
        return [c for run in self.runs for c in run.failed_checks]


class Summary(msgspec.Struct, kw_only=True):
    total: int
    passed: int
    failed: int
    skipped: int
    errors: int
    deselected: int = 0
    runs: int = 0
    incomplete: int = 0
    """Tests (not skipped by the suite) with fewer runs than planned: interrupted, stopped."""

    @property
    def ok(self) -> bool:
        """Every test that was to run ran all its runs, and none failed."""
        return self.failed == 0 and self.errors == 0 and self.incomplete == 0


class SuiteResults(msgspec.Struct, kw_only=True):
    """The results of one ``atp test``: the JSON results format (version 1.0)."""

    format: str = RESULTS_FORMAT
    format_version: str = RESULTS_FORMAT_VERSION
    run_id: str
    suite: str
    suite_file: str | None = None
    agent: str
    agent_type: str
    started_at: datetime
    finished_at: datetime | None = None
    duration_seconds: float
    interrupted: bool = False
    stopped_by: str | None = None
    summary: Summary
    tests: list[TestResult] = msgspec.field(default_factory=list)
    problems: list[str] = msgspec.field(default_factory=list)
    """What is wrong with the run directory itself (a damaged line, a result for a test the
    run did not plan); a run with problems does not count as passed."""
    plugin_failures: list[PluginFailure] = msgspec.field(default_factory=list)
    """Plugins that raised outside a run's checks; the tests' results stand."""


def status_of_runs(runs: list[RunResult]) -> TestStatus:
    """All runs passed: passed; any run could not be evaluated: error; otherwise failed."""
    if any(r.outcome == "error" for r in runs):
        return "error"
    if all(r.outcome == "passed" for r in runs):
        return "passed"
    return "failed"


_NOT_RUN = {
    "fail-fast": "not run: --fail-fast stopped the suite at the first failure",
    "storage": "not run: the run directory could not take more results",
}


def make_test_result(
    planned: PlannedTest, runs: list[RunResult], interrupted: bool, stopped_by: str | None = None
) -> TestResult:
    """A planned test and its runs, with the status and score they add up to."""
    runs = sorted(runs, key=lambda r: r.run_number)
    if runs:
        status = status_of_runs(runs)
        skip_reason = None
    else:
        status = "skipped"
        skip_reason = planned.skip or _NOT_RUN.get(stopped_by or "") or (
            "not run: the run was interrupted" if interrupted else "not run"
        )
    return TestResult(
        id=planned.id,
        name=planned.name,
        description=planned.description,
        tags=planned.tags,
        status=status,
        score=fmean(r.score for r in runs) if runs else 0.0,
        duration_seconds=sum(r.duration_seconds for r in runs),
        runs=runs,
        planned_runs=planned.runs,
        skip_reason=skip_reason,
    )


def build_suite_results(
    header: RunHeader, runs: list[RunResult], problems: list[str] | None = None
) -> SuiteResults:
    """Group run results under the planned tests and count the summary; ``problems`` are
    what reading the run directory found wrong (results of unplanned tests are added)."""
    interrupted = header.interrupted or header.finished_at is None
    problems = list(problems or ())
    by_test: dict[str, list[RunResult]] = {}
    for run in runs:
        by_test.setdefault(run.test_id, []).append(run)
    tests = [
        make_test_result(planned, by_test.pop(planned.id, []), interrupted, header.stopped_by)
        for planned in header.tests
    ]
    for test_id, stray in by_test.items():
        problems.append(
            f"{len(stray)} result(s) for test {test_id!r}, which this run did not plan: not counted"
        )
    summary = Summary(
        total=len(tests),
        passed=sum(t.status == "passed" for t in tests),
        failed=sum(t.status == "failed" for t in tests),
        skipped=sum(t.status == "skipped" for t in tests),
        errors=sum(t.status == "error" for t in tests),
        deselected=header.deselected,
        runs=len(runs),
        incomplete=sum(
            1 for planned, test in zip(header.tests, tests, strict=True) if planned.skip is None and len(test.runs) < planned.runs
        ),
    )
    finished = header.finished_at
    if finished is None and runs:
        finished = max(r.started_at for r in runs)
    duration = (finished - header.started_at).total_seconds() if finished else 0.0
    return SuiteResults(
        run_id=header.run_id,
        suite=header.suite,
        suite_file=header.suite_file,
        agent=header.agent,
        agent_type=header.agent_type,
        started_at=header.started_at,
        finished_at=header.finished_at,
        duration_seconds=max(duration, 0.0),
        interrupted=interrupted,
        stopped_by=header.stopped_by,
        summary=summary,
        tests=tests,
        problems=problems,
        plugin_failures=header.plugin_failures,
    )


# --- the run directory ---------------------------------------------------------------------

HEADER_FILE = "run.json"
RESULTS_FILE = "results.jsonl"
RUN_FILES = (HEADER_FILE, RESULTS_FILE)
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
MAX_STEM_CHARS = 80
_encoder = msgspec.json.Encoder()
_header_decoder = msgspec.json.Decoder(RunHeader)
_result_decoder = msgspec.json.Decoder(RunResult)
_line_decoder = msgspec.json.Decoder(dict[str, Any])
_lines_decoder = msgspec.json.Decoder(list[dict[str, Any]])


class _Started(msgspec.Struct):
    started_at: datetime
    suite: str = ""


_started_decoder = msgspec.json.Decoder(_Started)


def _unstorable(result: RunResult, exc: BaseException) -> RunResult:
    """What is stored for a run whose result could not be written readably."""
    return RunResult(
        test_id=result.test_id,
        run_number=result.run_number,
        task_id=result.task_id,
        outcome="error",
        status="failed",
        score=0.0,
        duration_seconds=result.duration_seconds if math.isfinite(result.duration_seconds) else 0.0,
        started_at=result.started_at,
        error=f"ATP could not store this run's result readably ({type(exc).__name__}: {exc})",
        events_file=result.events_file,
        log_file=result.log_file,
    )


def new_run_id() -> str:
    """Sortable by start time (UTC), unique across concurrent runs."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + os.urandom(3).hex()


def _file_stem(test_id: str, run_number: int) -> str:
    """A file name for a test's run: the id's safe characters, at most 80 of them, and a
    checksum of the id when anything was replaced or cut (ids may be any text)."""
    safe = _SAFE.sub("_", test_id)[:MAX_STEM_CHARS]
    if safe != test_id:
        safe += f"-{zlib.crc32(test_id.encode('utf-8', 'surrogatepass')):08x}"
    return f"{safe}.{run_number}"


def _storage_error(what: str, path: Path, exc: OSError) -> StorageError:
    return StorageError(f"cannot {what} {path}: {files.reason(exc)}")


class RunStore:
    """One run directory: written by the runner while it runs, read by ``atp report`` later."""

    def __init__(self, directory: Path, masker: Masker | None = None) -> None:
        self.directory = directory
        self._masker = masker if masker else None
        self._results_fd: int | None = None
        self.problems: list[str] = []
        """What reading found damaged (filled by :meth:`read_results` and :meth:`event_lines`)."""

    @classmethod
    def create(cls, root: Path, header: RunHeader, masker: Masker | None = None) -> "RunStore":
        directory = root / header.run_id
        try:
            directory.mkdir(parents=True, exist_ok=False)
        except OSError as exc:
            raise _storage_error("create the run directory", directory, exc) from None
        store = cls(directory, masker)
        store.write_header(header)
        return store

    @classmethod
    def open(cls, directory: Path) -> "RunStore":
        header = directory / HEADER_FILE
        try:
            mode = header.stat().st_mode
        except OSError:
            raise AtpError(f"{directory} is not an ATP run directory (it has no {HEADER_FILE})") from None
        if not stat.S_ISREG(mode):
            raise AtpError(f"cannot read {header}: it is {files.kind(mode)}, not a regular file")
        return cls(directory)

    @staticmethod
    def latest(root: Path, suite: str | None = None) -> Path:
        """The run directory below ``root`` that started last (by the start time it records),
        of the suite named ``suite`` when given."""
        newest: tuple[datetime, str] | None = None
        found: Path | None = None
        candidates = [p for p in root.iterdir() if (p / HEADER_FILE).is_file()] if root.is_dir() else []
        for path in candidates:
            try:
                head = _started_decoder.decode(files.read_bytes(path / HEADER_FILE))
            except (OSError, msgspec.MsgspecError):
                continue
            if suite is not None and head.suite != suite:
                continue
            started = head.started_at
            if started.tzinfo is None:
                started = started.replace(tzinfo=timezone.utc)
            key = (started, path.name)
            if newest is None or key > newest:
                newest, found = key, path
        if found is None:
            of = f" of suite {suite!r}" if suite is not None else ""
            raise AtpError(f"no run directories{of} in {root}; run 'atp test' first or name one")
        return found

    # --- writing ---

    def _encode(self, value: Any, decoder: msgspec.json.Decoder[Any]) -> bytes:
        """``value`` masked and encoded, checked to decode back: ATP never writes a line it
        cannot read."""
        if self._masker is not None:
            value = self._masker.value(value)
        data = _encoder.encode(value)
        decoder.decode(data)
        return data

    def write_header(self, header: RunHeader) -> None:
        target = self.directory / HEADER_FILE
        partial = target.with_suffix(".json.partial")
        data = self._encode(header, _header_decoder) + b"\n"
        try:
            files.write_new(partial, data)
            os.replace(partial, target)
        except OSError as exc:
            with contextlib.suppress(OSError):
                partial.unlink()
            raise _storage_error("write", target, exc) from None

    def append(self, result: RunResult) -> None:
        """Append one finished run: a single write, durable once this returns. A result that
        cannot be written readably becomes an error result saying why."""
        try:
            data = self._encode(result, _result_decoder)
        except (msgspec.MsgspecError, TypeError, ValueError, OverflowError) as exc:
            data = self._encode(_unstorable(result, exc), _result_decoder)
        path = self.directory / RESULTS_FILE
        try:
            if self._results_fd is None:
                self._results_fd = files.open_append(path)
            line = data + b"\n"
            end = os.lseek(self._results_fd, 0, os.SEEK_END)
            done = 0
            try:
                while done < len(line):  # a short write is followed by the write that says why
                    done += os.write(self._results_fd, line[done:])
            finally:
                if done != len(line):  # a full disk mid-line: take the piece back
                    with contextlib.suppress(OSError):
                        os.ftruncate(self._results_fd, end)
        except OSError as exc:
            raise _storage_error("append a result to", path, exc) from None

    def close(self) -> None:
        if self._results_fd is not None:
            os.close(self._results_fd)
            self._results_fd = None

    def events_file(self, test_id: str, run_number: int) -> str:
        return f"events/{_file_stem(test_id, run_number)}.jsonl"

    def log_file(self, test_id: str, run_number: int) -> str:
        return f"logs/{_file_stem(test_id, run_number)}.log"

    def workspace(self, test_id: str, run_number: int) -> Path:
        """The fresh workspace of a run whose test has a ``workspace_fixture`` (kept with the
        results, as the agent left it)."""
        return self.directory / "workspaces" / _file_stem(test_id, run_number)

    # --- reading ---

    def read_header(self) -> RunHeader:
        path = self.directory / HEADER_FILE
        try:
            return _header_decoder.decode(files.read_bytes(path))
        except OSError as exc:
            raise AtpError(f"cannot read {path}: {files.reason(exc)}") from None
        except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError) as exc:
            raise AtpError(f"cannot read {path}: {exc}") from None

    def read_results(self) -> list[RunResult]:
        """Every readable result; a damaged line (cut short when ATP was killed mid-write, or
        changed by hand) is skipped and recorded in :attr:`problems`."""
        path = self.directory / RESULTS_FILE
        results = []
        try:
            with files.open_read(path) as handle:
                for number, line in enumerate(handle, 1):
                    if not line.strip():
                        continue
                    try:
                        results.append(_result_decoder.decode(line))
                    except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError) as exc:
                        how = "is not a run result" if line.endswith(b"\n") else "was cut short"
                        self.problems.append(f"{path}:{number} {how} ({exc}); that run is not counted")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise AtpError(f"cannot read {path}: {files.reason(exc)}") from None
        return results

    def results(self) -> SuiteResults:
        self.problems = []
        runs = self.read_results()
        return build_suite_results(self.read_header(), runs, self.problems)

    def events(self, run: RunResult) -> Iterator[Event]:
        """The events of a run, read back from its events file (damaged lines skipped)."""
        if run.events_file is None:
            return iter(())
        return read_events(self.directory / run.events_file)

    def event_lines(self, run: RunResult) -> list[bytes]:
        """A run's events as the JSON lines stored, each checked to be an event; a damaged
        line is left out and recorded in :attr:`problems`."""
        if run.events_file is None:
            return []
        path = self.directory / run.events_file
        try:
            lines = [line.strip() for line in files.read_bytes(path).splitlines() if line.strip()]
        except OSError as exc:
            self.problems.append(f"cannot read {path}: {files.reason(exc)}")
            return []
        try:
            _lines_decoder.decode(b"[" + b",".join(lines) + b"]")
        except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
            kept = []
            for number, line in enumerate(lines, 1):
                try:
                    _line_decoder.decode(line)
                except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError) as exc:
                    self.problems.append(f"{path}: event {number} is damaged ({exc}); left out")
                else:
                    kept.append(line)
            lines = kept
        return lines

    def log(self, run: RunResult) -> str:
        if run.log_file is None:
            return ""
        path = self.directory / run.log_file
        try:
            return files.read_bytes(path).decode("utf-8", "replace")
        except OSError as exc:
            self.problems.append(f"cannot read {path}: {files.reason(exc)}")
            return ""


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def results_schema() -> dict[str, Any]:
    """The JSON Schema of the JSON results format (docs/results.schema.json)."""
    schema: dict[str, Any] = msgspec.json.schema(SuiteResults)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"ATP results, format {RESULTS_FORMAT_VERSION}"
    return schema


if __name__ == "__main__":  # python -m atp.core.results > docs/results.schema.json
    print(msgspec.json.format(msgspec.json.encode(results_schema()), indent=2).decode())
