"""How one suite is run: the options, resolved once, and the parts a run is made with.

:class:`RunOptions` is every setting of a run as plain values, resolved once from the command
line over the suite over the config (:mod:`atp.core.prepare` does it for every command). It is
frozen: nothing changes a run's options once it starts, and an executor ships it to its workers
as it is. :class:`RunParts` holds what a run is made with besides settings: objects (the
masker, the baseline read from its file, an executor) and the seams another caller plugs into
(:class:`Pacing`, which ``atp compare`` uses to interleave several runners).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

import msgspec

from atp.core.limits import RateLimit
from atp.core.results import BaselineRef, Budget, Shard
from atp.core.retry import DEFAULT_BACKOFF_SECONDS
from atp.core.trace import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_EVENTS, DEFAULT_MAX_LOG_BYTES

if TYPE_CHECKING:
    from atp.core.baseline import Baseline
    from atp.core.executor import Executor, Job
    from atp.core.runner import Runner
    from atp.core.schedule import Takes
    from atp.core.secrets import Masker

__all__ = ["Pacing", "RunOptions", "RunParts", "RunSettings"]


class RunOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Every setting of one suite's run, as resolved for it (see :mod:`atp.core.prepare`)."""

    run_root: str = ".atp/runs"
    """Where run directories go."""
    parallel: int = 1
    """How many runs may be in flight at once."""
    parallel_from_workers: bool = False
    """With an executor: as many runs at once as its workers take (``--parallel`` not given)."""
    runs: int | Literal["auto"] | None = None
    """``--runs``: the runs of every test (``auto``: adaptive), or ``None``: each test's own."""
    deselected: int = 0
    """How many tests of the suite the selection left out."""
    fail_fast: bool = False
    max_events: int = DEFAULT_MAX_EVENTS
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    max_log_bytes: int = DEFAULT_MAX_LOG_BYTES
    retries: int = 0
    """How many times a run that met a fault of the infrastructure is tried again."""
    retry_backoff: float = DEFAULT_BACKOFF_SECONDS
    budget: Budget | None = None
    """What this ``atp test`` may spend (its limits; the spending is counted apart)."""
    rate_limit: RateLimit | None = None
    """How fast runs may start against the agent (every worker shares it)."""
    quarantine: frozenset[str] = frozenset()
    """The ids of the tests whose failures do not fail the run."""
    shard: Shard | None = None
    shares: dict[str, list[int] | None] | None = None
    """With ``shard``: the run numbers of each test in this shard (``None``: all of its runs);
    a test not named is another shard's."""
    resume: str | None = None
    """A run directory to go on with: only the runs it does not hold are made."""
    force: bool = False
    """With ``resume``: go on even when the suite changed since."""
    baseline_ref: BaselineRef | None = None
    """How the results are compared with the baseline, when there is one."""
    keep_workspaces: bool = False
    """``--keep-workspaces``: keep the folder of every run of an agent with a folder per run
    (by default a passed run's is removed: :meth:`atp.core.attempt.RunMaker.tidy`)."""


class Pacing:
    """How a runner's runs are paced from outside: ``atp compare`` interleaves several runners
    through one. The default paces nothing; a subclass overrides what it needs."""

    watch_signals = True
    """Whether the runner watches Ctrl-C and SIGTERM itself (``False``: the caller does, and
    calls :meth:`Runner.stop <atp.core.runner.Runner.stop>` and ``abort``)."""

    async def ready(self, runner: Runner) -> None:
        """The runner's agent started (or its executor): return when its runs may begin."""

    def takes(self, runner: Runner, schedule: Takes) -> Takes:
        """What the runner's workers take their runs from (the runner's own schedule, or a
        gate in front of it)."""
        return schedule

    def slot(self, runner: Runner) -> contextlib.AbstractAsyncContextManager[Any]:
        """Held around each local run (a limiter shared by several runners)."""
        return contextlib.nullcontext()


@dataclasses.dataclass
class RunParts:
    """What a run is made with besides its options."""

    masker: Masker | None = None
    """Masks the secrets ATP knows in everything it writes."""
    evaluator_settings: Callable[[str], dict[str, Any]] | None = None
    """An evaluator's settings by its settings name (the config's ``evaluators:``)."""
    secrets: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """The config's ``secrets:``, given to evaluators that need a key."""
    baseline: Baseline | None = None
    """The baseline the results are compared with (it also lets adaptive tests stop early)."""
    executor: Executor | None = None
    """Where the runs are made when not here (:mod:`atp.core.executor`); ``None``: here."""
    job: Job | None = None
    """With ``executor``: what its workers load."""
    pacing: Pacing = dataclasses.field(default_factory=Pacing)


class RunSettings(TypedDict, total=False):
    """The keyword arguments :class:`~atp.core.runner.Runner` takes: the fields of
    :class:`RunOptions` and :class:`RunParts` (``run_root`` may be a path)."""

    run_root: Path | str
    parallel: int
    parallel_from_workers: bool
    runs: int | Literal["auto"] | None
    deselected: int
    fail_fast: bool
    max_events: int
    max_event_bytes: int
    max_log_bytes: int
    retries: int
    retry_backoff: float
    budget: Budget | None
    rate_limit: RateLimit | None
    quarantine: frozenset[str]
    shard: Shard | None
    shares: dict[str, list[int] | None] | None
    resume: Path | str | None
    force: bool
    baseline_ref: BaselineRef | None
    keep_workspaces: bool
    masker: Masker | None
    evaluator_settings: Callable[[str], dict[str, Any]] | None
    secrets: Mapping[str, str] | None
    baseline: Baseline | None
    executor: Executor | None
    job: Job | None
    pacing: Pacing


_PART_NAMES = frozenset(f.name for f in dataclasses.fields(RunParts))


def split_settings(settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Keyword settings as :class:`RunOptions` fields and :class:`RunParts` fields (paths made
    text; ``None`` parts left out)."""
    options: dict[str, Any] = {}
    parts: dict[str, Any] = {}
    for name, value in settings.items():
        if name in _PART_NAMES:
            if value is not None:
                parts[name] = value
        elif name in ("run_root", "resume") and isinstance(value, Path):
            options[name] = str(value)
        elif name == "quarantine":
            options[name] = frozenset(value)
        else:
            options[name] = value
    return options, parts
