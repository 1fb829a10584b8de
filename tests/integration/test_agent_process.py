"""AgentProcess: a real child process, its pipes read and written on the event loop."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
import pytest

from atp.adapters import process as process_module
from atp.adapters.process import AgentProcess

ECHO = [
    sys.executable,
    "-c",
    "import sys; data = sys.stdin.read(); sys.stdout.write(data.upper()); sys.stderr.write('done')",
]


async def exchange(process: AgentProcess, data: bytes) -> tuple[bytes, bytes, int]:
    out, err = bytearray(), bytearray()

    async def drain(fd: int, into: bytearray) -> None:
        while chunk := await process.read(fd):
            into += chunk

    async with anyio.create_task_group() as tg:
        tg.start_soon(process.write_stdin, data)
        tg.start_soon(drain, process.stdout, out)
        tg.start_soon(drain, process.stderr, err)
    code = await process.wait()
    await process.stop(1.0)
    return bytes(out), bytes(err), code


@pytest.mark.parametrize("pidfd", [True, False])
def test_large_exchange_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pidfd: bool) -> None:
    if not pidfd:  # the way without pidfds (macOS, old kernels): waiting on a worker thread
        monkeypatch.delattr(os, "pidfd_open", raising=False)
        # decided once per process at the first start (maybe by an earlier test, with pidfds)
        monkeypatch.setattr(process_module, "_trees", None)
    payload = b"abc\n" * 500_000  # 2 MB: more than any pipe buffer, in and out
    process = AgentProcess.start(ECHO, cwd=tmp_path, env=os.environ)
    out, err, code = anyio.run(exchange, process, payload)
    assert (out, err, code) == (payload.upper(), b"done", 0)


def test_stop_kills_the_group_after_the_grace_period(tmp_path: Path) -> None:
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    process = AgentProcess.start([sys.executable, "-c", code], cwd=tmp_path, env=os.environ)

    async def scenario() -> int:
        output = b""
        while not output.endswith(b"\n"):  # one read may return part of the line
            chunk = await process.read(process.stdout)
            assert chunk, output
            output += chunk
        assert output == b"up\n"
        await process.stop(0.2)
        return process.popen.returncode

    assert anyio.run(scenario) == -signal.SIGKILL


def test_writing_to_an_agent_that_does_not_read_is_not_an_error(tmp_path: Path) -> None:
    process = AgentProcess.start([sys.executable, "-c", "pass"], cwd=tmp_path, env=os.environ)

    async def scenario() -> int:
        await process.write_stdin(b"x" * 1_000_000)
        code = await process.wait()
        await process.stop(0.2)
        return code

    assert anyio.run(scenario) == 0
