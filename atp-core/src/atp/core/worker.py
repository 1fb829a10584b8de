"""A worker's side of an executor (:mod:`atp.core.executor`): one :class:`WorkerSession` per
job per worker process.

The session loads what ``atp test`` loaded (the config and its plugins, the suite, the agent)
from the same paths, checks that the suite's tests are those ATP selected (their fingerprints),
and starts the agent's adapter once, lazily, on an event loop of its own thread. Each run is
made by the runner's own code (:meth:`atp.core.runner.Runner.perform_once`: the time limit,
the response checks, the evaluators, the score), into a folder of its own that is read back and
removed: the result, events and log go back as a :class:`~atp.core.executor.Shipped`, masked
here. A fault of the infrastructure met by the run goes back with it; ATP decides whether to
try again (so that its rate limit and retry count hold for every worker).
"""

from __future__ import annotations

import contextlib
import socket
import tempfile
import threading
from collections.abc import Collection
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import msgspec

from atp.core import files
from atp.core.adapter import Adapter
from atp.core.errors import AdapterError, ConfigError
from atp.core.executor import Job, Shipped
from atp.core.results import RunResult
from atp.core.suite import test_fingerprint
from atp.core.tree import remove_tree

_MARGIN = 64 * 1024
"""Bytes a run's events or log file may hold beyond its limit (the line saying it was cut)."""


class WorkerSession:
    """Runs of one job in this process (one session per job; runs may come from many threads)."""

    def __init__(self, job: Job) -> None:
        from atp.core.config import Config, ConfigSpec, load_config
        from atp.core.options import RunOptions
        from atp.core.prepare import load_plugins, prepare, suite_of
        from atp.core.runner import Runner

        self.job = job
        config = load_config(Path(job.config_path)) if job.config_path else Config(ConfigSpec())
        config.evaluator_overrides = {k: dict(v) for k, v in job.evaluator_overrides.items()}
        plugins = load_plugins(config)
        suite = suite_of(config, plugins, Path(job.suite_path))
        self.tests = {t.id: t for t in suite.tests}
        # The same preparation as atp test's: the selected tests' evaluator settings are checked
        # here, before any run (an unset ${VAR} on this worker fails the job, not each run).
        prepared = prepare(config, plugins, suite, job.agent, ((), [i for i in job.tests if i in self.tests]))
        self._folder = Path(tempfile.mkdtemp(prefix="atp-worker-"))
        options = job.options or RunOptions(runs=job.runs)  # type: ignore[arg-type]  # as --runs gave it
        options = msgspec.structs.replace(options, run_root=str(self._folder), resume=None)
        self.runner = Runner(plugins, suite, list(suite.tests), prepared.agent, options, prepared.parts())
        self.runner.run_id = job.run_id
        if job.plan:
            self.runner.plan.follow([p for p in job.plan if p.id in self.tests])
        self._checked: set[str] = set()
        self.where = socket.gethostname()
        self._adapter: Adapter | None = None
        self._lock = threading.Lock()
        self._start_lock: anyio.Lock | None = None
        self._scopes: dict[anyio.CancelScope, str] = {}
        """The runs in flight, each with its task id."""
        self._closed = False
        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        self._portal.call(self._begin)

    async def _begin(self) -> None:
        self._start_lock = anyio.Lock()
        self.runner.begin()

    def run(self, test_id: str, run_number: int, task_id: str) -> Shipped:
        """Make one run (blocking: call it from a worker's thread)."""
        if self._closed:
            raise AdapterError(f"the ATP session of run {self.job.run_id} on {self.where} was closed")
        test = self.tests.get(test_id)
        if test is None:
            raise ConfigError(f"the suite at {self.job.suite_path} on {self.where} has no test {test_id!r}")
        if test_id not in self._checked:
            if self.job.tests and self.job.tests.get(test_id) != test_fingerprint(test):
                raise ConfigError(
                    f"test {test_id!r} in {self.job.suite_path} on {self.where} is not the one ATP selected "
                    f"(another fingerprint): give the workers the same files"
                )
            self._checked.add(test_id)
        return self._portal.call(self._run, test_id, run_number, task_id)

    async def _adapter_ready(self) -> Adapter:
        assert self._start_lock is not None
        async with self._start_lock:
            if self._adapter is None:
                adapter = self.runner.agent.create_adapter()
                await adapter.open(masker=self.runner.masker)
                self._adapter = adapter
        return self._adapter

    async def _run(self, test_id: str, run_number: int, task_id: str) -> Shipped:
        test = self.tests[test_id]
        folder = Path(tempfile.mkdtemp(prefix="run-", dir=self._folder))
        try:
            with anyio.CancelScope() as scope:
                self._scopes[scope] = task_id
                try:
                    adapter = await self._adapter_ready()
                    result, fault = await self.runner.maker.perform_once(
                        adapter, test, run_number, folder, task_id
                    )
                finally:
                    self._scopes.pop(scope, None)
            if scope.cancelled_caught:
                if self._closed:  # the worker is going away (retired, restarted): another may make it
                    raise AdapterError(f"the worker {self.where} stopped the run as it shut down")
                raise AdapterError(f"the run was stopped on {self.where}", retryable=False)
            return Shipped(
                result=self._encode(result),
                events=_read(folder, result.events_file, self.runner.options.max_event_bytes),
                log=_read(folder, result.log_file, self.runner.options.max_log_bytes, end=True),
                where=self.where,
                fault=self._masked(fault.reason) if fault is not None else None,
                retry_after=fault.retry_after if fault is not None else None,
            )
        finally:
            await anyio.to_thread.run_sync(remove_tree, folder)

    def _masked(self, text: str) -> str:
        masker = self.runner.masker
        return masker.text(text) if masker is not None else text

    def _encode(self, result: RunResult) -> bytes:
        masker = self.runner.masker
        value: Any = masker.value(result) if masker is not None else result
        return msgspec.json.encode(value)

    def cancel(self, task_ids: Collection[str] | None = None) -> None:
        """Stop the runs in flight (their agents are stopped as on a local Ctrl-C): those of
        ``task_ids`` (the task id each run was given), or every one."""
        if not self._closed:
            with contextlib.suppress(RuntimeError):
                self._portal.call(self._cancel, task_ids)

    async def _cancel(self, task_ids: Collection[str] | None = None) -> None:
        for scope, task_id in list(self._scopes.items()):
            if task_ids is None or task_id in task_ids:
                scope.cancel()

    def abort(self) -> None:
        """Stop every agent at once."""
        if self._adapter is not None:
            with contextlib.suppress(Exception):
                self._adapter.abort()

    def close(self) -> None:
        """Stop the runs in flight, stop the agent, release the event loop and the folder."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._portal.call(self._close)
        finally:
            self._portal_cm.__exit__(None, None, None)
            remove_tree(self._folder)

    async def _close(self) -> None:
        await self._cancel()
        with anyio.CancelScope(shield=True):
            if self._adapter is not None:
                with contextlib.suppress(Exception):
                    await self._adapter.aclose()
            await self.runner.end()


def _read(folder: Path, relative: str | None, limit: int, *, end: bool = False) -> bytes | None:
    """A run's events or log file, as its trace bounded it (a line of margin), opened without
    following a link (the agent may have put one in its place); ``None`` when there is none."""
    if relative is None:
        return None
    try:
        return files.read_inside(folder, relative, limit + _MARGIN, end=end)[0]
    except OSError:
        return None
