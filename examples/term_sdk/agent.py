"""An example Term Challenge SDK 2.0 agent, standard library only, for ATP's ``term-sdk`` adapter.

The first half is a small stand-in for the SDK's ``term_sdk`` package (``Agent``,
``AgentContext``, ``run``): an HTTP server on ``AGENT_PORT`` (8765 by default) that answers
``GET /health``, ``POST /start`` and ``GET /status`` as the SDK 2.0 protocol says, and runs the
agent's ``run(ctx)`` in a thread of its own. An agent written with the real SDK is driven by ATP
the same way; only the import changes.

The second half is the agent: it has no language model, it follows a script. Told to
"Create a file called NAME containing 'TEXT'", it looks around, writes the file with a shell
command, reads it back, and says it is done; asked "What is 17 + 25?", it has the shell compute
the answer into answer.txt and reads it back; asked for a greeting, it echoes one; anything
else it refuses (the task fails with its error). Run it by hand and talk to it with curl::

    AGENT_PORT=8765 python3 agent.py
    curl -s localhost:8765/health
    curl -s -X POST localhost:8765/start -d '{"instruction": "Create a file called hi.txt containing '"'"'hi'"'"'"}'
    curl -s localhost:8765/status

or with ATP (examples/term_sdk/suite.yaml)::

    atp test --suite=examples/term_sdk/suite.yaml
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# --- a stand-in for term_sdk -------------------------------------------------------------------

HISTORY_SIZE = 30


class ShellResult:
    def __init__(self, output: str, exit_code: int) -> None:
        self.output = output
        self.exit_code = exit_code

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class AgentContext:
    """What an agent's ``run`` works with: the instruction, ``shell``, ``done``."""

    def __init__(self, instruction: str, max_steps: int, timeout_secs: int) -> None:
        self.instruction = instruction
        self.max_steps = max_steps
        self.timeout_secs = timeout_secs
        self.started = time.monotonic()
        self.steps = 0
        self.is_done = False
        self.history: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def shell(self, command: str, timeout: float = 60) -> ShellResult:
        if self.is_done:
            raise RuntimeError("task is done")
        if self.steps >= self.max_steps:
            raise RuntimeError("max steps exceeded")
        if time.monotonic() - self.started > self.timeout_secs:
            raise RuntimeError("timeout exceeded")
        try:
            done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=timeout)
            output, code = done.stdout + done.stderr, done.returncode
        except subprocess.TimeoutExpired:
            output, code = f"command timed out after {timeout:g} s", 124
        with self.lock:
            self.steps += 1
            self.history.append(
                {"step": self.steps, "command": command[:200], "output": output[:500], "exit_code": code}
            )
            del self.history[:-HISTORY_SIZE]
        return ShellResult(output, code)

    def done(self) -> None:
        self.is_done = True


class Agent:
    def setup(self) -> None:
        """Called once, before the server starts."""

    def run(self, ctx: AgentContext) -> None:
        raise NotImplementedError

    def cleanup(self) -> None:
        """Called once, when the server stops."""


class _Runner:
    """One task at a time: its state as ``GET /status`` shows it."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.lock = threading.Lock()
        self.status = "idle"
        self.error: str | None = None
        self.ctx: AgentContext | None = None

    def start(self, body: Any) -> tuple[int, dict[str, Any]]:
        if (
            not isinstance(body, dict)
            or not isinstance(body.get("instruction"), str)
            or not body["instruction"]
        ):
            return 400, {"error": "instruction required"}
        max_steps, timeout_secs = body.get("max_steps", 200), body.get("timeout_secs", 300)
        for name, value in (("max_steps", max_steps), ("timeout_secs", timeout_secs)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                return 400, {"error": f"{name} must be a positive integer"}
        with self.lock:
            if self.status == "running":
                return 409, {"error": "already running"}
            self.status, self.error = "running", None
            self.ctx = AgentContext(body["instruction"], max_steps, timeout_secs)
        threading.Thread(target=self._run, args=(self.ctx,), daemon=True).start()
        return 200, {"status": "started"}

    def _run(self, ctx: AgentContext) -> None:
        try:
            self.agent.run(ctx)
            error = None if ctx.is_done else "the agent returned without calling ctx.done()"
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        with self.lock:
            self.status, self.error = ("failed", error) if error else ("completed", None)

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            ctx = self.ctx
            if ctx is None:
                return {
                    "status": self.status,
                    "steps": 0,
                    "elapsed_secs": 0,
                    "error": None,
                    "done": False,
                    "history": [],
                }
            with ctx.lock:
                return {
                    "status": self.status,
                    "steps": ctx.steps,
                    "elapsed_secs": int(time.monotonic() - ctx.started),
                    "error": self.error,
                    "done": ctx.is_done,
                    "history": list(ctx.history),
                }


def run(agent: Agent) -> None:
    """Serve ``agent`` on ``AGENT_PORT`` until the process is stopped."""
    agent.setup()
    runner = _Runner(agent)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/health":
                self.reply(200, {"status": "ok"})
            elif self.path == "/status":
                self.reply(200, runner.snapshot())
            else:
                self.reply(404, {"error": "not found"})

        def do_POST(self) -> None:
            if self.path != "/start":
                self.reply(404, {"error": "not found"})
                return
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(data)
            except ValueError as exc:
                self.reply(400, {"error": f"invalid JSON: {exc}"})
                return
            self.reply(*runner.start(body))

    port = int(os.environ.get("AGENT_PORT", "8765"))
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"agent listening on 127.0.0.1:{port}", flush=True)
    try:
        server.serve_forever()
    finally:
        agent.cleanup()


# --- the agent ---------------------------------------------------------------------------------

TASK = re.compile(
    r"(?:create|write) a file (?:called|named) (\S+?) containing '(.*)'", re.IGNORECASE | re.DOTALL
)
GREETING = re.compile(r"\b(?:greet|greeting|say hello|reply)\b", re.IGNORECASE)
SUM = re.compile(r"\bwhat is (-?\d+) *([-+*/]) *(-?\d+)\b", re.IGNORECASE)
"""An integer question: "What is 17 + 25?" (examples/frameworks/suite.yaml)."""


class FileWriter(Agent):
    """Writes the file the instruction asks for, and checks it; answers an integer question
    ("What is 17 + 25?") by letting the shell compute it into answer.txt; greets when asked to
    (as ``atp validate``'s probe does); refuses anything else."""

    def run(self, ctx: AgentContext) -> None:
        found = TASK.search(ctx.instruction)
        if found is None:
            question = SUM.search(ctx.instruction)
            if question is not None:
                a, sign, b = question.groups()
                ctx.shell(f"echo $(( {a} {sign} {b} )) > answer.txt")  # the shell's arithmetic
                answer = ctx.shell("cat answer.txt")
                if not answer.ok or not answer.output.strip():
                    raise RuntimeError(f"answer.txt holds no answer: {answer.output!r}")
                ctx.done()
                return
            if GREETING.search(ctx.instruction):
                ctx.shell("echo 'Hello from the example Term SDK agent!'")
                ctx.done()
                return
            raise ValueError("I only create files: say \"Create a file called NAME containing 'TEXT'\"")
        name, text = found.groups()
        ctx.shell("ls -la")
        ctx.shell(f"printf '%s\\n' {shlex.quote(text)} > {shlex.quote(name)}")
        written = ctx.shell(f"cat {shlex.quote(name)}")
        if written.output.rstrip("\n") != text:
            raise RuntimeError(f"{name} does not hold what it should: {written.output!r}")
        ctx.done()


if __name__ == "__main__":
    run(FileWriter())
