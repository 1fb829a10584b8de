"""An agent implementing the Agent Interface Standard v1.0 on loopback (stdlib only), for the
tests of the ``agent-interface`` adapter, ``atp validate`` and ``atp list-agents --check``.

    python agent_interface_agent.py [--mode MODE] [--port PORT]

It prints ``listening on PORT`` first, then one JSON line per request it receives
(``{"method", "path", "headers", "body"}``), so a test can see what ATP sent.

``--mode`` (or ``AGENT_MODE``) chooses how it reports itself:

- ``healthy`` (default): status healthy, the tools ``lookup`` and ``add``;
- ``degraded``: error rate 25%; ``unhealthy``: error rate 75%, last error "database unavailable"
  (``/health`` answers 503 with its report);
- ``broken-tools``: ``/mcp/tools`` breaks the schema (a tool without ``parameters.type``, a
  parameter of type ``text``); ``broken-card``: ``/agent-card`` has no ``agent_id``;
- ``no-health-status``: ``/health`` answers 200 without a status;
- ``echo-unhealthy`` / ``echo-degraded``: unhealthy (503) / degraded, with a ``last_error`` that
  echoes the request's Authorization header and goes on for 5,000 characters;
  ``echo-card``: ``/agent-card`` answers 404 with an error that does the same;
- ``drip``: ``/health`` answers 200 and sends its body one byte every 0.2 s, for ever;
- ``health-404``: ``/health`` answers 404 (no report);
- ``needs-text``: healthy, but made for one task: an A2A message whose payload has no string
  ``text`` (the parameter its action requires) fails with ``success: false``;
- ``many-tools``: ``/mcp/tools`` lists 3,000 tools that break the schema;
  ``valid-tools``: 15,000 tools that follow it (3.7 MB); ``huge-tools``: over 4 MiB of tools.

An A2A message's ``payload.task`` (the task's description) chooses the answer:

- ``fail``: ``success: false`` with ``error: "order 42 was not found"``;
- ``malformed``: ``{"result": 1}`` (no ``success``); ``not-json``: an HTML page;
  ``bad-tools``: ``tools_used: [1, 2]``; ``http-500``: HTTP 500 ``{"error": "boom"}``;
- ``scalar``: the result ``"plain text"``; ``nothing``: the result null;
- ``slow N``: waits N seconds first;
- ``echo-secret``: the result holds the request's Authorization header;
- anything else: ``success: true``, ``tools_used: ["lookup"]`` and the result
  ``{"answer": "done: <task>", "action", "payload", "context", "from_agent", "to_agent",
  "message_type"}``.

``POST /mcp/execute/lookup`` with ``{"parameters": {"key": K}}`` answers ``{"value": K.upper()}``
(``success: false`` without ``key``); ``add`` adds ``a`` and ``b``; another tool is a 404.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

AGENT_ID = "test-agent-001"
TOOLS = [
    {
        "name": "lookup",
        "description": "Look a key up",
        "parameters": {
            "type": "object",
            "properties": {"key": {"type": "string", "description": "what to look up"}},
            "required": ["key"],
        },
        "returns": "the value",
        "examples": ['lookup(key="a")'],
    },
    {
        "name": "add",
        "description": "Add two numbers",
        "parameters": {
            "type": "object",
            "properties": {
                "a": {"type": "number", "description": "a number"},
                "b": {"type": "number", "description": "another"},
            },
            "required": ["a", "b"],
        },
        "returns": "the sum",
        "examples": ["add(a=1, b=2)"],
    },
]
RATES = {"healthy": 0.0, "degraded": 0.25, "unhealthy": 0.75}
STARTED = time.monotonic()
LOCK = threading.Lock()


def now() -> str:
    return datetime.now(timezone.utc).isoformat()


ECHO_MODES = {"echo-unhealthy": "unhealthy", "echo-degraded": "degraded"}


def status_of(mode: str) -> str:
    mode = ECHO_MODES.get(mode, mode)
    return mode if mode in RATES else "healthy"


def health(mode: str) -> dict[str, Any]:
    status = status_of(mode)
    report: dict[str, Any] = {
        "status": status,
        "uptime_seconds": int(time.monotonic() - STARTED),
        "request_count": 100,
        "error_count": int(RATES[status] * 100),
        "error_rate": RATES[status],
        "last_error": "database unavailable" if status == "unhealthy" else None,
        "llm_available": status != "unhealthy",
        "timestamp": now(),
    }
    if mode == "no-health-status":
        del report["status"]
    return report


def card(mode: str) -> dict[str, Any]:
    status = health(mode)
    document: dict[str, Any] = {
        "agent_id": AGENT_ID,
        "name": "Test Agent",
        "description": "An agent for ATP's tests",
        "capabilities": ["look things up", "add numbers"],
        "tags": ["test"],
        "tools": [{"name": t["name"], "description": t["description"]} for t in TOOLS],
        "status": {
            k: status.get(k)
            for k in ("status", "uptime_seconds", "request_count", "error_count", "error_rate")
        },
        "metadata": {"llm_model": "none", "semantic_tool_selection": False, "version": "1.0.0"},
    }
    if mode == "broken-card":
        del document["agent_id"]
    return document


def tools(mode: str) -> dict[str, Any]:
    listed = json.loads(json.dumps(TOOLS))
    if mode == "many-tools":
        broken = {
            "name": "",
            "description": 1,
            "parameters": {"type": "array", "properties": {}, "required": "x"},
        }
        listed = [broken] * 3000
    elif mode == "valid-tools":
        listed = [{**TOOLS[0], "name": f"tool{n}"} for n in range(15_000)]
    elif mode == "huge-tools":
        listed = [{**TOOLS[0], "name": f"tool{n}"} for n in range(30_000)]
    if mode == "broken-tools":
        del listed[0]["parameters"]["type"]
        listed[1]["parameters"]["properties"]["a"]["type"] = "text"
    return {"tools": listed, "agent_id": AGENT_ID, "agent_name": "Test Agent"}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mode = "healthy"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # (no 40 ms delayed ACKs)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _record(self, body: Any) -> None:
        line = json.dumps(
            {
                "method": self.command,
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body,
            }
        )
        with LOCK:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def _send(
        self,
        status: int,
        document: Any = None,
        raw: bytes | None = None,
        content_type: str = "application/json",
    ) -> None:
        data = raw if raw is not None else json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._record(None)
        mode = self.mode
        echoed = f"rejected credentials {self.headers.get('Authorization')} " + "x" * 5000
        if self.path == "/health" and mode == "drip":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            while True:  # (until ATP goes away)
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.2)
        elif self.path == "/health" and mode == "health-404":
            self._send(404, {"detail": "Not Found"})
        elif self.path == "/health":
            report = health(mode)
            if mode in ECHO_MODES:
                report["last_error"] = echoed
            self._send(503 if report.get("status") == "unhealthy" else 200, report)
        elif self.path == "/agent-card" and mode == "echo-card":
            self._send(404, {"error": f"no card: {echoed}"})
        elif self.path == "/agent-card":
            self._send(200, card(mode))
        elif self.path == "/mcp/tools":
            self._send(200, tools(mode))
        else:
            self._send(404, {"error": f"no {self.path}"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            self._record(raw.decode("utf-8", "replace"))
            self._send(400, {"error": "not JSON"})
            return
        self._record(body)
        if self.path == "/a2a/message":
            self._message(body)
        elif self.path.startswith("/mcp/execute/"):
            self._tool(self.path[len("/mcp/execute/") :], body)
        else:
            self._send(404, {"error": f"no {self.path}"})

    def _message(self, message: dict[str, Any]) -> None:
        payload = message.get("payload") or {}
        task = str(payload.get("task", ""))
        if self.mode == "needs-text" and not isinstance(payload.get("text"), str):
            task = "fail-text"
        if task.startswith("slow "):
            time.sleep(float(task.split()[1]))
        if task in ("fail", "fail-text"):
            self._send(
                200,
                {
                    "success": False,
                    "result": None,
                    "error": "order 42 was not found"
                    if task == "fail"
                    else "the action needs a 'text' parameter",
                    "tools_used": [],
                    "semantic_selection": False,
                    "timestamp": now(),
                },
            )
        elif task == "malformed":
            self._send(200, {"result": 1})
        elif task == "not-json":
            self._send(200, raw=b"<html>oops</html>", content_type="text/html")
        elif task == "bad-tools":
            self._send(200, {"success": True, "result": {}, "tools_used": [1, 2]})
        elif task == "http-500":
            self._send(500, {"error": "boom"})
        else:
            if task == "scalar":
                result: Any = "plain text"
            elif task == "nothing":
                result = None
            elif task == "echo-secret":
                result = {"authorization": self.headers.get("Authorization")}
            else:
                result = {
                    "answer": f"done: {task}",
                    **{
                        k: message.get(k)
                        for k in ("action", "payload", "context", "from_agent", "to_agent", "message_type")
                    },
                }
            self._send(
                200,
                {
                    "success": True,
                    "result": result,
                    "error": None,
                    "tools_used": ["lookup"],
                    "semantic_selection": False,
                    "timestamp": now(),
                },
            )

    def _tool(self, name: str, body: dict[str, Any]) -> None:
        parameters = body.get("parameters") or {}
        meta = {"agent": AGENT_ID, "tool": name, "timestamp": now()}
        if name == "lookup":
            if "key" not in parameters:
                self._send(
                    200,
                    {"success": False, "result": None, "error": "missing parameter: key", "metadata": meta},
                )
            else:
                self._send(
                    200,
                    {
                        "success": True,
                        "result": {"value": str(parameters["key"]).upper()},
                        "error": None,
                        "metadata": meta,
                    },
                )
        elif name == "add":
            self._send(
                200,
                {
                    "success": True,
                    "result": parameters.get("a", 0) + parameters.get("b", 0),
                    "error": None,
                    "metadata": meta,
                },
            )
        else:
            self._send(404, {"error": f"unknown tool {name}"})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default=os.environ.get("AGENT_MODE", "healthy"))
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    Handler.mode = args.mode
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    sys.stdout.write(f"listening on {server.server_address[1]}\n")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
