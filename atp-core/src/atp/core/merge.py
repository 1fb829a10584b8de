"""Merging shards: the run directories of ``atp test --shard=K/N`` made into one run directory.

Each of N shards makes a share of a suite's runs (:mod:`atp.core.shard`) in a run directory of
its own. :func:`merge_runs` combines the N directories into a new one that holds what a single
``atp test`` making every run would have: the header plans every selected test in the suite's
order with all its runs, ``results.jsonl`` holds every shard's results as they were stored, and
``events/``, ``logs/`` and ``workspaces/`` hold every run's files under the same names. Its
report, statistics and baseline comparison are therefore those of the unsharded run.

The shards must be the shares of one run: the same suite, selection (fingerprint and test
order), agent, shard count and durations basis, each index once and none missing, no run made
by two shards, and the same baseline. Anything else is an :class:`AtpError` naming what differs
and where, and no directory is made.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import stat
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import msgspec

from atp.core import files
from atp.core.errors import AtpError, StorageError
from atp.core.results import (
    BASELINE_FILE,
    RESULTS_FILE,
    Budget,
    PlannedTest,
    RunHeader,
    RunResult,
    RunStore,
    Shard,
    new_run_id,
)
from atp.core.tree import MAX_DEPTH, remove_tree

logger = logging.getLogger("atp.merge")

COPIED_FOLDERS = ("events", "logs", "workspaces")
"""The folders of a shard's run directory whose files the merged directory holds too."""

_AGREEING = ("fingerprint", "runs", "adaptive", "pass_rule", "quarantined", "skip")
"""What every shard must plan alike for a test they share."""

_WORDS = (
    "none",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
)


@dataclass
class _Part:
    """One shard's run directory, read."""

    directory: Path
    store: RunStore
    header: RunHeader
    shard: Shard
    results: list[RunResult]
    lines: list[bytes]
    """The stored lines of its results, one for each of :attr:`results`."""


def merge_runs(directories: list[Path], root: Path) -> Path:
    """Combine the run directories of a sharded run's shards into a new run directory below
    ``root`` (named by a new run id) and return it. A directory named twice counts once."""
    parts = _check_shards(_read_headers(directories))
    tests = _merged_tests(parts)
    for part in parts:
        _read_results(part)
    _check_results(parts)
    baseline = _baseline(parts)
    header = _merged_header(parts, tests)
    return _write(root, header, parts, baseline)


# --- reading and checking ------------------------------------------------------------------


def _read_headers(directories: list[Path]) -> list[_Part]:
    if not directories:
        raise AtpError("name the run directories of the shards to merge")
    parts: list[_Part] = []
    seen: set[tuple[int, int]] = set()
    for directory in directories:
        store = RunStore.open(directory)
        try:
            info = os.stat(directory)
        except OSError as exc:
            raise AtpError(f"cannot read {directory}: {files.reason(exc)}") from None
        if (info.st_dev, info.st_ino) in seen:
            continue
        seen.add((info.st_dev, info.st_ino))
        header = store.read_header()
        if header.shard is None:
            raise AtpError(
                f"{directory} is not a shard: it was made without --shard; "
                "merge the run directories of 'atp test --shard=K/N'"
            )
        parts.append(_Part(directory, store, header, header.shard, [], []))
    return parts


def _check_shards(parts: list[_Part]) -> list[_Part]:
    """The shards in index order, once each checked to be the shares of one run."""
    first = parts[0]
    head, shard = first.header, first.shard
    for part in parts[1:]:
        other, theirs = part.header, part.shard
        for what, mine, yours in (("suite", head.suite, other.suite), ("agent", head.agent, other.agent)):
            if mine != yours:
                raise AtpError(
                    f"{part.directory} is a run of {what} {yours!r}, {first.directory} of {what} {mine!r}: "
                    "merge the shards of one run"
                )
        if head.agent_type != other.agent_type:
            raise AtpError(
                f"{part.directory} ran agent {other.agent!r} as type {other.agent_type!r}, {first.directory} "
                f"as type {head.agent_type!r}: merge the shards of one run"
            )
        if head.suite_fingerprint != other.suite_fingerprint:
            raise AtpError(
                f"{part.directory} and {first.directory} ran different selections of suite {head.suite!r} "
                "(their tests or what the tests ask and check differ): merge shards made from the same "
                "suite file and options"
            )
        if shard.count != theirs.count:
            raise AtpError(
                f"{part.directory} is shard {theirs.index} of {theirs.count}, {first.directory} shard "
                f"{shard.index} of {shard.count}: merge shards of one split"
            )
        if shard.basis != theirs.basis:
            raise AtpError(
                f"shards were balanced on different runs ({shard.basis or 'none'} in {first.directory}, "
                f"{theirs.basis or 'none'} in {part.directory}): their shares overlap; run every shard "
                "against the same stored runs"
            )
        if shard.order != theirs.order:
            raise AtpError(
                f"{part.directory} and {first.directory} selected different tests "
                f"({_difference(first, part)}): merge shards of the same selection"
            )
    by_index: dict[int, _Part] = {}
    for part in parts:
        index = part.shard.index
        if not 1 <= index <= shard.count:
            raise AtpError(f"{part.directory} says it is shard {index} of {shard.count}, which cannot be")
        if index in by_index:
            raise AtpError(
                f"{by_index[index].directory} and {part.directory} are both shard {index} of {shard.count}: "
                "merge one run directory of each shard"
            )
        by_index[index] = part
    missing = [index for index in range(1, shard.count + 1) if index not in by_index]
    if missing:
        every = "both" if shard.count == 2 else f"all {_words(shard.count)}"
        if len(missing) == 1:
            raise AtpError(f"shard {missing[0]} of {shard.count} is missing: merge {every}")
        listed = ", ".join(map(str, missing[:-1])) + f" and {missing[-1]}"
        raise AtpError(f"shards {listed} of {shard.count} are missing: merge {every}")
    return [by_index[index] for index in sorted(by_index)]


def _difference(first: _Part, part: _Part) -> str:
    for one, other in ((part, first), (first, part)):
        extra = [test_id for test_id in one.shard.order if test_id not in set(other.shard.order)]
        if extra:
            return f"only {one.directory} has test {extra[0]!r}"
    return "the same tests in another order"


def _words(number: int) -> str:
    return _WORDS[number] if number < len(_WORDS) else str(number)


def _merged_tests(parts: list[_Part]) -> list[PlannedTest]:
    """Every selected test as the shards planned it, in the suite's order, with the run
    numbers of all the shards; each run planned by one shard only."""
    order = parts[0].shard.order
    known = set(order)
    planned: dict[str, list[tuple[_Part, PlannedTest]]] = {}
    for part in parts:
        for test in part.header.tests:
            if test.id not in known:
                raise AtpError(
                    f"{part.directory} plans test {test.id!r}, which is not in the selection its shard "
                    "header lists: the run directory was changed"
                )
            planned.setdefault(test.id, []).append((part, test))
    merged: list[PlannedTest] = []
    for test_id in order:
        plans = planned.get(test_id)
        if not plans:
            raise AtpError(f"test {test_id!r} is in no shard's plan: the shards do not make the whole run")
        first_part, first = plans[0]
        for part, test in plans[1:]:
            for name in _AGREEING:
                if getattr(test, name) != getattr(first, name):
                    raise AtpError(
                        f"shards {first_part.shard.index} and {part.shard.index} plan test {test_id!r} "
                        f"differently (its {name.replace('_', ' ')}): merge the shards of one run"
                    )
        owners: dict[int, _Part] = {}
        for part, test in plans:
            for number in test.share():
                owner = owners.setdefault(number, part)
                if owner is not part and test.skip is None:  # a skipped test makes no runs
                    raise AtpError(
                        f"run {number} of test {test_id!r} is in shards {owner.shard.index} and {part.shard.index} "
                        f"({owner.directory} and {part.directory}): their shares overlap; merge the "
                        "shards of one run"
                    )
        numbers = set(owners)
        every = numbers == set(range(1, first.runs + 1))
        merged.append(
            msgspec.structs.replace(
                first, tags=list(first.tags), run_numbers=None if every else sorted(numbers)
            )
        )
    return merged


def _read_results(part: _Part) -> None:
    """A shard's results and the lines that store them; a damaged line is an error (the
    merged run would count one run fewer than the shards made, and say nothing)."""
    part.results = part.store.read_results()
    if part.store.problems:
        raise AtpError(
            f"the results of shard {part.shard.index} ({part.directory}) are damaged or not its own: "
            f"{'; '.join(part.store.problems)}; "
            f"merge once the shard is made again (atp test --resume={part.directory})"
        )
    path = part.directory / RESULTS_FILE
    try:
        with files.open_inside(part.directory, RESULTS_FILE) as handle:  # no link: as read_results
            data = handle.read()
    except FileNotFoundError:
        data = b""
    except OSError as exc:
        raise AtpError(f"cannot read {path}: {files.reason(exc)}") from None
    part.lines = [line for line in data.split(b"\n") if line.strip()]
    if len(part.lines) != len(part.results):
        raise AtpError(f"{path} changed while it was read; merge again")


def _check_results(parts: list[_Part]) -> None:
    """Each shard holds results of its own share only."""
    for part in parts:
        shares = {test.id: set(test.share()) for test in part.header.tests}
        for run in part.results:
            if run.run_number not in shares.get(run.test_id, ()):
                raise AtpError(
                    f"{part.directory} holds run {run.run_number} of test {run.test_id!r}, which is not "
                    f"in the share of shard {part.shard.index}: the run directory was changed"
                )


def _baseline(parts: list[_Part]) -> bytes | None:
    """The baseline the shards were compared with (``baseline.json``), the same in each."""
    found: list[tuple[_Part, bytes | None]] = []
    for part in parts:
        path = part.directory / BASELINE_FILE
        try:
            found.append((part, files.read_bytes(path)))
        except FileNotFoundError:
            found.append((part, None))
        except OSError as exc:
            raise AtpError(f"cannot read {path}: {files.reason(exc)}") from None
    first, data = found[0]
    for part, theirs in found[1:]:
        if theirs != data:
            if data is None or theirs is None:
                has, lacks = (part, first) if data is None else (first, part)
                raise AtpError(
                    f"{has.directory} was compared with a baseline and {lacks.directory} was not: "
                    "run every shard with the same --baseline"
                )
            raise AtpError(
                f"{part.directory} and {first.directory} were compared with different baselines "
                f"({BASELINE_FILE} differs): run every shard with the same --baseline"
            )
    return data


# --- the merged run directory ----------------------------------------------------------------


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _merged_header(parts: list[_Part], tests: list[PlannedTest]) -> RunHeader:
    headers = [part.header for part in parts]
    first = headers[0]
    finished = [h.finished_at for h in headers]
    budgets = [h.budget for h in headers if h.budget is not None]
    budget = None
    if budgets:
        exceeded = [b.exceeded for b in budgets if b.exceeded]
        costs = [b.max_cost_usd for b in budgets]
        tokens = [b.max_tokens for b in budgets]
        budget = Budget(  # each shard had its own limits: the whole had them all
            max_cost_usd=sum(c for c in costs if c is not None) if None not in costs else None,
            max_tokens=sum(t for t in tokens if t is not None) if None not in tokens else None,
            spent_cost_usd=sum(b.spent_cost_usd for b in budgets),
            spent_tokens=sum(b.spent_tokens for b in budgets),
            exceeded="; ".join(exceeded) if exceeded else None,
        )
    return RunHeader(
        run_id=new_run_id(),
        suite=first.suite,
        suite_file=first.suite_file,
        agent=first.agent,
        agent_type=first.agent_type,
        started_at=min((h.started_at for h in headers), key=_utc),
        finished_at=None if None in finished else max((f for f in finished if f is not None), key=_utc),
        interrupted=any(h.interrupted for h in headers),
        stopped_by=next((h.stopped_by for h in headers if h.stopped_by is not None), None),
        deselected=first.deselected,
        tests=tests,
        plugin_failures=[failure for h in headers for failure in h.plugin_failures],
        suite_fingerprint=first.suite_fingerprint,
        baseline=first.baseline,
        shard=None,
        budget=budget,
        resumed_at=sorted((moment for h in headers for moment in h.resumed_at), key=_utc),
        merged_from=[h.run_id for h in headers],
    )


def _write(root: Path, header: RunHeader, parts: list[_Part], baseline: bytes | None) -> Path:
    """The new run directory: results, the shards' files, the baseline, and the header last
    (a directory without one is no run directory, so a merge cut short is never reported)."""
    directory = root / header.run_id
    try:
        root.mkdir(parents=True, exist_ok=True)
        directory.mkdir()
    except OSError as exc:
        raise StorageError(f"cannot create the run directory {directory}: {files.reason(exc)}") from None
    try:
        try:
            lines = [line + b"\n" for part in parts for line in part.lines]
            files.write_new(directory / RESULTS_FILE, b"".join(lines))
            if baseline is not None:
                files.write_new(directory / BASELINE_FILE, baseline)
        except OSError as exc:
            raise StorageError(f"cannot write {directory}: {files.reason(exc)}") from None
        owners: dict[str, _Part] = {}
        for part in parts:
            for folder in COPIED_FOLDERS:
                _copy_folder(part, folder, directory, owners)
        RunStore(directory).write_header(header)
    except BaseException:
        remove_tree(directory)
        raise
    return directory


def _copy_folder(part: _Part, folder: str, directory: Path, owners: dict[str, _Part]) -> None:
    """A shard's ``folder`` into the merged directory, without recursion: files hard-linked
    when the file system allows, copied otherwise; a symbolic link is copied as the link (never
    followed), and anything that is neither a file, a folder nor a link (a FIFO an agent left)
    is left out, and so are folders more than :data:`~atp.core.tree.MAX_DEPTH` levels below
    ``folder`` (an agent's workspace nested thousands deep), with a warning."""
    source = part.directory / folder
    try:
        mode = os.lstat(source).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise AtpError(f"cannot read {source}: {files.reason(exc)}") from None
    if not stat.S_ISDIR(mode):  # a link in its place leads out of the run directory
        return
    pending = [(folder, 0)]
    too_deep = 0
    while pending:
        relative, depth = pending.pop()
        if depth > MAX_DEPTH:
            too_deep += 1
            continue
        target = directory / relative
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(target)
            made = stat.S_ISDIR(os.lstat(target).st_mode)
            entries = sorted(os.scandir(part.directory / relative), key=lambda e: e.name)
        except OSError as exc:
            raise StorageError(f"cannot copy {part.directory / relative}: {files.reason(exc)}") from None
        if not made:  # another shard's link of that name: never written through
            raise _overlap(relative, owners.get(relative), part)
        for entry in entries:
            name = f"{relative}/{entry.name}"
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append((name, depth + 1))
                    continue
                if not (entry.is_symlink() or entry.is_file(follow_symlinks=False)):
                    continue
                if name in owners:
                    raise _overlap(name, owners[name], part)
                owners[name] = part
                _copy_file(Path(entry.path), directory / name, symlink=entry.is_symlink())
            except OSError as exc:
                raise StorageError(f"cannot copy {entry.path}: {files.reason(exc)}") from None
    if too_deep:
        logger.warning(
            "%s: %d folder(s) more than %d levels deep were left out of the merged run",
            part.directory / folder,
            too_deep,
            MAX_DEPTH,
        )


def _overlap(name: str, owner: _Part | None, part: _Part) -> AtpError:
    if owner is None:
        where = f"shard {part.shard.index} ({part.directory}) and another shard"
    else:
        where = f"shards {owner.shard.index} and {part.shard.index} ({owner.directory} and {part.directory})"
    return AtpError(f"{name} is in {where}: their shares overlap; merge the shards of one run")


def _copy_file(source: Path, target: Path, symlink: bool) -> None:
    if symlink:
        os.symlink(os.readlink(source), target)
        return
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError as exc:
        if exc.errno == errno.EEXIST:
            raise
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        shutil.copy2(source, target, follow_symlinks=False)
