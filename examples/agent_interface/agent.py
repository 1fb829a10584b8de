#!/usr/bin/env python3
"""A small research agent that implements the Agent Interface Standard v1.0 (standard library
only), for ATP's ``agent-interface`` adapter: it finds a company's competitors (and adds two
numbers, for examples/frameworks/suite.yaml).

Its endpoints:

- ``GET /agent-card``: who it is (``agent_id`` ``research-agent-001``), its capabilities and tools;
- ``GET /health``: its status (``healthy`` while fewer than 10% of its requests failed,
  ``degraded`` up to 50%, ``unhealthy`` above), uptime, request and error counts;
- ``GET /mcp/tools``: its MCP tools, ``find_competitors`` (``company``: string, ``top``: number)
  and ``add`` (``a``, ``b``: numbers);
- ``POST /mcp/execute/find_competitors``, ``POST /mcp/execute/add``: the tools, called directly;
- ``POST /a2a/message``: the action ``research``: the company is ``payload.company``, or the one
  ``payload.task`` names ("the competitors of Slack"); it calls its tool and answers with
  ``{"company", "competitors"}`` and ``tools_used: ["find_competitors"]``, or ``success: false``
  for a company it does not know (a task that names no company is answered with no
  competitors and a note, without the tool);
- ``POST /a2a/message``: the action ``calculate``: a sum the task asks for ("What is 17 + 25?",
  or ``payload.a`` and ``payload.b``), computed by its tool ``add``; it answers with
  ``{"question", "answer"}`` and ``tools_used: ["add"]`` (a task that asks for no sum is
  answered with no answer and a note, without the tool).

The example suite starts it itself (its ``command``: ``agent.py --port {port}``, on a free port)
and stops it at the end; from the repository's root::

    atp test --suite=examples/agent_interface/suite.yaml
    atp validate examples/agent_interface/suite.yaml

Or run it by hand (``--port`` defaults to ``$PORT``, else 8766; ``--port 0``: any free port) and
test it where it runs, with a suite whose agent has no ``command``::

    python examples/agent_interface/agent.py --port 8766

The first line it prints is ``listening on PORT``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

AGENT_ID = "research-agent-001"
NAME = "Research Agent"
COMPANY = re.compile(r"\bof ([A-Z][\w.&-]*(?: [A-Z][\w.&-]*)*)")
KNOWN = {
    "slack": ["Microsoft Teams", "Zoom", "Google Chat", "Discord", "Mattermost"],
    "zoom": ["Microsoft Teams", "Google Meet", "Webex", "Slack Huddles", "GoTo Meeting"],
}
TOOL = {
    "name": "find_competitors",
    "description": "The main competitors of a company, best known first",
    "parameters": {
        "type": "object",
        "properties": {
            "company": {"type": "string", "description": "the company's name"},
            "top": {"type": "number", "description": "how many to return (default 5)"},
        },
        "required": ["company"],
    },
    "returns": "{company, competitors: [names]}",
    "examples": ['find_competitors(company="Slack", top=3)'],
}
ADD = {
    "name": "add",
    "description": "The sum of two numbers",
    "parameters": {
        "type": "object",
        "properties": {
            "a": {"type": "number", "description": "the first number"},
            "b": {"type": "number", "description": "the second number"},
        },
        "required": ["a", "b"],
    },
    "returns": "{a, b, sum}",
    "examples": ["add(a=17, b=25)"],
}
TOOLS = [TOOL, ADD]
SUM = re.compile(r"(-?\d+(?:\.\d+)?)\s*\+\s*(-?\d+(?:\.\d+)?)")
ACTIONS = ("research", "calculate")
STARTED = time.monotonic()
COUNTS = {"requests": 0, "errors": 0}
LAST_ERROR: list[str] = []
LOCK = threading.Lock()


def now() -> str:
    return datetime.now(timezone.utc).isoformat()


def status() -> dict[str, Any]:
    with LOCK:
        requests, errors = COUNTS["requests"], COUNTS["errors"]
    rate = errors / requests if requests else 0.0
    state = "healthy" if rate < 0.1 else "degraded" if rate <= 0.5 else "unhealthy"
    return {
        "status": state,
        "uptime_seconds": int(time.monotonic() - STARTED),
        "request_count": requests,
        "error_count": errors,
        "error_rate": round(rate, 4),
    }


def counted(ok: bool, error: str | None = None) -> None:
    with LOCK:
        COUNTS["requests"] += 1
        if not ok:
            COUNTS["errors"] += 1
            LAST_ERROR[:] = [error or "unknown error"]


def find_competitors(parameters: dict[str, Any]) -> dict[str, Any]:
    """The tool: raises LookupError for a company it does not know."""
    company = str(parameters.get("company") or "").strip()
    if not company:
        raise LookupError("the parameter 'company' is missing")
    known = KNOWN.get(company.lower())
    if known is None:
        raise LookupError(f"no competitors known for {company}")
    top = parameters.get("top", 5)
    top = int(top) if isinstance(top, (int, float)) and not isinstance(top, bool) and top >= 1 else 5
    return {"company": company, "competitors": known[:top]}


def add(parameters: dict[str, Any]) -> dict[str, Any]:
    """The tool ``add``: raises ValueError when ``a`` or ``b`` is not a number."""
    numbers = []
    for name in ("a", "b"):
        value = parameters.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"the parameter {name!r} is not a number: {value!r}")
        numbers.append(value)
    total = numbers[0] + numbers[1]
    return {"a": numbers[0], "b": numbers[1], "sum": int(total) if float(total).is_integer() else total}


def number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() else value


TOOL_FUNCTIONS = {"find_competitors": find_competitors, "add": add}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"{self.command} {self.path}\n")

    def _send(self, code: int, document: Any) -> None:
        data = json.dumps(document).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/agent-card":
            self._send(
                200,
                {
                    "agent_id": AGENT_ID,
                    "name": NAME,
                    "description": "Finds the competitors of a company, and adds numbers",
                    "capabilities": ["competitor research", "addition"],
                    "tags": ["research", "example"],
                    "tools": [{"name": tool["name"], "description": tool["description"]} for tool in TOOLS],
                    "status": status(),
                    "metadata": {
                        "llm_model": "none (a lookup table)",
                        "semantic_tool_selection": False,
                        "version": "1.0.0",
                    },
                },
            )
        elif self.path == "/health":
            with LOCK:
                last = LAST_ERROR[0] if LAST_ERROR else None
            self._send(200, {**status(), "last_error": last, "llm_available": False, "timestamp": now()})
        elif self.path == "/mcp/tools":
            self._send(200, {"tools": TOOLS, "agent_id": AGENT_ID, "agent_name": NAME})
        else:
            self._send(404, {"error": f"no such endpoint: {self.path}"})

    def do_POST(self) -> None:
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        except ValueError:
            self._send(400, {"error": "the body is not JSON"})
            return
        if not isinstance(body, dict):
            self._send(400, {"error": "the body is not a JSON object"})
        elif self.path == "/a2a/message":
            self._message(body)
        elif self.path.startswith("/mcp/execute/") and self.path.rsplit("/", 1)[-1] in TOOL_FUNCTIONS:
            self._tool(self.path.rsplit("/", 1)[-1], body)
        elif self.path.startswith("/mcp/execute/"):
            self._send(404, {"error": f"no such tool: {self.path.rsplit('/', 1)[-1]}"})
        else:
            self._send(404, {"error": f"no such endpoint: {self.path}"})

    def _tool(self, name: str, body: dict[str, Any]) -> None:
        meta = {"agent": AGENT_ID, "tool": name, "timestamp": now()}
        try:
            result = TOOL_FUNCTIONS[name](body.get("parameters") or {})
        except (LookupError, ValueError) as exc:
            counted(False, str(exc))
            self._send(200, {"success": False, "result": None, "error": str(exc), "metadata": meta})
            return
        counted(True)
        self._send(200, {"success": True, "result": result, "error": None, "metadata": meta})

    def _message(self, message: dict[str, Any]) -> None:
        answer: dict[str, Any] = {"semantic_selection": False, "timestamp": now()}
        payload = message.get("payload") if isinstance(message.get("payload"), dict) else {}
        if message.get("action") not in ACTIONS:
            counted(False, f"unknown action {message.get('action')!r}")
            self._send(
                200,
                {
                    **answer,
                    "success": False,
                    "result": None,
                    "tools_used": [],
                    "error": f"unknown action {message.get('action')!r} (this agent does: {', '.join(ACTIONS)})",
                },
            )
            return
        if message.get("action") == "calculate":
            self._calculate(payload, answer)
            return
        company = payload.get("company")
        if not company:
            found = COMPANY.search(str(payload.get("task", "")))
            company = found.group(1) if found else None
        if not company:  # nothing to research: an answer all the same, not a failure
            counted(True)
            self._send(
                200,
                {
                    **answer,
                    "success": True,
                    "error": None,
                    "tools_used": [],
                    "result": {
                        "company": None,
                        "competitors": [],
                        "note": "name a company (payload.company, or 'the competitors of X')",
                    },
                },
            )
            return
        try:
            result = find_competitors({"company": company, "top": payload.get("top", 5)})
        except LookupError as exc:
            counted(False, str(exc))
            self._send(
                200,
                {
                    **answer,
                    "success": False,
                    "result": None,
                    "error": str(exc),
                    "tools_used": ["find_competitors"],
                },
            )
            return
        counted(True)
        self._send(
            200,
            {**answer, "success": True, "result": result, "error": None, "tools_used": ["find_competitors"]},
        )

    def _calculate(self, payload: dict[str, Any], answer: dict[str, Any]) -> None:
        """The action ``calculate``: the sum the task asks for, computed by the tool ``add``."""
        if "a" in payload or "b" in payload:
            parameters = {"a": payload.get("a"), "b": payload.get("b")}
        elif found := SUM.search(str(payload.get("task", ""))):
            parameters = {"a": number(found.group(1)), "b": number(found.group(2))}
        else:  # nothing to add: an answer all the same, not a failure
            counted(True)
            self._send(
                200,
                {
                    **answer,
                    "success": True,
                    "error": None,
                    "tools_used": [],
                    "result": {
                        "question": None,
                        "answer": None,
                        "note": "ask 'What is A + B?', or give payload.a and payload.b",
                    },
                },
            )
            return
        try:
            added = add(parameters)
        except ValueError as exc:
            counted(False, str(exc))
            self._send(
                200, {**answer, "success": False, "result": None, "error": str(exc), "tools_used": ["add"]}
            )
            return
        counted(True)
        result = {"question": f"{added['a']} + {added['b']}", "answer": added["sum"]}
        self._send(200, {**answer, "success": True, "result": result, "error": None, "tools_used": ["add"]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT") or 8766))
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    print(f"listening on {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
