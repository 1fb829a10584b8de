"""The executor seam: where runs execute.

By default ATP makes every run in its own process, on its event loop (the fast path: no
executor object at all). An executor plugin (registered through ``atp_register_executors``)
makes them elsewhere, on the workers of a cluster say, while everything else stays here: the
schedule, the rate limit and the budget, the run directory (each result appended the moment it
comes back), Ctrl-C, the reports. ``atp test --executor=NAME`` chooses one; its settings come
from the config's ``executors.<name>`` and ``--address``.

A worker is sent a :class:`Job` once (what to load to make runs of this ``atp test``: the config
and suite files, which must be at the same paths on the worker, the agent's name and the
runner's settings) and then, per run, a test id and a run number. It makes the run with
:class:`atp.core.worker.WorkerSession`, the same runner code ATP uses here (time limits,
retries of infrastructure faults, evaluation and scoring all happen on the worker), and sends
back a :class:`Shipped`: the result, the events and the log as bytes (masked there already).

A worker that dies or cannot be reached mid-run is a fault of the infrastructure: the executor
raises a retryable :class:`~atp.core.errors.AdapterError`, and ATP tries the run again (on
another worker, the executor's choice) as ``retries`` allows, recording each retry.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import msgspec

from atp.core.options import RunOptions
from atp.core.results import PlannedTest


class NoExecutorSettings(msgspec.Struct, forbid_unknown_fields=True):
    """For executors that take no settings."""


class Job(msgspec.Struct, frozen=True, kw_only=True):
    """What a worker loads to make runs of one ``atp test`` (the files at the same paths as here)."""

    key: str = ""
    """Names this job on the workers (the run id and a nonce): one session per job per worker."""
    run_id: str = ""
    """The run directory's run id on ATP's side."""
    suite_path: str
    config_path: str | None = None
    agent: str
    """The name of the agent under test, as the suite or config defines it."""
    runs: int | str | None = None
    """``--runs`` (an int or ``"auto"``), when given."""
    evaluator_overrides: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    """Settings the command line set over ``evaluators.<name>`` (``--no-judge-cache``)."""
    tests: dict[str, str] = msgspec.field(default_factory=dict)
    """The selected tests' fingerprints, by id: a worker whose suite file has another test of
    that id refuses to make its runs."""
    plan: list[PlannedTest] = msgspec.field(default_factory=list)
    """The tests as ATP planned them (runs, adaptive plans, skips; a resumed run's own): what
    the requests a worker sends say of them."""
    options: RunOptions | None = None
    """The run's options as ATP resolved them (limits, retries, ``--fail-fast``...): a worker
    makes its runs with the same ones (its own folder for their files)."""


class Shipped(msgspec.Struct, kw_only=True):
    """One run made on a worker, sent back: its result (a RunResult in JSON), its events and
    agent log (the bytes of the files the worker wrote), and where it ran."""

    result: bytes
    events: bytes | None = None
    log: bytes | None = None
    where: str = ""
    fault: str | None = None
    """The fault of the infrastructure the run met (its agent could not be reached, say): ATP
    tries the run again as ``retries`` allows."""
    retry_after: float | None = None
    """With a ``fault``: seconds the far side asked ATP to wait before trying again."""


class Executor(ABC):
    """Makes runs somewhere other than ATP's own event loop.

    ATP makes one executor per ``atp test`` suite, calls :meth:`start` once, :meth:`execute`
    for each run (up to :attr:`capacity` at once, else ``--parallel``), and :meth:`aclose` at
    the end, also after Ctrl-C (when :meth:`execute` calls in flight were cancelled first: the
    executor stops their runs on the workers). :meth:`abort` is a second Ctrl-C: stop everything
    at once.
    """

    name: ClassVar[str]
    """What ``--executor`` names it by."""
    summary: ClassVar[str] = ""
    """One line for ``atp plugins``."""
    replaces: ClassVar[str | None] = None
    """The name of a plugin whose registration of the same executor name this class replaces
    on purpose. Without it, two plugins registering one name is an error naming both."""
    Settings: ClassVar[builtins.type[msgspec.Struct]] = NoExecutorSettings
    """The settings it accepts (the config's ``executors.<name>``, with ``--address``)."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self.job: Job | None = None
        """The job of this ``atp test`` (given to :meth:`start`)."""

    @property
    def capacity(self) -> int | None:
        """How many runs may be in flight at once (the workers' threads, say), when the
        executor knows better than ``--parallel``; ``None``: ``--parallel`` decides."""
        return None

    async def start(self, job: Job) -> None:
        """Connect, and make sure the workers can take ``job`` (they have the files and
        plugins); keep it as :attr:`job`. Raises an AtpError saying what is missing."""
        self.job = job

    @abstractmethod
    async def execute(self, test_id: str, run_number: int, task_id: str) -> Shipped:
        """Make one run on a worker (its first attempt sends the agent ``task_id``) and return
        what it sent back. A worker lost mid-run: a retryable AdapterError."""

    def abort(self) -> None:  # noqa: B027 - optional hook
        """Stop every run at once (a second Ctrl-C); synchronous and quick."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Stop the runs still in flight on the workers, let the workers release the job (stop
        their agents), and disconnect."""
