"""A child process whose pipes are read and written without blocking the event loop.

Adapters that speak to an agent through a process (the ``cli`` adapter; anything that runs a
command) start it with :meth:`AgentProcess.start`: in a process group of its own, its stdin,
stdout and stderr non-blocking pipes that are read and written when the event loop says they are
ready. This costs a fraction of the event loop's subprocess transports (no transport and
protocol objects, no watcher thread; the exit is seen through a pidfd on Linux). POSIX only.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio

READ_SIZE = 1024 * 1024
F_SETPIPE_SZ = 1031  # Linux: the size of a pipe's buffer


class AgentProcess:
    """One started agent process and its three pipes."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen
        self.pid = popen.pid
        assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
        self._files = (popen.stdin, popen.stdout, popen.stderr)
        self.stdin, self.stdout, self.stderr = (f.fileno() for f in self._files)
        for fd in (self.stdin, self.stdout, self.stderr):
            os.set_blocking(fd, False)
        self._pidfd: int | None = None
        pidfd_open = getattr(os, "pidfd_open", None)
        if pidfd_open is not None:
            try:
                self._pidfd = pidfd_open(self.pid)
            except OSError:  # pragma: no cover - kernels before 5.3
                self._pidfd = None

    @classmethod
    def start(cls, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> AgentProcess:
        """Start ``argv`` in a new session (its own process group); raises :class:`OSError`."""
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
            bufsize=0,
        )
        return cls(popen)

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    # --- pipes -------------------------------------------------------------------------------

    async def write_stdin(self, data: bytes) -> None:
        """Write all of ``data``, then close stdin. An agent that exits or closes its stdin
        first is not an error here: what it wrote says why."""
        view = memoryview(data)
        try:
            while view:
                try:
                    written = os.write(self.stdin, view)
                except BlockingIOError:
                    await anyio.wait_writable(self.stdin)
                    continue
                view = view[written:]
        except OSError:  # BrokenPipeError and the like
            pass
        finally:
            self._files[0].close()

    @staticmethod
    async def read(fd: int) -> bytes:
        """What the pipe holds now (up to 1 MiB), waiting for it if need be; ``b""`` at its end."""
        while True:
            try:
                return os.read(fd, READ_SIZE)
            except BlockingIOError:
                await anyio.wait_readable(fd)

    def widen_stderr(self, size: int) -> None:
        """Ask Linux for a larger stderr pipe, so a chatty agent is read in fewer pieces."""
        try:
            import fcntl

            fcntl.fcntl(self.stderr, F_SETPIPE_SZ, size)
        except (ImportError, OSError):
            pass  # elsewhere, or refused: the default size stays

    # --- the end -----------------------------------------------------------------------------

    async def wait(self) -> int:
        """Wait for the process to exit and return its exit code (negative: killed by a signal)."""
        code = self.popen.poll()
        if code is not None:
            return code
        if self._pidfd is not None:
            await anyio.wait_readable(self._pidfd)
            return self.popen.wait()
        return await anyio.to_thread.run_sync(self.popen.wait, abandon_on_cancel=True)

    def signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    async def stop(self, grace_seconds: float) -> None:
        """Stop the whole process group (SIGTERM, then SIGKILL after the grace period; SIGKILL
        also reaches what the agent left running after it exited), reap it, close the pipes."""
        with anyio.CancelScope(shield=True):
            if self.popen.poll() is None:
                self.signal_group(signal.SIGTERM)
                with anyio.move_on_after(grace_seconds):
                    await self.wait()
            self.signal_group(signal.SIGKILL)
            if self.popen.poll() is None:
                await self.wait()
        for file in self._files:
            file.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
