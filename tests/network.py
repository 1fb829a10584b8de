"""What the tests of the network adapters (http, websocket, grpc) share: agent servers started as
processes, a suite run through the real Runner, a sink that keeps what it is given, and a
self-signed certificate for TLS."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from atp.core.config import agent_definitions, load_config, masker_for, resolve_agent
from atp.core.plugins import Plugins
from atp.core.protocol import Event
from atp.core.results import RunStore, SuiteResults
from atp.core.runner import Runner
from atp.core.suite import load_suite
from tests.conftest import write


class Server:
    """A server process on loopback whose first line is ``listening on PORT``: its port, and the
    lines it printed after that."""

    def __init__(self, argv: list[str]) -> None:
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        first = self.process.stdout.readline()
        assert first.startswith("listening on "), first
        self.port = int(first.split()[-1])
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.strip())

    def printed(self, line: str, within: float = 5.0) -> bool:
        deadline = time.monotonic() + within
        while line not in self.lines and time.monotonic() < deadline:
            time.sleep(0.02)
        return line in self.lines

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def free_port() -> int:
    """A loopback port nothing listens on (for "connection refused")."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_agent_suite(
    agent_type: str, tmp_path: Path, plugins: Plugins, settings: str, tests: str, **options: Any
) -> tuple[SuiteResults, RunStore]:
    """Run ``tests`` (YAML lines) against one agent of ``agent_type`` with ``settings`` (YAML
    lines), through the Runner, masked as `atp test` masks."""
    text = f"test_suite: {agent_type}\nagents:\n  - name: agent\n    type: {agent_type}\n{settings}tests:\n{tests}"
    suite = load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    config = load_config(cwd=tmp_path)
    resolved = resolve_agent(agent_definitions(config, suite)["agent"], plugins.adapters)
    masker = masker_for(config, resolved)
    runner = Runner(
        plugins, suite, suite.tests, resolved, run_root=tmp_path / "runs", masker=masker, **options
    )
    results = anyio.run(runner.run)
    assert runner.store is not None
    return results, runner.store


def runs_by_test(results: SuiteResults) -> dict[str, Any]:
    return {test.id: test.runs[0] for test in results.tests}


class Sink:
    """An EventSink that keeps what it is given: each event with its raw JSON when the adapter
    passed it (``received``), and the warnings."""

    masker = None

    def __init__(self) -> None:
        self.received: list[tuple[Event, bytes | None]] = []
        self.warnings: list[str] = []

    def event(self, event: Event, raw: bytes | None = None) -> None:
        self.received.append((event, raw))

    def events(self, events: Any, raw: bytes | None = None) -> None:
        self.received.extend((event, None) for event in events)

    @property
    def seen(self) -> list[Event]:
        return [event for event, _ in self.received]

    def types(self) -> list[str]:
        return [event.event_type for event, _ in self.received]

    def sequences(self) -> list[int]:
        return [event.sequence for event, _ in self.received]

    def log(self, line: str) -> None:
        pass

    def warn(self, message: str) -> None:
        self.warnings.append(message)


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    """A certificate for localhost and 127.0.0.1 and its key, made with openssl (the test is
    skipped where there is none)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl makes the test certificate")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key
