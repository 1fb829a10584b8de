"""A run directory read back: everything in it is untrusted input.

An agent runs as the same user as ATP and can write into the run directory while it runs, and a
user may get a run directory from elsewhere. So what ``atp report``, ``atp test --resume``,
``atp merge`` and the end of ``atp test`` read back from one (:class:`~atp.core.store.RunStore`
reads through here) is checked as any input from outside is:

- **Bounded.** ``run.json`` is at most :data:`MAX_HEADER_BYTES` and plans at most
  :data:`~atp.core.records.MAX_TESTS` tests of at most
  :data:`~atp.core.records.MAX_RUNS_PER_TEST` runs each (what ``atp test`` itself accepts); a
  header beyond is refused, naming the file and the field. ``results.jsonl`` is read a line at a
  time, each line at most :data:`MAX_RESULT_LINE_BYTES`; a log is read to its last
  :data:`MAX_LOG_BYTES`, an events file to its first :data:`MAX_EVENTS_BYTES`; at most
  :data:`MAX_PROBLEMS` problems are listed.
- **Matched against the plan.** A result of a test the run did not plan, or of a run number
  outside its test's plan, is not counted, and a problem says so.
- **Once per run.** ATP stores each run once. Within the ``atp test`` that writes a directory,
  what it holds in memory wins: only the lines it wrote itself count (it keeps a digest of each,
  :func:`digest`), and every other line is a problem, not counted. Read back later (``atp
  report``, ``--resume``, ``atp merge``), a run stored more than once holds lines ATP did not
  write, and nothing tells which one is ATP's (an agent can write its line before ATP writes
  its own): none of them counts, a problem names the lines, and ``atp test --resume`` takes
  them away and makes the run again.
- **Not through links.** Logs and events files are opened with
  :func:`atp.core.files.open_inside`: a file or a folder replaced by a symbolic link, or a path
  that leaves its folder of the run directory (a result naming ``../../.ssh/id_rsa`` as its
  log), is not read, and a problem says why.
- **Masked again.** Results, logs and events read back are masked with the run's secrets
  (:class:`~atp.core.secrets.Masker`) before anything shows them: a file an agent changed after
  ATP wrote it may hold a secret ATP never wrote.
"""

from __future__ import annotations

import errno
import hashlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import msgspec

from atp.core import files
from atp.core.errors import AtpError
from atp.core.records import MAX_RUNS_PER_TEST, PlannedTest, RunHeader, RunResult
from atp.core.secrets import Masker
from atp.core.text import shorten

__all__ = [
    "MAX_EVENTS_BYTES",
    "MAX_HEADER_BYTES",
    "MAX_ID_CHARS",
    "MAX_LOG_BYTES",
    "MAX_PROBLEMS",
    "MAX_RESULT_LINE_BYTES",
    "digest",
    "event_lines",
    "header_bytes",
    "log_text",
    "note",
    "read_header",
    "read_results",
    "repaired_lines",
]

MiB = 1024 * 1024
MAX_HEADER_BYTES = 64 * MiB
"""The most a ``run.json`` may hold (a header planning the most tests a suite can hold is far
less)."""
MAX_RESULT_LINE_BYTES = 1024 * MiB
"""The most one ``results.jsonl`` line may hold: a run's result with the largest response an
agent may send (``max_output_bytes`` is at most 1 GiB)."""
MAX_LOG_BYTES = 16 * MiB
"""The end of a run's log that is read back (reports show its last 64 KiB)."""
MAX_EVENTS_BYTES = 1024 * MiB
"""The start of a run's events file that is read back (4 times the default
``limits.max_event_bytes``); the rest is left out, with a problem."""
MAX_PROBLEMS = 100
"""The most problems listed for one reading; a last one says that more were found."""
MAX_ID_CHARS = 200
"""The most of a test id a problem quotes when the id is not one the plan holds (the agent's)."""

Key = tuple[str, int]
_header_decoder = msgspec.json.Decoder(RunHeader)
_result_decoder = msgspec.json.Decoder(RunResult)
_line_decoder = msgspec.json.Decoder(dict[str, object])
_lines_decoder = msgspec.json.Decoder(list[dict[str, object]])
_encoder = msgspec.json.Encoder()
_DAMAGED = (msgspec.MsgspecError, UnicodeDecodeError, RecursionError)


def note(problems: list[str], problem: str) -> None:
    """Add ``problem`` to ``problems``, unless :data:`MAX_PROBLEMS` are listed already (then
    one last problem says that more were found)."""
    if len(problems) < MAX_PROBLEMS:
        problems.append(problem)
    elif len(problems) == MAX_PROBLEMS:
        problems.append(f"more problems were found; only the first {MAX_PROBLEMS} are listed")


def digest(line: bytes) -> bytes:
    """What ATP keeps of a result line it wrote (its newline aside), to know it when read back."""
    return hashlib.blake2b(line[:-1] if line.endswith(b"\n") else line, digest_size=16).digest()


# --- run.json ------------------------------------------------------------------------------


def header_bytes(directory: Path, name: str) -> bytes:
    """The bytes of the header ``name`` of ``directory`` (a regular file inside it, at most
    :data:`MAX_HEADER_BYTES`); an :class:`OSError` says why not."""
    data, more = files.read_inside(directory, name, MAX_HEADER_BYTES)
    if more:
        raise OSError(
            errno.EFBIG, f"it holds more than {MAX_HEADER_BYTES} bytes, the most a run's header may", name
        )
    return data


def read_header(directory: Path, name: str) -> RunHeader:
    """The header ``name`` of ``directory``, checked to plan within the bounds; an
    :class:`AtpError` naming the file and the field otherwise."""
    path = directory / name
    try:
        header = _header_decoder.decode(header_bytes(directory, name))
    except OSError as exc:
        raise AtpError(f"cannot read {path}: {files.reason(exc)}") from None
    except _DAMAGED as exc:
        raise AtpError(f"cannot read {path}: {exc}") from None
    problem = _plan_problem(header)
    if problem is not None:
        raise AtpError(f"cannot read {path}: {problem}")
    return header


def _plan_problem(header: RunHeader) -> str | None:
    """What makes a decoded header's plan one no ``atp test`` makes (bounds beyond those its
    fields' types check), with the field's place in the file."""
    for index, test in enumerate(header.tests):
        at = f"$.tests[{index}]"
        numbers = test.run_numbers
        if numbers is not None and (len(set(numbers)) != len(numbers) or max(numbers, default=1) > test.runs):
            return f"its run numbers are not distinct numbers from 1 to its runs ({test.runs}) - at `{at}.run_numbers`"
        plan = test.adaptive
        if plan is not None and not 1 <= plan.min_runs <= plan.max_runs <= MAX_RUNS_PER_TEST:
            return (
                f"its adaptive plan runs from {plan.min_runs} to {plan.max_runs} times, not from 1 to at "
                f"most {MAX_RUNS_PER_TEST} - at `{at}.adaptive`"
            )
    shard = header.shard
    if shard is not None and shard.index > shard.count:
        return f"shard {shard.index} of {shard.count} cannot be - at `$.shard.index`"
    return None


# --- results.jsonl -------------------------------------------------------------------------


class _Plan:
    """Which runs a header plans; what lies outside it is noted once per test."""

    def __init__(self, header: RunHeader) -> None:
        self.tests = {test.id: test for test in header.tests}
        self._numbers: dict[str, frozenset[int]] = {}
        self.strays: dict[str, list[int]] = {}
        """Results of tests the run did not plan, by test (the first :data:`MAX_PROBLEMS`
        tests): how many, then the first run numbers."""
        self.more_strays = 0

    def holds(self, run: RunResult) -> bool | None:
        """Whether the run is planned: ``None`` when its test is not (counted in :attr:`strays`),
        ``False`` when its run number is not."""
        planned = self.tests.get(run.test_id)
        if planned is None:  # its id is the agent's, not the suite's: bounded, masked when shown
            test_id = run.test_id[:MAX_ID_CHARS]
            found = self.strays.get(test_id)
            if found is None and len(self.strays) < MAX_PROBLEMS:
                found = self.strays[test_id] = [0]
            if found is None:
                self.more_strays += 1
                return None
            found[0] += 1
            if len(found) <= 5:
                found.append(run.run_number)
            return None
        if planned.run_numbers is None:
            return 1 <= run.run_number <= planned.runs
        return run.run_number in self._share(planned)

    def _share(self, planned: PlannedTest) -> frozenset[int]:
        numbers = self._numbers.get(planned.id)
        if numbers is None:
            numbers = self._numbers[planned.id] = frozenset(planned.share())
        return numbers

    def note_strays(self, problems: list[str], masker: Masker | None) -> None:
        for test_id, (count, *numbers) in self.strays.items():
            runs = ", ".join(map(str, numbers)) + (", ..." if count > len(numbers) else "")
            named = shorten(repr(test_id), MAX_ID_CHARS, masker)
            note(
                problems,
                f"{count} result(s) for test {named} (run {runs}), which this run did not plan: not counted",
            )
        if self.more_strays:
            note(problems, f"{self.more_strays} result(s) for other tests this run did not plan: not counted")


def _lines(directory: Path, name: str) -> Iterator[tuple[int, bytes | None]]:
    """The numbered lines of ``results.jsonl``, each bounded (``None``: a line too long to
    read); nothing when there is no such file; an :class:`AtpError` when it cannot be read."""
    path = directory / name
    try:
        handle = files.open_inside(directory, name)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise AtpError(f"cannot read {path}: {files.reason(exc)}") from None
    with handle:
        try:
            yield from enumerate(files.lines(handle, MAX_RESULT_LINE_BYTES), 1)
        except OSError as exc:
            raise AtpError(f"cannot read {path}: {files.reason(exc)}") from None


def _decoded(path: Path, number: int, line: bytes | None, problems: list[str]) -> RunResult | None:
    """The run result a line holds; ``None`` (noted when it is not blank) when it holds none."""
    if line is None:
        note(
            problems, f"{path}:{number} holds more than {MAX_RESULT_LINE_BYTES} bytes: not read, not counted"
        )
        return None
    if not line.strip():
        return None
    try:
        return _result_decoder.decode(line)
    except _DAMAGED as exc:
        how = "is not a run result" if line.endswith(b"\n") else "was cut short"
        note(problems, f"{path}:{number} {how} ({exc}); that run is not counted")
        return None


def _of_run(run: RunResult) -> str:
    return f"run {run.run_number} of test {run.test_id!r}"


def read_results(
    directory: Path,
    name: str,
    header: RunHeader,
    problems: list[str],
    *,
    own: dict[Key, bytes] | None = None,
    masker: Masker | None = None,
) -> list[RunResult]:
    """The results ``name`` holds that count, in the order they were stored, masked; what does
    not count is noted in ``problems``. With ``own`` (the digests of the lines this process
    wrote, by run), only those lines count; without, a run stored more than once counts not at
    all (see the module)."""
    path = directory / name
    plan = _Plan(header)
    kept: dict[Key, RunResult] = {}
    copies: dict[Key, list[int]] = {}
    for number, line in _lines(directory, name):
        run = _decoded(path, number, line, problems)
        if run is None:
            continue
        planned = plan.holds(run)
        if not planned:
            if planned is False:
                note(problems, f"{path}:{number} is {_of_run(run)}, which this run did not plan: not counted")
            continue
        key = (run.test_id, run.run_number)
        if own is not None:
            assert line is not None
            if key in kept or own.get(key) != digest(line):
                note(
                    problems,
                    f"{path}:{number} ({_of_run(run)}) was not written by this atp test: not counted",
                )
                continue
        elif key in copies:
            copies[key].append(number)
            continue
        else:
            copies[key] = [number]
        kept[key] = run
    plan.note_strays(problems, masker)
    for key, numbers in copies.items():
        if len(numbers) > 1:
            run = kept.pop(key)
            lines = ", ".join(map(str, numbers[:5])) + (", ..." if len(numbers) > 5 else "")
            note(
                problems,
                f"{_of_run(run)} is stored {len(numbers)} times ({path} lines {lines}): ATP stores each run "
                "once, so all but one of them are not ATP's, and none is counted",
            )
    for key in own or ():
        if key not in kept:
            note(
                problems,
                f"run {key[1]} of test {key[0]!r}, which this atp test stored, is no longer in {path}",
            )
    if masker:
        return [masker.value(run) for run in kept.values()]
    return list(kept.values())


def repaired_lines(
    directory: Path, name: str, header: RunHeader, problems: list[str]
) -> tuple[list[bytes], bool]:
    """The lines of ``name`` a resumed run keeps (each ending with its newline), and whether the
    file must be written again: a damaged line, a result the run did not plan, and every line of
    a run stored more than once are taken away (each noted in ``problems``), so their runs are
    made again."""
    path = directory / name
    plan = _Plan(header)
    kept: list[tuple[Key, bytes]] = []
    counts: dict[Key, int] = {}
    changed = False
    for number, line in _lines(directory, name):
        if line is not None and not line.strip():
            continue
        run = _decoded(path, number, line, [])
        if run is None or not plan.holds(run):
            if line is None:
                how = f"holds more than {MAX_RESULT_LINE_BYTES} bytes"
            elif run is not None:
                how = f"is {_of_run(run)}, which this run did not plan"
            else:
                how = "is not a run result" if line.endswith(b"\n") else "was cut short"
            note(problems, f"{path}:{number} {how}; it is taken away and its run made again")
            changed = True
            continue
        assert line is not None
        if not line.endswith(b"\n"):
            line += b"\n"
            changed = True
        key = (run.test_id, run.run_number)
        counts[key] = counts.get(key, 0) + 1
        kept.append((key, line))
    twice = {key for key, count in counts.items() if count > 1}
    for test_id, run_number in sorted(twice):
        note(
            problems,
            f"run {run_number} of test {test_id!r} is stored {counts[(test_id, run_number)]} times in {path}: "
            "ATP stores each run once, so all but one of them are not ATP's; they are taken away and "
            "the run made again",
        )
    return [line for key, line in kept if key not in twice], changed or bool(twice)


# --- logs and events -----------------------------------------------------------------------


def _in_folder(relative: str, folder: str) -> PurePosixPath:
    """``relative`` when it names a file in ``folder`` of the run directory; else OSError."""
    path = PurePosixPath(relative)
    if len(path.parts) < 2 or path.parts[0] != folder:
        raise OSError(errno.EACCES, f"it is not a file of the run directory's {folder} folder", relative)
    return path


def log_text(directory: Path, relative: str, masker: Masker | None, problems: list[str]) -> str:
    """A run's agent log (its last :data:`MAX_LOG_BYTES`, saying so when there was more),
    masked; ``""`` when it cannot be read (noted in ``problems``)."""
    try:
        data, more = files.read_inside(directory, _in_folder(relative, "logs"), MAX_LOG_BYTES, end=True)
    except OSError as exc:
        note(problems, f"cannot read {directory / relative}: {files.reason(exc)}")
        return ""
    text = data.decode("utf-8", "replace")
    if more:  # from the first whole line on: the piece before may be part of a secret
        newline = text.find("\n")
        text = text[newline + 1 :] if newline >= 0 else text[masker.longest if masker else 0 :]
        text = f"[the start of the log is left out: only its last {MAX_LOG_BYTES} bytes are read]\n{text}"
    return masker.text(text) if masker else text


def event_lines(directory: Path, relative: str, masker: Masker | None, problems: list[str]) -> list[bytes]:
    """A run's events as the JSON lines stored (its first :data:`MAX_EVENTS_BYTES`), each checked
    to be a JSON object and masked; a damaged line is left out, and noted in ``problems`` with
    what cannot be read."""
    path = directory / relative
    try:
        data, more = files.read_inside(directory, _in_folder(relative, "events"), MAX_EVENTS_BYTES)
    except OSError as exc:
        note(problems, f"cannot read {path}: {files.reason(exc)}")
        return []
    if more:
        data = data[: data.rfind(b"\n") + 1]
        note(
            problems, f"{path} holds more than {MAX_EVENTS_BYTES} bytes of events: only those before are read"
        )
    lines = [line.strip() for line in data.splitlines() if line.strip()]
    try:
        _lines_decoder.decode(b"[" + b",".join(lines) + b"]")
    except _DAMAGED:
        kept = []
        for number, line in enumerate(lines, 1):
            try:
                _line_decoder.decode(line)
            except _DAMAGED as exc:
                note(problems, f"{path}: event {number} is damaged ({exc}); left out")
            else:
                kept.append(line)
        lines = kept
    if masker:
        lines = [
            line if masker.clean_json(line) else _encoder.encode(masker.value(_line_decoder.decode(line)))
            for line in lines
        ]
    return lines
