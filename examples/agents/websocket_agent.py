#!/usr/bin/env python3
"""An ATP agent served over WebSocket with the ``websockets`` library.

Every run is one connection: ATP sends the ATP Request as one message; the agent answers with
ATP Events, one message each, as it works, and ends with the ATP Response as its last message.

It "researches" a company's competitors: the company is ``input_data.company``, or the one the
description names ("the competitors of Slack"). When the request has
``context.tools_endpoint`` it searches through the tool server (``POST
{tools_endpoint}/web_search`` with ``{"task_id", "input"}``, answered with ``{"status",
"output", "duration_ms"}``), so a suite can mock the search (docs/tool-mocking.md); otherwise
it looks the answer up in a table. It answers with a markdown report (a file artifact with
inline content) and the list as structured data; a task that names no company completes with
a report saying so.

A request it cannot take (not JSON, no ``task_id``, no task description, a protocol major
version other than 1) is answered with an ATP Response of status ``failed`` and ``error_code``
``INVALID_REQUEST``.

Run it (needs ``pip install websockets``)::

    python examples/agents/websocket_agent.py --port 8765      # --port 0: any free port
    python examples/agents/websocket_agent.py --port 8765 --tls-cert cert.pem --tls-key key.pem

The first line it prints is ``listening on PORT``; the agent's ``endpoint`` is then
``ws://127.0.0.1:PORT`` (``wss://`` with TLS).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from typing import Any

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

COMPANY = re.compile(r"\bof ([A-Z][\w.&-]*(?: [A-Z][\w.&-]*)*)")
KNOWN = {
    "slack": ["Microsoft Teams", "Zoom", "Google Chat", "Discord", "Mattermost"],
    "zoom": ["Microsoft Teams", "Google Meet", "Webex", "Slack Huddles", "GoTo Meeting"],
}


def problem_of(request: Any) -> str | None:
    """Why this request cannot be served, or None."""
    if not isinstance(request, dict):
        return "the request is not a JSON object"
    if not isinstance(request.get("task_id"), str) or not request["task_id"]:
        return "the request has no task_id"
    version = request.get("version")
    if not isinstance(version, str) or version.split(".")[0] != "1":
        return f"protocol version {version!r} is not supported; this agent speaks 1.x"
    task = request.get("task")
    if (
        not isinstance(task, dict)
        or not isinstance(task.get("description"), str)
        or not task["description"].strip()
    ):
        return "the request has no task.description"
    return None


def response(
    task_id: str, status: str, artifacts: list[Any], tool_calls: int = 0, **extra: Any
) -> dict[str, Any]:
    return {
        "version": "1.0",
        "task_id": task_id,
        "status": status,
        "artifacts": artifacts,
        "metrics": {
            "total_steps": 3,
            "tool_calls": tool_calls,
            "llm_calls": 1,
            "input_tokens": 120,
            "output_tokens": 80,
            "total_tokens": 200,
        },
        **extra,
    }


def search(tools_endpoint: str, task_id: str, query: dict[str, Any]) -> dict[str, Any]:
    """One call of the tool server's ``web_search`` (blocking: run it in a thread)."""
    body = json.dumps({"task_id": task_id, "input": query}).encode()
    call = urllib.request.Request(
        f"{tools_endpoint.rstrip('/')}/web_search",
        data=body,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(call, timeout=30) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:  # a tool's error comes with a JSON body too
        return json.loads(exc.read() or b"{}")
    except (OSError, ValueError) as exc:
        return {"status": "error", "error": f"the tool server cannot be used: {exc}"}


async def work(request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """The events of one task as it goes, then its response (the last item)."""
    task_id, task = request["task_id"], request["task"]
    sequence = 0

    def event(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
        nonlocal sequence
        sequence += 1
        return {
            "version": "1.0",
            "task_id": task_id,
            "timestamp": datetime.now(timezone.utc).isoformat(),
            "sequence": sequence - 1,
            "event_type": event_type,
            "payload": payload,
        }

    data = task.get("input_data") if isinstance(task.get("input_data"), dict) else {}
    found = COMPANY.search(task["description"])
    company = str(data.get("company") or (found.group(1) if found else "")).strip()
    yield event(
        "progress", {"current_step": 1, "total_steps": 3, "message": f"searching for {company or 'nothing'}"}
    )
    query = {"query": f"{company} competitors"}
    tools = (request.get("context") or {}).get("tools_endpoint")
    if tools:
        started = time.monotonic()
        result = await asyncio.to_thread(search, tools, task_id, query)
        output = result.get("output") if isinstance(result.get("output"), dict) else {}
        results = output.get("results") if isinstance(output.get("results"), list) else []
        names = [str(item.get("title") or item.get("name")) for item in results if isinstance(item, dict)]
        status = "success" if result.get("status") == "success" else "error"
        yield event(
            "tool_call",
            {
                "tool": "web_search",
                "input": query,
                "output": output,
                "status": status,
                "duration_ms": (time.monotonic() - started) * 1000,
            },
        )
    else:
        names = KNOWN.get(company.lower(), [])
        yield event(
            "tool_call",
            {
                "tool": "web_search",
                "input": query,
                "output": {"results": names},
                "duration_ms": 0.1,
                "status": "success",
            },
        )
    yield event("llm_request", {"model": "example-model", "input_tokens": 120, "output_tokens": 80})
    yield event(
        "progress", {"current_step": 3, "total_steps": 3, "percentage": 100, "message": "report written"}
    )
    if company:
        lines = [f"# Competitors of {company}", ""]
        lines += [f"{rank}. {name}" for rank, name in enumerate(names, 1)] or ["No competitors found."]
    else:
        lines = [
            "# Competitors",
            "",
            "The task names no company (input_data.company), so there was nothing to research.",
        ]
    yield response(
        task_id,
        "completed",
        [
            {
                "type": "file",
                "path": "report.md",
                "content_type": "text/markdown",
                "content": "\n".join(lines) + "\n",
            },
            {"type": "structured", "name": "competitors", "data": {"company": company, "competitors": names}},
        ],
        tool_calls=1,
    )


async def handle(connection: ServerConnection) -> None:
    """One run: the request (the first message), then the events and the response."""
    try:
        message = await connection.recv()
        try:
            request = json.loads(message)
            problem = problem_of(request)
        except ValueError as exc:
            request, problem = None, f"the request is not JSON: {exc}"
        if problem is not None:
            task_id = request.get("task_id") if isinstance(request, dict) else None
            await connection.send(
                json.dumps(
                    response(
                        task_id if isinstance(task_id, str) else "",
                        "failed",
                        [],
                        error=problem,
                        error_code="INVALID_REQUEST",
                    )
                )
            )
            return
        async for item in work(request):
            await connection.send(json.dumps(item))
    except ConnectionClosed:
        pass  # ATP closed the connection (its health check, or the run's time limit): stop working
    # Returning closes the connection; ATP has read the response by then.


async def main(host: str, port: int, tls: ssl.SSLContext | None) -> None:
    async with serve(handle, host, port, ssl=tls, max_size=16 * 1024 * 1024) as server:
        print(f"listening on {server.sockets[0].getsockname()[1]}", flush=True)
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="An ATP agent served over WebSocket.")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="the port to listen on; 0 picks a free one")
    parser.add_argument("--tls-cert", help="serve wss:// with this certificate chain (PEM)")
    parser.add_argument("--tls-key", help="the private key of --tls-cert (PEM)")
    args = parser.parse_args()
    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    context = None
    if args.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
    try:
        asyncio.run(main(args.host, args.port, context))
    except KeyboardInterrupt:
        pass
