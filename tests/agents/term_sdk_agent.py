"""A Term Challenge SDK 2.0 style agent server for the tests of the ``term-sdk`` adapter (stdlib
only): ``GET /health``, ``POST /start``, ``GET /status`` on ``AGENT_PORT``, as the SDK's runner
serves them, running real shell commands in its working folder.

What it does is chosen by ``TERM_AGENT_MODE``, or else by the first word of the instruction
(``complete: write a file``):

- ``complete`` (the default): runs a few commands (one writes ``hello.txt``, one fails), then
  completes;
- ``fail``: runs one command, then fails with the error ``RuntimeError: max steps exceeded``;
- ``forever``: runs ``echo tick`` every 0.2 s and never ends;
- ``gaps``: runs 9 commands, its history shows only steps 3, 6 and 9;
- ``burst``: runs 40 commands before it answers ``POST /start`` (its history holds the last 30);
- ``echo``: writes the body of ``POST /start`` to ``start.json``, then completes;
- ``environ``: writes ``environ.txt`` (its ``ATP_E2E_TOKEN`` and that token's SHA-256, its
  ``REGION``, the keys of ``POST /start``), then completes;
- ``garbage`` / ``badshape`` / ``broken``: ``GET /status`` answers text that is not JSON / JSON
  of the wrong shape / HTTP 500, every time;
- ``reject`` / ``internal``: ``POST /start`` answers 400 / 500;
- ``lazy``: accepts the task and stays ``idle``; ``vanish``: runs one command, then exits
  with code 4;
- ``busy``: starts a task of its own as soon as it serves, so ATP's ``POST /start`` is a second
  one (409 ``already running``);
- ``unhealthy``: ``GET /health`` answers 503 forever; ``slow``: 503 for its first second;
- ``deaf``: never listens; ``crash``: writes to stderr and exits with code 3 at once;
- ``slowloris``: runs for ever, and ``GET /status`` sends its answer one byte every 0.2 s;
- ``deep``: writes ``top.txt``, and ``leaf.txt`` 1,200 folders deep, then completes;
- ``bigsteps``: completes saying it ran 10**12 steps, with a history of 35 entries;
  ``negative``: its history has the step -1;
- ``escape``: starts a process that leaves ATP's reach (a double fork into a session of its own,
  without ``ATP_AGENT_TOKEN``, its output closed) holding the agent's listening socket, writes
  its pid to ``TERM_AGENT_ESCAPE_PIDFILE``, then completes.

``TERM_AGENT_IGNORE_TERM=1`` makes it ignore SIGTERM; ``TERM_AGENT_PIDFILE`` names a file it
writes its pid to when it starts.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(os.environ.get("AGENT_PORT", "8765"))
MODE = os.environ.get("TERM_AGENT_MODE", "")
HISTORY = 30


class State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.status = "idle"
        self.steps = 0
        self.started = 0.0
        self.error: str | None = None
        self.done = False
        self.history: list[dict[str, object]] = []
        self.mode = MODE

    def shell(self, command: str) -> None:
        done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=60)
        with self.lock:
            self.steps += 1
            self.history.append(
                {
                    "step": self.steps,
                    "command": command[:200],
                    "output": (done.stdout + done.stderr)[:500],
                    "exit_code": done.returncode,
                }
            )
            del self.history[:-HISTORY]

    def finish(self, error: str | None = None) -> None:
        with self.lock:
            self.status = "failed" if error else "completed"
            self.error = error
            self.done = error is None

    def snapshot(self) -> dict[str, object]:
        with self.lock:
            history = list(self.history)
            if self.mode == "gaps":
                history = [entry for entry in history if int(entry["step"]) % 3 == 0]  # type: ignore[call-overload]
            return {
                "status": self.status,
                "steps": self.steps,
                "elapsed_secs": int(time.monotonic() - self.started) if self.started else 0,
                "error": self.error,
                "done": self.done,
                "history": history,
            }


STATE = State()


ESCAPE = (
    "import os, sys, time\n"
    "if os.fork(): os._exit(0)\n"
    "os.setsid()\n"
    "if os.fork(): os._exit(0)\n"
    "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
    "time.sleep(60)\n"
)


def run(mode: str, body: dict[str, object]) -> None:
    """The task, in a thread of its own (as the SDK runs ``agent.run(ctx)``)."""
    try:
        if mode == "deep":
            with open("top.txt", "w") as handle:
                handle.write("top\n")
            folder = os.open(".", os.O_RDONLY)
            for _ in range(1200):
                os.mkdir("d", dir_fd=folder)
                inner = os.open("d", os.O_RDONLY, dir_fd=folder)
                os.close(folder)
                folder = inner
            os.close(os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, dir_fd=folder))
            os.close(folder)
            STATE.shell("echo deep")
            STATE.finish()
        elif mode == "bigsteps":
            with STATE.lock:
                STATE.history = [
                    {"step": step, "command": f"echo {step}", "output": "", "exit_code": 0}
                    for step in range(1, 36)
                ]
                STATE.steps = 10**12
            STATE.finish()
        elif mode == "negative":
            with STATE.lock:
                STATE.history = [{"step": -1, "command": "echo", "output": "", "exit_code": 0}]
                STATE.steps = 1
            STATE.finish()
        elif mode == "escape":
            environment = {k: v for k, v in os.environ.items() if k != "ATP_AGENT_TOKEN"}
            listening = SERVER.socket.fileno()
            subprocess.Popen(
                [sys.executable, "-c", ESCAPE, os.environ["TERM_AGENT_ESCAPE_PIDFILE"]],
                env=environment,
                pass_fds=(listening,),
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            ).wait()
            STATE.finish()
        elif mode == "fail":
            STATE.shell("echo trying")
            STATE.finish("RuntimeError: max steps exceeded")
        elif mode in ("forever", "busy", "garbage", "badshape", "broken", "slowloris"):
            while True:
                STATE.shell("echo tick")
                time.sleep(0.2)
        elif mode == "vanish":
            STATE.shell("echo one")
            time.sleep(0.6)
            print("out of memory, bye", file=sys.stderr, flush=True)
            os._exit(4)
        elif mode == "gaps":
            for step in range(1, 10):
                STATE.shell(f"echo step {step}")
            STATE.finish()
        elif mode == "burst":
            STATE.finish()  # (its 40 commands ran before POST /start answered)
        elif mode == "environ":  # what the process got of the run's context.environment
            token = os.environ.get("ATP_E2E_TOKEN", "")
            with open("environ.txt", "w") as handle:
                handle.write(f"token={token}\nsha256={hashlib.sha256(token.encode()).hexdigest()}\n")
                handle.write(f"region={os.environ.get('REGION')}\nstart={sorted(body)}\n")
            STATE.shell("cat environ.txt")
            STATE.finish()
        elif mode == "echo":
            with open("start.json", "w") as handle:
                json.dump(body, handle)
            STATE.shell("cat start.json")
            STATE.finish()
        else:
            for command in (
                "ls -a",
                "echo 'Hello, World!' > hello.txt",
                "cat hello.txt",
                "test -f missing.txt",
            ):
                STATE.shell(command)
                time.sleep(0.1)
            STATE.finish()
    except Exception as exc:  # (as the SDK reports an exception of agent.run)
        STATE.finish(f"{type(exc).__name__}: {exc}")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass  # (the SDK's runner does not log each request either)

    def answer(self, status: int, body: object, raw: bytes | None = None) -> None:
        data = raw if raw is not None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/health":
            if MODE == "unhealthy" or (MODE == "slow" and time.monotonic() - BORN < 1.0):
                self.answer(503, {"status": "starting"})
            else:
                self.answer(200, {"status": "ok"})
        elif self.path == "/status":
            mode = STATE.mode
            if mode == "garbage" and STATE.status != "idle":
                self.answer(200, None, raw=b"this is not JSON {")
            elif mode == "badshape" and STATE.status != "idle":
                self.answer(200, {"status": "running", "steps": 1, "history": "everything is fine"})
            elif mode == "broken" and STATE.status != "idle":
                self.answer(500, {"error": "status store corrupted"})
            elif mode == "slowloris" and STATE.status != "idle":
                data = json.dumps(STATE.snapshot()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                for byte in data:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.2)
            else:
                self.answer(200, STATE.snapshot())
        else:
            self.answer(404, {"error": "not found"})

    def do_POST(self) -> None:
        if self.path != "/start":
            self.answer(404, {"error": "not found"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except ValueError as exc:
            self.answer(400, {"error": f"invalid JSON: {exc}"})
            return
        if (
            not isinstance(body, dict)
            or not isinstance(body.get("instruction"), str)
            or not body["instruction"]
        ):
            self.answer(400, {"error": "instruction required"})
            return
        words = body["instruction"].split()
        mode = MODE or (words[0].rstrip(":") if words else "complete")
        if mode == "reject":
            self.answer(400, {"error": "instruction required"})
            return
        if mode == "internal":
            self.answer(500, {"error": "runner not initialized"})
            return
        if mode == "lazy":  # accepts the task and never starts it
            self.answer(200, {"status": "started"})
            return
        with STATE.lock:
            if STATE.status == "running":
                conflict = True
            else:
                conflict = False
                STATE.status, STATE.started, STATE.mode = "running", time.monotonic(), mode
        if conflict:
            self.answer(409, {"error": "already running"})
            return
        if mode == "burst":
            for step in range(1, 41):
                STATE.shell(f"echo burst {step}")
        threading.Thread(target=run, args=(mode, body), daemon=True).start()
        self.answer(200, {"status": "started"})


BORN = time.monotonic()
SERVER: ThreadingHTTPServer


def main() -> None:
    if os.environ.get("TERM_AGENT_IGNORE_TERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pidfile = os.environ.get("TERM_AGENT_PIDFILE")
    if pidfile:
        with open(pidfile, "w") as handle:
            handle.write(str(os.getpid()))
    if MODE == "crash":
        print("fatal: no model configured (set LLM_PROXY_URL)", file=sys.stderr, flush=True)
        sys.exit(3)
    if MODE == "deaf":
        print("thinking before listening ...", file=sys.stderr, flush=True)
        while True:
            time.sleep(1)
    global SERVER
    server = SERVER = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
    server.daemon_threads = True
    print(
        f"term agent listening on {PORT} (mode {MODE or 'from the instruction'}) in {os.getcwd()}",
        file=sys.stderr,
        flush=True,
    )
    if MODE == "busy":
        with STATE.lock:
            STATE.status, STATE.started = "running", time.monotonic()
        threading.Thread(target=run, args=("busy", {}), daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
