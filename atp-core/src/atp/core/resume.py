"""Going on with a run that did not finish (``atp test --resume``).

A run directory keeps every finished run the moment it finishes, so a run killed half-way
(SIGKILL, a lost CI machine, Ctrl-C, a spent budget) can be resumed: the runs its directory
holds are done, only the others are made, appended to the same directory, and the results read
back are those of one run that was never interrupted. The directory is read as untrusted input
(:mod:`atp.core.readback`): its plan within the bounds ``atp test`` accepts, and a result line
that is damaged, outside the plan or one of two for the same run is taken away, its run made
again. A suite changed since (a test's
fingerprint, the suite or the agent) is refused unless forced: results of two different suites
would be mixed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from atp.core.errors import ConfigError
from atp.core.results import RunHeader, RunResult, RunStore, stored_runs
from atp.core.suite import Suite, Test, suite_fingerprint, test_fingerprint

if TYPE_CHECKING:
    from atp.core.secrets import Masker


def is_unfinished(header: RunHeader) -> bool:
    """A run that did not make every run it planned: killed (no end recorded), interrupted, or
    stopped (``--fail-fast``, a full disk, a spent budget)."""
    return header.finished_at is None or header.interrupted or header.stopped_by is not None


def latest_unfinished(root: Path, suite: str, agent: str) -> Path:
    """The run directory below ``root`` of ``suite`` against ``agent`` that started last among
    those that did not finish (not a merged run, not one still going); a ConfigError when there
    is none."""
    for path, header in stored_runs(root):
        ours = header.suite == suite and header.agent == agent and not header.merged_from
        if ours and is_unfinished(header) and not RunStore.in_use(path):
            return path
    raise ConfigError(
        f"--resume: no unfinished run of suite {suite!r} against agent {agent!r} in {root}; "
        f"name the run directory (--resume=DIR) or run without --resume"
    )


def check_resumable(
    header: RunHeader, suite: str, agent: str, tests: Mapping[str, Test], *, force: bool
) -> None:
    """Refuse (a ConfigError naming what changed) to go on with a run that finished, a merged
    run, a run of another suite or agent, or one whose tests changed since (unless ``force``;
    a test the suite no longer has is refused even then)."""
    if header.merged_from:
        raise ConfigError(
            f"cannot resume {header.run_id}: it was merged from shards; resume the shard that did "
            f"not finish (atp test --resume=SHARD_DIR), then merge again"
        )
    if not is_unfinished(header):
        raise ConfigError(f"cannot resume {header.run_id}: it finished; there is nothing to resume")
    changes: list[str] = []
    if header.suite != suite:
        changes.append(f"it is a run of suite {header.suite!r}, not {suite!r}")
    if header.agent != agent:
        changes.append(f"it ran agent {header.agent!r}, not {agent!r}")
    missing = [p.id for p in header.tests if p.id not in tests]
    if missing:
        changes.append(f"the suite no longer has test(s) {', '.join(map(repr, missing[:5]))}")
    changed = [
        p.id
        for p in header.tests
        if p.id in tests and p.fingerprint is not None and p.fingerprint != test_fingerprint(tests[p.id])
    ]
    if changed:
        more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        changes.append(
            f"test(s) {', '.join(map(repr, changed[:5]))}{more} changed since (another fingerprint)"
        )
    if not changes:
        return
    if force and header.suite == suite and header.agent == agent and not missing:
        return
    hint = (
        " (--force goes on anyway, with the tests as they are now)"
        if header.suite == suite and header.agent == agent and not missing
        else ""
    )
    raise ConfigError(f"cannot resume {header.run_id}: {'; '.join(changes)}{hint}")


def done_runs(results: list[RunResult], header: RunHeader) -> dict[str, list[RunResult]]:
    """The runs a directory holds, by test, in stored order: each planned run number once (read
    back, a run stored twice is not counted at all: :func:`atp.core.readback.read_results`)."""
    planned = {p.id: p for p in header.tests}
    done: dict[str, list[RunResult]] = {}
    seen: set[tuple[str, int]] = set()
    for run in results:
        key = (run.test_id, run.run_number)
        if run.test_id not in planned or key in seen:
            continue
        seen.add(key)
        done.setdefault(run.test_id, []).append(run)
    return done


class Reopened:
    """A run directory reopened to go on with: its store (locked), its header, the suite's
    tests it runs (in its order), the runs it holds by test."""

    __slots__ = ("done", "header", "store", "tests")

    def __init__(
        self, store: RunStore, header: RunHeader, tests: list[Test], done: dict[str, list[RunResult]]
    ) -> None:
        self.store = store
        self.header = header
        self.tests = tests
        self.done = done


def reopen(
    directory: Path,
    suite: Suite,
    agent: str,
    masker: Masker | None,
    *,
    force: bool,
    quarantine: frozenset[str],
) -> Reopened:
    """Go on with the run in ``directory``: its own plan, the runs it holds counted as done. The
    directory is locked before it is read (another ``atp test`` may be finishing it) and
    repaired only once the resume is accepted. Today's ``quarantine`` holds (a policy, not part
    of the plan); with ``force``, the tests as they are now are what the runs left make."""
    store = RunStore.open(directory, masker)
    store.lock()
    try:
        header = store.read_header()
        tests = {t.id: t for t in suite.tests}
        check_resumable(header, suite.name, agent, tests, force=force)
        store.repair(header)
    except BaseException:
        store.close()
        raise
    if force:
        for planned in header.tests:
            if planned.id in tests:
                planned.fingerprint = test_fingerprint(tests[planned.id])
        selection = header.shard.order if header.shard is not None else [p.id for p in header.tests]
        header.suite_fingerprint = suite_fingerprint(tests[i] for i in selection if i in tests)
    for planned in header.tests:
        planned.quarantined = planned.id in quarantine
    done = done_runs(store.read_results(header), header)
    return Reopened(store, header, [tests[p.id] for p in header.tests if p.id in tests], done)
