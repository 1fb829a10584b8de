"""Where a LangGraph graph runs for the ``langgraph`` adapter (:mod:`atp.adapters.langgraph`):
each run's graph streamed on an event loop of its own, in a worker thread of its own, with a
thread pool of its own for its plain ``def`` nodes and tools; what the graph raises is the
run's, and what cannot be stopped at a time limit is abandoned."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from typing import Any

import anyio

from atp.adapters.langgraph_events import GraphRun

WORKER_THREADS = 64
"""Threads of a run's own thread pool (see :class:`WorkerPool`): its plain ``def`` nodes and
tools each take one while they run."""
NOTHING: Any = object()
"""The final state of a graph whose stream gave none."""


class GraphDriver:
    """One run's graph, streamed on an event loop of its own in the worker thread that calls
    :meth:`drive`: what the graph raises (``SystemExit`` and ``KeyboardInterrupt``, which asyncio
    raises out of its loop, too) is :attr:`failure`, never ATP's; its plain ``def`` nodes and
    tools run in a thread pool of its own that does not wait for the threads it abandons."""

    def __init__(self, graph: Any, graph_input: Any, config: dict[str, Any], run: GraphRun) -> None:
        self.graph = graph
        self.graph_input = graph_input
        self.config = config
        self.run = run
        self.final: Any = NOTHING
        """The last state the stream gave."""
        self.failure: BaseException | None = None
        """What ended the graph, if it did not end well."""
        self.done = anyio.Event()
        """Set (on ATP's event loop) once :meth:`drive` has returned."""
        self._atp_loop = asyncio.get_running_loop()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    def drive(self) -> None:
        """(In a worker thread.) Stream the graph to its end, on a new event loop, as
        ``asyncio.run`` would."""
        loop = asyncio.new_event_loop()
        executor = WorkerPool()
        loop.set_default_executor(executor)
        loop.set_exception_handler(self._loop_error)
        asyncio.set_event_loop(loop)
        try:
            with self._lock:
                if self._stopped:
                    return
                task = self._task = loop.create_task(self._stream())
                self._loop = loop
            while not task.done():
                try:
                    loop.run_until_complete(task)
                except BaseException as exc:  # raised out of the loop by a task of the graph's
                    if task.done():
                        break
                    if self.failure is None:
                        self.failure = exc
                    task.cancel()
        finally:
            try:
                _cancel_tasks(loop)
                with contextlib.suppress(BaseException):
                    loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                executor.shutdown(wait=False, cancel_futures=True)
                asyncio.set_event_loop(None)
                loop.close()
                with contextlib.suppress(RuntimeError):  # (ATP's loop is closed: nobody waits)
                    self._atp_loop.call_soon_threadsafe(self.done.set)

    async def _stream(self) -> None:
        run = self.run
        stream = self.graph.astream(self.graph_input, self.config, stream_mode=["tasks", "values"])
        try:
            async for mode, chunk in stream:
                if mode == "values":
                    self.final = chunk
                elif mode == "tasks":
                    run.task(chunk)
                run.check()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # (sys.exit(), GeneratorExit in a node end the run only)
            if self.failure is None:
                self.failure = exc
        finally:
            with contextlib.suppress(Exception):  # (after a GeneratorExit it raises RuntimeError)
                await stream.aclose()

    def stop(self) -> None:
        """(From ATP's event loop.) Cancel the stream; :meth:`drive` returns once it has ended
        (or never, if the graph blocks: its thread is abandoned)."""
        with self._lock:
            self._stopped = True
            loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: drive() has returned
                loop.call_soon_threadsafe(task.cancel)

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The graph's event loop's exception handler: what it reports goes to the run's log
        (while the run lasts)."""
        run = self.run
        if run.closed:
            return
        exc = context.get("exception")
        text = str(context.get("message") or "an error in the graph's event loop")
        if isinstance(exc, BaseException):
            text += f": {type(exc).__name__}: {exc}"
        with contextlib.suppress(BaseException):
            run.on_loop(run.sink.log, text)


def _cancel_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks left on ``loop`` and let them end (as ``asyncio.run`` does)."""
    for _ in range(3):  # (a task may start another as it ends)
        tasks = asyncio.all_tasks(loop)
        if not tasks:
            return
        for task in tasks:
            task.cancel()
        with contextlib.suppress(BaseException):
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


class WorkerPool(concurrent.futures.ThreadPoolExecutor):
    """A run's own thread pool, the default executor of its event loop: LangGraph runs a node
    (and LangChain a tool) that is a plain ``def`` there. A thread abandoned at a time limit
    runs on, so the pool does not wait for its threads when the run's loop ends (the ``atp``
    command exits without waiting for them either)."""

    def __init__(self) -> None:
        super().__init__(max_workers=WORKER_THREADS, thread_name_prefix="atp-langgraph")

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=cancel_futures)
