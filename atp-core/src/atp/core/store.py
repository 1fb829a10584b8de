"""The run directory: its files' names, and :class:`RunStore`, which writes it while a run
goes and reads it back for ``atp report``, ``atp test --resume`` and ``atp merge``.

A run directory (``.atp/runs/<run-id>/``) holds:

- ``run.json``: the :class:`~atp.core.records.RunHeader` (suite, agent, the planned tests),
  rewritten when the run ends;
- ``results.jsonl``: one :class:`~atp.core.records.RunResult` per line, appended the moment a
  run finishes;
- ``events/<test>.<run>.jsonl`` and ``logs/<test>.<run>.log``: each run's events and agent log.

Every finished run is on disk before anything else looks at it, so an interrupted or crashed
``atp test`` loses no finished result. What is read back is untrusted (an agent can write into
the directory): it is read as :mod:`atp.core.readback` says (bounded, matched against the plan,
each run once, without following links, masked again), and what is wrong is named in
:attr:`RunStore.problems`.
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
from pathlib import Path, PurePosixPath
from typing import Any

import msgspec

from atp.core import files, locking, readback
from atp.core.aggregate import build_suite_results
from atp.core.baseline import Baseline, encode_baseline, read_baseline
from atp.core.errors import AtpError, StorageError
from atp.core.protocol import Event
from atp.core.records import RunHeader, RunResult, SuiteResults
from atp.core.secrets import Masker
from atp.core.trace import read_events

HEADER_FILE = "run.json"
RESULTS_FILE = "results.jsonl"
LOCK_FILE = "run.lock"
"""Locked by the ``atp test`` writing the directory while it runs (released when it ends or
dies): a second ``atp test --resume`` of a run still going is refused."""
BASELINE_FILE = "baseline.json"
RUN_FILES = (HEADER_FILE, RESULTS_FILE)
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
MAX_STEM_CHARS = 80
_encoder = msgspec.json.Encoder()
_header_decoder = msgspec.json.Decoder(RunHeader)
_result_decoder = msgspec.json.Decoder(RunResult)


class _Started(msgspec.Struct):
    started_at: datetime
    suite: str = ""
    run_id: str = ""
    merged_from: list[str] = msgspec.field(default_factory=list)


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


def stored_runs(root: Path) -> list[tuple[Path, RunHeader]]:
    """The run directories below ``root`` whose ``run.json`` reads, with their headers, the
    one that started last first (a directory's name breaks a tie)."""
    found = []
    for path in root.iterdir() if root.is_dir() else ():
        try:
            if not (path / HEADER_FILE).is_file():
                continue
            header = readback.read_header(path, HEADER_FILE)
        except (OSError, AtpError):
            continue
        found.append((path, header))
    found.sort(key=lambda item: (_utc(item[1].started_at), item[0].name), reverse=True)
    return found


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


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


def events_path(test_id: str, run_number: int) -> str:
    """Where a run's events go, relative to its run directory."""
    return f"events/{_file_stem(test_id, run_number)}.jsonl"


def log_path(test_id: str, run_number: int) -> str:
    """Where a run's agent log goes, relative to its run directory."""
    return f"logs/{_file_stem(test_id, run_number)}.log"


def workspace_path(test_id: str, run_number: int) -> str:
    """Where the fresh workspace of a run whose test has a ``workspace_fixture`` goes (kept
    with the results, as the agent left it), relative to its run directory."""
    return f"workspaces/{_file_stem(test_id, run_number)}"


def _storage_error(what: str, path: Path, exc: OSError) -> StorageError:
    return StorageError(f"cannot {what} {path}: {files.reason(exc)}")


class RunStore:
    """One run directory: written by the runner while it runs, read by ``atp report`` later."""

    def __init__(self, directory: Path, masker: Masker | None = None) -> None:
        self.directory = directory
        self.masker = masker if masker else None
        """The run's secrets: what is written is masked with them, and what is read back again."""
        self._results_fd: int | None = None
        self._lock_fd: int | None = None
        self._own: dict[tuple[str, int], bytes] | None = None
        """The digests of the result lines this process wrote or kept (see
        :func:`atp.core.readback.read_results`); ``None`` when it writes none."""
        self.problems: list[str] = []
        """What reading found wrong (filled by :meth:`read_results`, :meth:`event_lines`, :meth:`log`)."""

    @classmethod
    def create(
        cls, root: Path, header: RunHeader, masker: Masker | None = None, baseline: Baseline | None = None
    ) -> "RunStore":
        directory = root / header.run_id
        try:
            directory.mkdir(parents=True, exist_ok=False)
        except OSError as exc:
            raise _storage_error("create the run directory", directory, exc) from None
        store = cls(directory, masker)
        store._own = {}
        store.lock()
        if baseline is not None:  # kept with the run, so that 'atp report' compares alike
            try:
                files.write_new(directory / BASELINE_FILE, encode_baseline(baseline))
            except OSError as exc:
                raise _storage_error("write", directory / BASELINE_FILE, exc) from None
        store.write_header(header)
        return store

    @classmethod
    def reopen(cls, directory: Path, masker: Masker | None = None) -> "RunStore":
        """A run directory to append more results to, locked for this process and repaired
        (:meth:`repair`)."""
        store = cls.open(directory, masker)
        store.lock()
        store.repair()
        return store

    def repair(self, header: RunHeader | None = None) -> None:
        """Take away the result lines a resumed run cannot count (one cut short when ATP was
        killed mid-write, one changed by hand, a run the plan does not hold, every line of a run
        stored twice), each named in :attr:`problems`: their runs are made again. A last line
        that lacks its newline gets it, so that the next result starts a line. The lines kept
        are this process's from then on (:func:`atp.core.readback.read_results`)."""
        path = self.directory / RESULTS_FILE
        kept, changed = readback.repaired_lines(
            self.directory, RESULTS_FILE, header or self.read_header(), self.problems
        )
        if changed:
            try:
                files.write_atomic(path, b"".join(kept))
            except OSError as exc:
                raise _storage_error("repair", path, exc) from None
        self._own = {}
        for line in kept:
            run = _result_decoder.decode(line)
            self._own[(run.test_id, run.run_number)] = readback.digest(line)

    def lock(self) -> None:
        """Hold the directory's lock while this process writes it; an AtpError when another
        ``atp test`` holds it (the run is still going). Every platform's (:mod:`atp.core.locking`)."""
        path = self.directory / LOCK_FILE
        try:
            fd = locking.acquire(path)
        except locking.Locked:
            raise AtpError(
                f"{self.directory} is being written by another atp test that is still running; "
                f"resume it once that one has ended (or stop it)"
            ) from None
        except OSError as exc:
            raise _storage_error("lock", path, exc) from None
        self._lock_fd = fd

    @staticmethod
    def in_use(directory: Path) -> bool:
        """Whether another process holds the directory's lock (its run is still going)."""
        return locking.held(directory / LOCK_FILE)

    @classmethod
    def open(cls, directory: Path, masker: Masker | None = None) -> "RunStore":
        header = directory / HEADER_FILE
        try:
            mode = header.lstat().st_mode
        except OSError:
            raise AtpError(f"{directory} is not an ATP run directory (it has no {HEADER_FILE})") from None
        if not stat.S_ISREG(mode):
            raise AtpError(f"cannot read {header}: it is {files.kind(mode)}, not a regular file")
        return cls(directory, masker)

    @staticmethod
    def latest(root: Path, suite: str | None = None) -> Path:
        """The run directory below ``root`` that started last (by the start time it records),
        of the suite named ``suite`` when given; shards merged into a run (``atp merge``) are
        left out for it."""
        newest: tuple[datetime, str] | None = None
        found: Path | None = None
        candidates = [p for p in root.iterdir() if (p / HEADER_FILE).is_file()] if root.is_dir() else []
        heads: dict[Path, _Started] = {}
        for path in candidates:
            try:
                heads[path] = _started_decoder.decode(readback.header_bytes(path, HEADER_FILE))
            except (OSError, msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
                continue
        merged = {run_id for head in heads.values() for run_id in head.merged_from}
        for path, head in heads.items():
            if suite is not None and head.suite != suite:
                continue
            if head.run_id in merged:  # a shard: the run it was merged into stands for it
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

    def _encode(self, value: Any, decoder: msgspec.json.Decoder[Any]) -> tuple[bytes, Any]:
        """``value`` masked and encoded, checked to decode back (ATP never writes a line it
        cannot read): the line, and what it decodes to (what a reader of it gets)."""
        if self.masker is not None:
            value = self.masker.value(value)
        data = _encoder.encode(value)
        return data, decoder.decode(data)

    def write_header(self, header: RunHeader) -> None:
        target = self.directory / HEADER_FILE
        data = self._encode(header, _header_decoder)[0] + b"\n"
        if len(data) > readback.MAX_HEADER_BYTES:  # ATP writes no header it would refuse to read
            raise StorageError(f"cannot write {target}: the header would be larger than a run's may be")
        try:
            files.write_atomic(target, data)
        except OSError as exc:
            raise _storage_error("write", target, exc) from None

    def append(self, result: RunResult) -> RunResult:
        """Append one finished run: a single write, durable once this returns. A result that
        cannot be written readably becomes an error result saying why. Returns the result as
        stored (masked; read back from the line written, at no extra cost: the line is decoded
        anyway to check it)."""
        try:
            data, stored = self._encode(result, _result_decoder)
        except (msgspec.MsgspecError, TypeError, ValueError, OverflowError) as exc:
            data, stored = self._encode(_unstorable(result, exc), _result_decoder)
        path = self.directory / RESULTS_FILE
        try:
            if self._results_fd is None:
                self._results_fd = files.open_append(path)
            line = data + b"\n"
            if self._own is not None:  # before the write: a reader may look at once
                self._own[(result.test_id, result.run_number)] = readback.digest(line)
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
        stored_result: RunResult = stored
        return stored_result

    def close(self) -> None:
        if self._results_fd is not None:
            os.close(self._results_fd)
            self._results_fd = None
        if self._lock_fd is not None:
            locking.release(self._lock_fd)
            self._lock_fd = None

    def events_file(self, test_id: str, run_number: int) -> str:
        return events_path(test_id, run_number)

    def log_file(self, test_id: str, run_number: int) -> str:
        return log_path(test_id, run_number)

    def workspace(self, test_id: str, run_number: int) -> Path:
        return self.directory / workspace_path(test_id, run_number)

    # --- reading ---

    def read_header(self) -> RunHeader:
        """The run's header, checked to plan within the bounds (:mod:`atp.core.readback`)."""
        return readback.read_header(self.directory, HEADER_FILE)

    def read_results(self, header: RunHeader | None = None) -> list[RunResult]:
        """The results that count (of ``header``'s plan, by default the directory's), in the
        order they were stored, masked; what does not count (a damaged line, a run the plan does
        not hold, a run stored twice, a line this process did not write when it writes the
        directory) is named in :attr:`problems` (:func:`atp.core.readback.read_results`)."""
        if header is None:
            header = self.read_header()
        return readback.read_results(
            self.directory, RESULTS_FILE, header, self.problems, own=self._own, masker=self.masker
        )

    def baseline(self) -> Baseline | None:
        """The baseline the run was compared with (``baseline.json``), if any."""
        path = self.directory / BASELINE_FILE
        if not path.exists():
            return None
        try:
            return read_baseline(path)
        except AtpError as exc:
            self.problems.append(f"{exc}; the run is not compared with it")
            return None

    def results(self, baseline: Baseline | None = None) -> SuiteResults:
        """The results the directory holds, compared with ``baseline`` (by default, the one
        the run was made with)."""
        self.problems = []
        header = self.read_header()
        runs = self.read_results(header)
        if baseline is None:
            baseline = self.baseline()
        return build_suite_results(header, runs, self.problems, baseline)

    def events(self, run: RunResult) -> Iterator[Event]:
        """The events of a run, read back from its events file (damaged lines skipped), masked;
        none when the file is not a regular file in the ``events`` folder."""
        name = run.events_file
        if name is None or PurePosixPath(name).parts[:1] != ("events",):
            return iter(())
        return read_events(self.directory / name, self.masker, root=self.directory)

    def event_lines(self, run: RunResult) -> list[bytes]:
        """A run's events as the JSON lines stored, each checked to be a JSON object, masked; a
        damaged line, or a file that cannot be read, is named in :attr:`problems`."""
        if run.events_file is None:
            return []
        return readback.event_lines(self.directory, run.events_file, self.masker, self.problems)

    def log(self, run: RunResult) -> str:
        """A run's agent log (its end, when long), masked; ``""`` when it cannot be read (named
        in :attr:`problems`)."""
        if run.log_file is None:
            return ""
        return readback.log_text(self.directory, run.log_file, self.masker, self.problems)
