#!/usr/bin/env python3
"""An ATP agent served over gRPC: the service ``atp.v1.Agent`` (``atp/v1/agent.proto``).

It "researches" a company's competitors, as examples/agents/research_agent.py does over
stdin/stdout, and answers with a markdown report (a file artifact, also written to the
request's workspace when it names one) and the list as structured data. It implements:

- ``ExecuteStream``: the ATP Events as they happen, then the ATP Response;
- ``Execute``: the ATP Response once done, with the events it recorded;
- ``Health``: serving, protocol version 1.0.

The company is ``input_data.company``, or the one the description names ("the competitors of
Slack"); a task that names none completes with a report saying so. When the request's
``context.tools_endpoint`` is set, the search goes to the tool server (``POST
{tools_endpoint}/web_search`` with ``{"task_id", "input"}``, answered with ``{"status",
"output", "duration_ms"}``); otherwise the agent looks its answers up in a table.

A request it cannot take is refused gracefully: one that is not an ATP Request at all (not
JSON, no ``task_id``, no task description) ends the call with the gRPC status
``INVALID_ARGUMENT``; one of another protocol major version (``2.0``) is answered with an ATP
Response of status ``failed`` and ``error_code`` ``INVALID_REQUEST``. A call ATP cancels (its
time limit) stops the work.

Run it::

    python examples/agents/grpc_agent.py --port 50051    # --port 0: any free port
    python examples/agents/grpc_agent.py --port 50051 --tls-cert cert.pem --tls-key key.pem

The first line it prints is ``listening on PORT``. It needs ``pip install 'atp-adapters[grpc]'``
for ``grpcio`` and the generated code of the service; an agent in another language generates
its own from the .proto.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import grpc

from atp.adapters.proto.atp.v1 import agent_pb2, agent_pb2_grpc

PROTOCOL_VERSION = "1.0"
TOOL_SECONDS = 30.0
KNOWN = {
    "slack": [
        ("Microsoft Teams", 0.35),
        ("Zoom", 0.20),
        ("Google Chat", 0.12),
        ("Discord", 0.08),
        ("Mattermost", 0.02),
    ],
    "zoom": [
        ("Microsoft Teams", 0.30),
        ("Google Meet", 0.25),
        ("Webex", 0.15),
        ("Slack Huddles", 0.05),
        ("GoTo Meeting", 0.04),
    ],
}
VERSION = re.compile(r"^(\d+)\.(\d+)$")
COMPANY = re.compile(r"\bof ([A-Z][\w.&-]*(?: [A-Z][\w.&-]*)*)")


class BadRequest(Exception):
    """The request is not an ATP Request this agent can read."""


def read_request(data: bytes) -> dict[str, Any]:
    """The request as a dict, or BadRequest saying what is wrong with it."""
    try:
        request = json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest(f"the request is not JSON: {exc}") from None
    if not isinstance(request, dict):
        raise BadRequest("the request is not a JSON object")
    if not isinstance(request.get("task_id"), str) or not request["task_id"]:
        raise BadRequest("the request has no task_id")
    if not isinstance(request.get("version"), str) or not VERSION.match(request["version"]):
        raise BadRequest("the request has no version of the form MAJOR.MINOR")
    task = request.get("task")
    if not isinstance(task, dict) or not isinstance(task.get("description"), str) or not task["description"]:
        raise BadRequest("the request has no task.description")
    if task.get("input_data") is not None and not isinstance(task["input_data"], dict):
        raise BadRequest("task.input_data is not an object")
    return request


def now() -> str:
    return datetime.now(timezone.utc).isoformat()


class Run:
    """One task: the events it produces, then its response."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request
        self.task_id: str = request["task_id"]
        self.sequence = 0
        self.tool_calls = 0

    def event(self, event_type: str, payload: dict[str, Any]) -> bytes:
        event = {
            "version": PROTOCOL_VERSION,
            "task_id": self.task_id,
            "timestamp": now(),
            "sequence": self.sequence,
            "event_type": event_type,
            "payload": payload,
        }
        self.sequence += 1
        return json.dumps(event).encode()

    def response(
        self, status: str, artifacts: list[Any], *, error: str | None = None, code: str | None = None
    ) -> bytes:
        response: dict[str, Any] = {
            "version": PROTOCOL_VERSION,
            "task_id": self.task_id,
            "status": status,
            "artifacts": artifacts,
            "metrics": {
                "total_tokens": 200,
                "input_tokens": 120,
                "output_tokens": 80,
                "total_steps": 3,
                "tool_calls": self.tool_calls,
                "llm_calls": 1,
            },
        }
        if error is not None:
            response["error"] = error
        if code is not None:
            response["error_code"] = code
        return json.dumps(response).encode()

    async def work(self) -> AsyncIterator[tuple[str, bytes]]:
        """``("event", json)`` items as the work goes, then one ``("response", json)``."""
        major = int(VERSION.match(self.request["version"]).group(1))  # type: ignore[union-attr]
        if major != 1:
            yield (
                "response",
                self.response(
                    "failed",
                    [],
                    error=f"protocol version {self.request['version']} is not supported; this agent speaks 1.x",
                    code="INVALID_REQUEST",
                ),
            )
            return
        task = self.request["task"]
        data = task.get("input_data") or {}
        company = str(data.get("company", "")).strip() or company_in(task["description"])
        top = data.get("top", 5)
        top = top if isinstance(top, int) and 0 < top <= 20 else 5
        context = self.request.get("context") or {}
        yield (
            "event",
            self.event(
                "reasoning",
                {
                    "thought": f"Find the top {top} competitors of {company or 'the company'}",
                    "plan": ["search", "rank", "write report"],
                    "step": "planning",
                },
            ),
        )
        yield (
            "event",
            self.event(
                "progress", {"current_step": 1, "total_steps": 3, "percentage": 0, "message": "searching"}
            ),
        )
        query = {"query": f"{company} competitors"}
        tools = context.get("tools_endpoint")
        if tools:
            started = time.monotonic()
            status, output, error = await asyncio.to_thread(
                call_tool, tools, "web_search", self.task_id, query
            )
            found = names_in(output) if status == "success" else []
            payload: dict[str, Any] = {
                "tool": "web_search",
                "input": query,
                "output": output,
                "duration_ms": round((time.monotonic() - started) * 1000, 3),
                "status": status,
            }
            if error is not None:
                payload["error"] = error
        else:
            found = [name for name, _ in KNOWN.get(company.lower(), [])]
            payload = {
                "tool": "web_search",
                "input": query,
                "output": {"results": found},
                "duration_ms": 0.1,
                "status": "success",
            }
        self.tool_calls += 1
        yield "event", self.event("tool_call", payload)
        yield (
            "event",
            self.event(
                "llm_request",
                {
                    "model": "table-lookup",
                    "input_tokens": 120,
                    "output_tokens": 80,
                    "duration_ms": 1,
                    "temperature": 0,
                },
            ),
        )
        yield (
            "event",
            self.event(
                "progress",
                {"current_step": 2, "total_steps": 3, "percentage": 66, "message": "writing the report"},
            ),
        )
        ranked = found[:top]
        shares = dict(KNOWN.get(company.lower(), []))
        report = render_report(company, ranked, shares)
        size = len(report.encode())
        workspace = context.get("workspace_path")
        if workspace:
            await asyncio.to_thread(Path(workspace, "report.md").write_text, report, "utf-8")
        self.tool_calls += 1
        yield (
            "event",
            self.event(
                "tool_call",
                {
                    "tool": "file_write",
                    "input": {"path": "report.md"},
                    "output": {"bytes": size},
                    "duration_ms": 0.1,
                    "status": "success",
                },
            ),
        )
        yield (
            "event",
            self.event(
                "artifact_created", {"artifact_type": "file", "path": "report.md", "size_bytes": size}
            ),
        )
        yield (
            "event",
            self.event(
                "progress", {"current_step": 3, "total_steps": 3, "percentage": 100, "message": "done"}
            ),
        )
        artifacts = [
            {
                "type": "file",
                "path": "report.md",
                "content_type": "text/markdown",
                "size_bytes": size,
                "content": report,
            },
            {
                "type": "structured",
                "name": "competitors",
                "data": {
                    "company": company,
                    "competitors": [{"name": name, "market_share": shares.get(name)} for name in ranked],
                },
            },
        ]
        yield "response", self.response("completed", artifacts)


def company_in(description: str) -> str:
    """The company a task names in its words ("the competitors of Slack"), or ``""``."""
    match = COMPANY.search(description)
    return match.group(1) if match else ""


def render_report(company: str, ranked: list[str], shares: dict[str, float]) -> str:
    if not company:
        return "# Competitor analysis\n\nThe task names no company (input_data.company), so there was nothing to research.\n"
    lines = [f"# Competitor analysis: {company}", "", "## Overview", ""]
    if ranked:
        lines.append(f"{company} competes with {len(ranked)} notable products in its market.")
    else:
        lines.append(f"No competitors of {company} were found.")
    lines += ["", "## Competitors", ""]
    for number, name in enumerate(ranked, 1):
        share = shares.get(name)
        lines.append(f"{number}. {name}" + (f": {share:.0%} market share" if share is not None else ""))
    lines += ["", "## Summary", "", f"Analysed {len(ranked)} competitors of {company}.", ""]
    return "\n".join(lines)


def call_tool(
    endpoint: str, tool: str, task_id: str, tool_input: dict[str, Any]
) -> tuple[str, Any, str | None]:
    """Call ``tool`` on the tool server (the ATP Tool Protocol): its status, output and error."""
    body = json.dumps({"task_id": task_id, "input": tool_input}).encode()
    url = f"{endpoint.rstrip('/')}/{tool}"
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=TOOL_SECONDS) as answer:
            result = json.loads(answer.read())
    except urllib.error.HTTPError as exc:  # a tool's error: {"status": "error", "error": "..."}
        try:
            said = json.loads(exc.read(64 * 1024)).get("error")
        except (OSError, ValueError, AttributeError):
            said = None
        return "error", None, said if isinstance(said, str) else f"the tool server answered HTTP {exc.code}"
    except (OSError, ValueError) as exc:
        return "error", None, f"the tool server cannot be used: {exc}"
    if not isinstance(result, dict):
        return "error", None, "the tool server's answer is not a JSON object"
    error = result.get("error")
    return str(result.get("status", "error")), result.get("output"), error if isinstance(error, str) else None


def names_in(output: Any) -> list[str]:
    """Company names in a search tool's output (``{"results": [...]}``, strings or ``{"name"}``)."""
    results = output.get("results") if isinstance(output, dict) else output
    names = []
    for item in results if isinstance(results, list) else []:
        name = item.get("name") or item.get("title") if isinstance(item, dict) else item
        if isinstance(name, str) and name:
            names.append(name)
    return names


class Agent(agent_pb2_grpc.AgentServicer):
    async def Execute(
        self, request: agent_pb2.ExecuteRequest, context: grpc.aio.ServicerContext
    ) -> agent_pb2.ExecuteResponse:
        run = await self.start(request, context)
        events = []
        async for kind, data in run.work():
            if kind == "event":
                events.append(data)
            else:
                return agent_pb2.ExecuteResponse(response=data, events=events)
        await context.abort(grpc.StatusCode.INTERNAL, "the agent produced no response")
        raise AssertionError("abort raises")

    async def ExecuteStream(
        self, request: agent_pb2.ExecuteRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[agent_pb2.ExecuteStreamItem]:
        run = await self.start(request, context)
        try:
            async for kind, data in run.work():
                yield (
                    agent_pb2.ExecuteStreamItem(event=data)
                    if kind == "event"
                    else agent_pb2.ExecuteStreamItem(response=data)
                )
        except asyncio.CancelledError:
            print(f"cancelled {run.task_id}", flush=True)
            raise

    async def Health(
        self, request: agent_pb2.HealthRequest, context: grpc.aio.ServicerContext
    ) -> agent_pb2.HealthResponse:
        return agent_pb2.HealthResponse(serving=True, protocol_version=PROTOCOL_VERSION)

    @staticmethod
    async def start(request: agent_pb2.ExecuteRequest, context: grpc.aio.ServicerContext) -> Run:
        try:
            return Run(read_request(request.request))
        except BadRequest as exc:
            details = json.dumps({"error": str(exc), "error_code": "INVALID_REQUEST"})
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, details)
            raise AssertionError("abort raises") from None


async def serve(host: str, port: int, tls: tuple[Path, Path] | None = None) -> None:
    server = grpc.aio.server()
    agent_pb2_grpc.add_AgentServicer_to_server(Agent(), server)
    if tls is not None:
        cert, key = (path.read_bytes() for path in tls)
        bound = server.add_secure_port(f"{host}:{port}", grpc.ssl_server_credentials([(key, cert)]))
    else:
        bound = server.add_insecure_port(f"{host}:{port}")
    if not bound:
        sys.exit(f"cannot listen on {host}:{port}")
    await server.start()
    print(f"listening on {bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(grace=1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description="An ATP agent served over gRPC (atp.v1.Agent).")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=50051, help="the port to listen on; 0 picks a free one")
    parser.add_argument("--tls-cert", type=Path, help="serve TLS with this certificate chain (PEM)")
    parser.add_argument("--tls-key", type=Path, help="the private key of --tls-cert (PEM)")
    args = parser.parse_args()
    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    asyncio.run(serve(args.host, args.port, (args.tls_cert, args.tls_key) if args.tls_cert else None))


if __name__ == "__main__":
    main()
