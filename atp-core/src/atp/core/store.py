"""The run directory: its files' names, and :class:`RunStore`, which writes it while a run
goes and reads it back for ``atp report``, ``atp test --resume`` and ``atp merge``.

A run directory (``.atp/runs/<run-id>/``) holds:

- ``run.json``: the :class:`~atp.core.records.RunHeader` (suite, agent, the planned tests),
  rewritten when the run ends;
- ``results.jsonl``: one :class:`~atp.core.records.RunResult` per line, appended the moment a
  run finishes;
- ``events/<test>.<run>.jsonl`` and ``logs/<test>.<run>.log``: each run's events and agent log.

Every finished run is on disk before anything else looks at it, so an interrupted or crashed
``atp test`` loses no finished result. What is read back is untrusted: a damaged line is left
out and named in :attr:`RunStore.problems`.
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
from typing import Any

import msgspec

from atp.core import files
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
_line_decoder = msgspec.json.Decoder(dict[str, Any])
_lines_decoder = msgspec.json.Decoder(list[dict[str, Any]])


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
            header = _header_decoder.decode(files.read_bytes(path / HEADER_FILE))
        except (OSError, msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
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
        self._masker = masker if masker else None
        self._results_fd: int | None = None
        self._lock_fd: int | None = None
        self.problems: list[str] = []
        """What reading found damaged (filled by :meth:`read_results` and :meth:`event_lines`)."""

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

    def repair(self) -> None:
        """Take away the damaged result lines (one cut short when ATP was killed mid-write, one
        changed by hand), each named in :attr:`problems`: their runs are made again. A last
        line that lacks its newline gets it, so that the next result starts a line."""
        path = self.directory / RESULTS_FILE
        try:
            data = files.read_bytes(path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise _storage_error("read", path, exc) from None
        store = self
        kept: list[bytes] = []
        for number, line in enumerate(data.splitlines(keepends=True), 1):
            if not line.strip():
                continue
            try:
                _result_decoder.decode(line)
            except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
                how = "was cut short" if not line.endswith(b"\n") else "is not a run result"
                store.problems.append(f"{path}:{number} {how}; it is taken away and its run made again")
                continue
            kept.append(line if line.endswith(b"\n") else line + b"\n")
        if store.problems or (data and not data.endswith(b"\n")):
            try:
                files.write_atomic(path, b"".join(kept))
            except OSError as exc:
                raise _storage_error("repair", path, exc) from None

    def lock(self) -> None:
        """Hold the directory's lock while this process writes it; an AtpError when another
        ``atp test`` holds it (the run is still going)."""
        import fcntl

        path = self.directory / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            raise _storage_error("lock", path, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise AtpError(
                f"{self.directory} is being written by another atp test that is still running; "
                f"resume it once that one has ended (or stop it)"
            ) from None
        self._lock_fd = fd

    @staticmethod
    def in_use(directory: Path) -> bool:
        """Whether another process holds the directory's lock (its run is still going)."""
        import fcntl

        try:
            fd = os.open(directory / LOCK_FILE, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)
        return False

    @classmethod
    def open(cls, directory: Path, masker: Masker | None = None) -> "RunStore":
        header = directory / HEADER_FILE
        try:
            mode = header.stat().st_mode
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
                heads[path] = _started_decoder.decode(files.read_bytes(path / HEADER_FILE))
            except (OSError, msgspec.MsgspecError):
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
        data = self._encode(header, _header_decoder) + b"\n"
        try:
            files.write_atomic(target, data)
        except OSError as exc:
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
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def events_file(self, test_id: str, run_number: int) -> str:
        return events_path(test_id, run_number)

    def log_file(self, test_id: str, run_number: int) -> str:
        return log_path(test_id, run_number)

    def workspace(self, test_id: str, run_number: int) -> Path:
        return self.directory / workspace_path(test_id, run_number)

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
        runs = self.read_results()
        header = self.read_header()
        if baseline is None:
            baseline = self.baseline()
        return build_suite_results(header, runs, self.problems, baseline)

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
