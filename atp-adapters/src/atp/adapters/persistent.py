"""Persistent stdio agents (``persistent: true`` on a ``cli`` agent): one process serves many runs.

The stdin/stdout transport starts one agent process per request. An agent that is expensive to
start (an interpreter, an agent framework) may opt in to serving requests one after another:

- ATP writes each request as one JSON line on the agent's stdin and keeps stdin open;
- the agent writes the events of that request as JSON lines on stderr, then the response as
  one JSON line on stdout, and flushes both; then it reads the next request line;
- when stdin ends, the agent exits.

A loop over stdin lines does all of this, and the same agent works without the flag (stdin
then ends after the first request). ATP keeps a pool of such processes: one is started when a
run needs one and none is idle, so at most as many run as ``--parallel`` allows. A process
whose run went wrong (it exited, hung past the run's time limit, broke the protocol, answered
another task_id) fails that run as a one-shot agent would and is stopped with everything it
started; the next run gets a fresh process. ``max_runs_per_process`` recycles a process after
that many runs. At the end of the suite ATP closes the stdin of every idle process, waits up to
``grace_seconds`` for it to exit, then stops it (and what it started) as any agent is stopped.

Events are attributed to a run by their ``task_id``: the run's own are kept; others (written
after an earlier response, say) are dropped with a warning. stdout lines that are not JSON
objects are kept as the agent's log, with a warning; a JSON line is the response (or the
agent's failure when it is not one).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio

from atp.adapters.process import (
    PIPE_SIZE,
    READ_SIZE,
    AgentProcess,
    Exchange,
    Failed,
    exit_words,
    lacks_resources,
    outcome,
    processes,
    trouble,
)
from atp.adapters.stdio import DECODE_ERRORS, StderrLines
from atp.core.errors import AdapterError, AgentError, AtpError, ProtocolError
from atp.core.protocol import ATPRequest, ATPResponse, Event, decode_response, encode
from atp.core.secrets import Masker
from atp.core.text import shown
from atp.core.trace import EventSink

if TYPE_CHECKING:
    from atp.adapters.cli import CliAdapter

logger = logging.getLogger("atp.adapters.persistent")


class Quiet:
    """A sink that drops everything: the sink of a process between runs (nothing reads its
    pipes then, what it writes meanwhile goes to the next run, so nothing comes here but the
    rest of a line cut short), and of a term-sdk agent started for a health check, which has
    no run to log to (its :attr:`masker` the adapter's, for the messages that quote the agent)."""

    def __init__(self, masker: Masker | None = None) -> None:
        self.masker = masker

    def event(self, event: Event, raw: bytes | None = None) -> None:
        pass

    def events(self, events: Sequence[Event], raw: bytes | None = None) -> None:
        pass

    def log(self, line: str) -> None:
        pass

    def warn(self, message: str) -> None:
        pass


QUIET = Quiet()


class Worker:
    """One pooled agent process, with what it wrote that no run has taken yet."""

    __slots__ = ("err", "number", "process", "runs", "stdout")

    def __init__(self, process: AgentProcess, number: int, max_line: int) -> None:
        self.process = process
        self.number = number
        """Which process of the pool this is (1, 2, ...), for messages."""
        self.runs = 0
        """The runs it has served (or is serving)."""
        self.stdout = bytearray()
        """stdout read and not yet taken (what came after the last response)."""
        self.err = StderrLines(QUIET, max_line)

    @property
    def alive(self) -> bool:
        return self.process.popen.poll() is None


class ProcessPool:
    """The processes of one persistent agent, started as runs need them."""

    def __init__(self, adapter: CliAdapter) -> None:
        self.adapter = adapter
        self.settings = adapter.settings
        self.idle: list[Worker] = []
        self.busy: set[Worker] = set()
        self.started = 0
        self.closed = False

    async def execute(self, request: ATPRequest, sink: EventSink) -> ATPResponse:
        data = encode(request) + b"\n"
        for attempt in (1, 2):
            worker = await self._take(sink)
            turn = _Turn(worker, request.task_id, sink, self.settings.max_output_bytes)
            done = False
            try:
                response = await turn.run(data)
                done = True
                return response
            except AgentError:
                if attempt == 1 and turn.ended_unasked():
                    # It had ended its service after its previous response (a one-shot agent):
                    # it never saw this request. A fresh process gets it.
                    sink.warn(
                        f"agent process {worker.number} exited with code 0 after {_runs(worker.runs - 1)} "
                        "without a word about this request; ATP sent it to a new process (an agent "
                        "that serves one request per process does not need 'persistent: true')"
                    )
                    continue
                raise
            finally:
                await self._release(worker, sink, done=done)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _release(self, worker: Worker, sink: EventSink, *, done: bool) -> None:
        """After a run: back to the idle processes, or stopped (its run went wrong, it served
        its ``max_runs_per_process``, or ATP is stopping)."""
        self.busy.discard(worker)
        limit = self.settings.max_runs_per_process
        if done and not self.closed and (limit is None or worker.runs < limit):
            worker.err.sink = QUIET
            self.idle.append(worker)
        else:
            await self._retire(worker, sink, gently=done)

    async def _take(self, sink: EventSink) -> Worker:
        """An idle process that still runs, or a new one."""
        while self.idle:
            worker = self.idle.pop()
            if worker.alive:
                break
            code = worker.process.popen.returncode
            await self._retire(worker, sink, gently=False)
            sink.warn(
                f"agent process {worker.number} {_ended(code)} while it waited for its next request "
                f"(after {_runs(worker.runs)}); ATP started another"
            )
        else:
            worker = self._start()
        worker.runs += 1
        worker.err.sink = sink
        self.busy.add(worker)
        return worker

    def _start(self) -> Worker:
        adapter = self.adapter
        if self.closed:
            raise AdapterError(
                f"agent {adapter.name!r}: ATP is stopping; no agent is started", retryable=False
            )
        try:
            process = AgentProcess.start(
                adapter.argv,
                cwd=adapter.cwd,
                env=adapter.encoded_env,
                owner=adapter,
                ledger=adapter.processes,
            )
        except OSError as exc:
            raise AdapterError(
                f"agent {adapter.name!r}: cannot start {adapter.command_line!r} in {adapter.cwd}: "
                f"{exc.strerror or exc}",
                retryable=lacks_resources(exc),
            ) from None
        process.widen_stderr(PIPE_SIZE)
        self.started += 1
        return Worker(process, self.started, self.settings.max_line_bytes)

    async def _retire(self, worker: Worker, sink: EventSink | None, *, gently: bool) -> None:
        """Stop ``worker``'s process and everything it started. ``gently``: it did nothing
        wrong (recycled, or the suite ended): its stdin is closed first and it may exit by
        itself within the grace period."""
        process = worker.process
        grace = self.settings.grace_seconds
        with anyio.CancelScope(shield=True):
            if gently and not process.stdin_closed:
                process.close_stdin()
                with anyio.move_on_after(grace):
                    await process.wait()
            stopped = await process.stop(grace)
        count = stopped.stopped + stopped.running
        if count or stopped.unfinished:
            message = (
                f"agent process {worker.number} left {processes(count) if count else 'processes'} "
                f"running; {outcome(stopped, count)}{trouble(stopped)}"
            )
            if sink is not None:
                sink.warn(message)
            else:
                logger.warning("agent %r: %s", self.adapter.name, message)

    async def close(self) -> None:
        """The suite is over: every idle process is told so (its stdin ends) and stopped."""
        self.closed = True
        idle, self.idle = self.idle, []
        if not idle:
            return
        async with anyio.create_task_group() as tg:
            for worker in idle:
                tg.start_soon(self._close_one, worker)

    async def _close_one(self, worker: Worker) -> None:
        await self._retire(worker, None, gently=True)


class _Turn(Exchange):
    """One request and its response on a pooled process (its stdin stays open)."""

    def __init__(self, worker: Worker, task_id: str, sink: EventSink, max_output: int) -> None:
        super().__init__(worker.process)
        self.worker = worker
        self.task_id = task_id
        self.sink = sink
        self.max_output = max_output
        self.response: ATPResponse | None = None
        self.noise = 0
        self.late = 0
        """stdout lines written after the previous response, kept as the agent's log."""
        self.stdout_ended = False
        self.exited = False
        self.read = 0
        """stdout bytes read for this request."""
        self.err_read = 0
        """stderr bytes read for this request."""

    async def run(self, request: bytes) -> ATPResponse:
        process, worker, watch = self.process, self.worker, self.watch
        try:
            if worker.stdout:  # written after the previous response
                self._lines(after_response=True)
            watch.readable(process.stderr, self._on_stderr)
            watch.readable(process.stdout, self._on_stdout)
            watch.exit(process, self._on_exit)
            self.send(memoryview(request))
            await self.until(lambda: self.response is not None or self.stdout_ended or self.exited)
            if self.response is None:
                # The agent is gone (or closed its stdout): what it wrote last says why.
                await self.until(lambda: self.exited, 1.0)
                self._drain_stderr()
            else:
                self._drain_stderr()  # the events it wrote before its response
        except Failed:
            pass
        finally:
            watch.close()
        if self.late:
            self.sink.warn(
                f"{self.late} stdout lines written after the previous run's response were kept as the "
                "agent's log"
            )
        if self.noise:
            self.sink.warn(f"{self.noise} stdout lines that are not JSON were kept as the agent's log")
        if self.failure is not None:
            raise self.failure
        if self.response is None:
            raise self._gone()
        return self.response

    def ended_unasked(self) -> bool:
        """Whether a process that had served a run before exited with code 0 without writing
        a byte in this one: it had ended after its previous response."""
        return (
            self.worker.runs > 1
            and self.response is None
            and not self.read
            and not self.err_read
            and not self.late
            and self.process.popen.poll() == 0
        )

    def _gone(self) -> AgentError:
        """The agent ended (or closed its stdout) before it answered."""
        code = self.process.popen.poll()
        how = "closed its stdout" if code is None else _ended(code)
        after = f" after {_runs(self.worker.runs - 1)}" if self.worker.runs > 1 else ""
        message = f"agent {how}{after} without writing a response on stdout"
        tail = self.worker.err.log_tail()
        if tail is not None:
            return AgentError(f"{message}; its stderr ends with", evidence=tail)
        return AgentError(message)

    # --- the callbacks ------------------------------------------------------------------------

    def _on_exit(self) -> None:
        self.exited = True
        self.wake()

    def _on_stderr(self) -> None:
        self._read_stderr()

    def _read_stderr(self) -> bool:
        """Take what stderr holds now; ``False`` when there is nothing more for now."""
        fd = self.process.stderr
        try:
            chunk = os.read(fd, READ_SIZE)
            if chunk:
                self.err_read += len(chunk)
                self.worker.err.feed(chunk)
                return True
            self.worker.err.finish()
        except BlockingIOError:
            return False
        except Exception as exc:
            self._failed_reading("stderr", exc)
            return False
        self.watch.unread(fd)
        return False

    def _drain_stderr(self) -> None:
        """What the agent wrote on stderr before its response is in the pipe: take it all."""
        if self.watch.reading(self.process.stderr):
            while self.failure is None and self._read_stderr():
                pass

    def _failed_reading(self, stream: str, exc: Exception) -> None:
        if isinstance(exc, AgentError | AtpError):
            self.fail(exc)
        elif isinstance(exc, ProtocolError):
            self.fail(AgentError(f"the agent broke the protocol on {stream}: {exc}"))
        else:
            err = self.worker.err
            self.fail(
                AgentError(
                    f"what the agent wrote on {stream} could not be read ({type(exc).__name__}: {exc}"
                    + (f"; stderr line {err.line}, byte offset {err.offset})" if stream == "stderr" else ")")
                )
            )

    def _on_stdout(self) -> None:
        fd = self.process.stdout
        try:
            chunk = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError as exc:
            self._failed_reading("stdout", exc)
            return
        if not chunk:
            self.stdout_ended = True
            self.watch.unread(fd)
            self.wake()
            return
        self.read += len(chunk)
        if self.read > self.max_output:
            self.fail(AgentError(f"agent flooded stdout: more than {self.max_output} bytes"))
            return
        self.worker.stdout += chunk
        if b"\n" in chunk:
            try:
                self._lines(after_response=False)
            except Exception as exc:
                self._failed_reading("stdout", exc)

    def _lines(self, *, after_response: bool) -> None:
        """The complete stdout lines: the response, or the agent's log. ``after_response``:
        lines written after an earlier response, before this request."""
        out = self.worker.stdout
        start = 0
        while self.response is None and self.failure is None:
            end = out.find(b"\n", start)
            if end < 0:
                break
            line = bytes(out[start:end]).strip()
            start = end + 1
            if not line:
                continue
            if after_response or line[:1] != b"{":
                if after_response:
                    self.late += 1
                else:
                    self.noise += 1
                self.sink.log("[stdout] " + line.decode("utf-8", "replace"))
                continue
            self._response_line(line)
        del out[:start]  # (what follows the response is the next run's to show)

    def _response_line(self, line: bytes) -> None:
        try:
            response = decode_response(line)
        except DECODE_ERRORS as exc:
            problem = exc if isinstance(exc, ProtocolError) else ProtocolError(f"ATP response: {exc}")
            self.fail(
                AgentError(f"the agent's stdout line is not an ATP response ({problem})", evidence=line)
            )
            return
        if response.task_id != self.task_id:
            self.fail(
                AgentError(
                    f"agent answered with task_id {shown(response.task_id, self.sink.masker, limit=100)!r}, but the "
                    f"request's task_id was {self.task_id!r}"
                )
            )
            return
        self.response = response
        self.wake()


def _runs(count: int) -> str:
    return f"{count} run" if count == 1 else f"{count} runs"


def _ended(code: int | None) -> str:
    return exit_words(code) if code is not None else "ended"
