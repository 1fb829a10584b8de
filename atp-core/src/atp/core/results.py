"""Results: the Structs of the JSON results format and the run directory that stores them.

A run directory (``.atp/runs/<run-id>/``) holds:

- ``run.json``: the :class:`RunHeader` (suite, agent, the planned tests), rewritten when the run ends;
- ``results.jsonl``: one :class:`RunResult` per line, appended the moment a run finishes;
- ``events/<test>.<run>.jsonl`` and ``logs/<test>.<run>.log``: each run's events and agent log.

Every finished run is on disk before anything else looks at it, so an interrupted or crashed
``atp test`` loses no finished result, and :func:`build_suite_results` makes the same
:class:`SuiteResults` from the directory later as it did live.
"""

import os
import re
import time
import zlib
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from statistics import fmean
from typing import Any, Literal

import msgspec

from atp.core.errors import AtpError
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
    events: list[dict[str, Any]] | None = None
    """The trace itself, as ATP events; filled in by reporters that include it (the run
    directory keeps it in ``events_file``)."""

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]


class PlannedTest(msgspec.Struct, kw_only=True):
    """A selected test as the run planned it."""

    id: str
    name: str
    description: str | None = None
    tags: list[str] = msgspec.field(default_factory=list)
    runs: int = 1
    skip: str | None = None


class RunHeader(msgspec.Struct, kw_only=True):
    """What a run directory is about; written when the run starts and again when it ends."""

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
    deselected: int = 0
    tests: list[PlannedTest] = msgspec.field(default_factory=list)


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

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.errors == 0


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
    summary: Summary
    tests: list[TestResult] = msgspec.field(default_factory=list)


def status_of_runs(runs: list[RunResult]) -> TestStatus:
    """All runs passed: passed; any run could not be evaluated: error; otherwise failed."""
    if any(r.outcome == "error" for r in runs):
        return "error"
    if all(r.outcome == "passed" for r in runs):
        return "passed"
    return "failed"


def make_test_result(planned: PlannedTest, runs: list[RunResult], interrupted: bool) -> TestResult:
    """A planned test and its runs, with the status and score they add up to."""
    runs = sorted(runs, key=lambda r: r.run_number)
    if runs:
        status = status_of_runs(runs)
        skip_reason = None
    else:
        status = "skipped"
        skip_reason = planned.skip or (
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


def build_suite_results(header: RunHeader, runs: list[RunResult]) -> SuiteResults:
    """Group run results under the planned tests and count the summary."""
    interrupted = header.interrupted or header.finished_at is None
    by_test: dict[str, list[RunResult]] = {}
    for run in runs:
        by_test.setdefault(run.test_id, []).append(run)
    tests = [
        make_test_result(planned, by_test.pop(planned.id, []), interrupted)
        for planned in header.tests
    ]
    summary = Summary(
        total=len(tests),
        passed=sum(t.status == "passed" for t in tests),
        failed=sum(t.status == "failed" for t in tests),
        skipped=sum(t.status == "skipped" for t in tests),
        errors=sum(t.status == "error" for t in tests),
        deselected=header.deselected,
        runs=len(runs),
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
        summary=summary,
        tests=tests,
    )


# --- the run directory ---------------------------------------------------------------------

HEADER_FILE = "run.json"
RESULTS_FILE = "results.jsonl"
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_encoder = msgspec.json.Encoder()
_header_decoder = msgspec.json.Decoder(RunHeader)
_result_decoder = msgspec.json.Decoder(RunResult)


def new_run_id() -> str:
    """Sortable by start time, unique across concurrent runs."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(3).hex()


def _file_stem(test_id: str, run_number: int) -> str:
    safe = _SAFE.sub("_", test_id)
    if safe != test_id:
        safe += f"-{zlib.crc32(test_id.encode()):08x}"
    return f"{safe}.{run_number}"


class RunStore:
    """One run directory: written by the runner while it runs, read by ``atp report`` later."""

    def __init__(self, directory: Path, masker: Masker | None = None) -> None:
        self.directory = directory
        self._masker = masker if masker else None
        self._results_fd: int | None = None

    @classmethod
    def create(cls, root: Path, header: RunHeader, masker: Masker | None = None) -> "RunStore":
        directory = root / header.run_id
        directory.mkdir(parents=True, exist_ok=False)
        store = cls(directory, masker)
        store.write_header(header)
        return store

    @classmethod
    def open(cls, directory: Path) -> "RunStore":
        if not (directory / HEADER_FILE).is_file():
            raise AtpError(f"{directory} is not an ATP run directory (it has no {HEADER_FILE})")
        return cls(directory)

    @staticmethod
    def latest(root: Path) -> Path:
        """The newest run directory below ``root``."""
        runs = sorted(p for p in root.glob("*") if (p / HEADER_FILE).is_file()) if root.is_dir() else []
        if not runs:
            raise AtpError(f"no run directories in {root}; run 'atp test' first or name one")
        return runs[-1]

    # --- writing ---

    def _encode(self, value: msgspec.Struct) -> bytes:
        data = _encoder.encode(value)
        return self._masker.bytes(data) if self._masker is not None else data

    def write_header(self, header: RunHeader) -> None:
        target = self.directory / HEADER_FILE
        partial = target.with_suffix(".json.partial")
        partial.write_bytes(self._encode(header) + b"\n")
        os.replace(partial, target)

    def append(self, result: RunResult) -> None:
        """Append one finished run: a single write, durable once this returns."""
        if self._results_fd is None:
            self._results_fd = os.open(
                self.directory / RESULTS_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644
            )
        os.write(self._results_fd, self._encode(result) + b"\n")

    def close(self) -> None:
        if self._results_fd is not None:
            os.close(self._results_fd)
            self._results_fd = None

    def events_file(self, test_id: str, run_number: int) -> str:
        return f"events/{_file_stem(test_id, run_number)}.jsonl"

    def log_file(self, test_id: str, run_number: int) -> str:
        return f"logs/{_file_stem(test_id, run_number)}.log"

    # --- reading ---

    def read_header(self) -> RunHeader:
        path = self.directory / HEADER_FILE
        try:
            return _header_decoder.decode(path.read_bytes())
        except (OSError, msgspec.MsgspecError) as exc:
            raise AtpError(f"cannot read {path}: {exc}") from None

    def read_results(self) -> list[RunResult]:
        path = self.directory / RESULTS_FILE
        if not path.exists():
            return []
        results = []
        with path.open("rb") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    results.append(_result_decoder.decode(line))
                except msgspec.MsgspecError as exc:
                    if line.endswith(b"\n"):
                        raise AtpError(f"{path}:{number}: not a run result: {exc}") from None
                    # a last line cut short by a crash mid-write: the run did not finish
        return results

    def results(self) -> SuiteResults:
        return build_suite_results(self.read_header(), self.read_results())

    def events(self, run: RunResult) -> Iterator[Event]:
        """The events of a run, read back from its events file."""
        if run.events_file is None:
            return iter(())
        return read_events(self.directory / run.events_file)

    def log(self, run: RunResult) -> str:
        if run.log_file is None:
            return ""
        return (self.directory / run.log_file).read_text("utf-8", "replace")


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
