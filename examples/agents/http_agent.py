#!/usr/bin/env python3
"""An ATP agent served over HTTP with FastAPI: ``POST /execute`` (the ATP Response as the body),
``POST /execute/stream`` (ATP Events as Server-Sent Events, then the ATP Response as the last
message, sent with ``event: response``) and ``GET /health``.

It "researches" a company's competitors, as examples/agents/research_agent.py does over
stdin/stdout: the company is ``input_data.company``, or the one the description names ("the
competitors of Slack"). When the request has ``context.tools_endpoint`` it searches through the
tool server (``POST {tools_endpoint}/web_search`` with ``{"task_id", "input"}``, answered
with ``{"status", "output", "duration_ms"}``), so a suite can mock the search
(docs/tool-mocking.md); otherwise it looks the answer up in a table. It answers with a markdown
report (a file artifact with inline content) and the list as structured data.

A request it cannot take is refused gracefully: not an ATP Request (not JSON, no ``task_id``, no
task description) with HTTP 400 and ``{"error", "error_code": "INVALID_REQUEST"}``; another
protocol major version (``2.0``) with an ATP Response of status ``failed`` and the same code.

Run it (needs ``pip install fastapi uvicorn httpx``)::

    python examples/agents/http_agent.py --port 8000      # --port 0: any free port

The first line it prints is ``listening on PORT``; the agent's ``endpoint`` is then
``http://127.0.0.1:PORT``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import socket
import time
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

VERSION = re.compile(r"^(\d+)\.(\d+)$")
COMPANY = re.compile(r"\bof ([A-Z][\w.&-]*(?: [A-Z][\w.&-]*)*)")
KNOWN = {
    "slack": ["Microsoft Teams", "Zoom", "Google Chat", "Discord", "Mattermost"],
    "zoom": ["Microsoft Teams", "Google Meet", "Webex", "Slack Huddles", "GoTo Meeting"],
}

app = FastAPI()


class BadRequest(Exception):
    pass


def read_request(body: bytes) -> dict[str, Any]:
    """The request as a dict, or BadRequest saying what is wrong with it."""
    try:
        request = json.loads(body)
    except ValueError as exc:
        raise BadRequest(f"the request is not JSON: {exc}") from None
    if not isinstance(request, dict) or not isinstance(request.get("task_id"), str) or not request["task_id"]:
        raise BadRequest("the request has no task_id")
    if not isinstance(request.get("version"), str) or not VERSION.match(request["version"]):
        raise BadRequest("the request has no version of the form MAJOR.MINOR")
    task = request.get("task")
    if not isinstance(task, dict) or not isinstance(task.get("description"), str) or not task["description"]:
        raise BadRequest("the request has no task.description")
    return request


async def work(request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """The events of one task as it goes, then its response (the last item)."""
    task_id = request["task_id"]
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

    def response(status: str, artifacts: list[Any], **extra: Any) -> dict[str, Any]:
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

    tool_calls = 0
    if VERSION.match(request["version"]).group(1) != "1":  # type: ignore[union-attr]
        yield response(
            "failed",
            [],
            error=f"protocol version {request['version']} is not supported; this agent speaks 1.x",
            error_code="INVALID_REQUEST",
        )
        return
    task = request["task"]
    data = task.get("input_data") or {}
    found = COMPANY.search(task["description"])
    company = str(data.get("company") or (found.group(1) if found else "")).strip()
    yield event(
        "progress", {"current_step": 1, "total_steps": 3, "message": f"searching for {company or 'nothing'}"}
    )
    tools = (request.get("context") or {}).get("tools_endpoint")
    if tools:
        query = {"query": f"{company} competitors"}
        started = time.monotonic()
        async with httpx.AsyncClient(timeout=30) as client:
            answer = await client.post(f"{tools}/web_search", json={"task_id": task_id, "input": query})
        tool_calls += 1
        result = answer.json()
        output = result.get("output") or {}
        names = [item.get("title", "") for item in output.get("results", []) if isinstance(item, dict)]
        yield event(
            "tool_call",
            {
                "tool": "web_search",
                "input": query,
                "output": output,
                "duration_ms": (time.monotonic() - started) * 1000,
                "status": result.get("status", "success"),
            },
        )
    else:
        names = KNOWN.get(company.lower(), [])
    await asyncio.sleep(0)  # where a real agent would think
    yield event("llm_request", {"model": "example-model", "input_tokens": 120, "output_tokens": 80})
    yield event(
        "progress", {"current_step": 3, "total_steps": 3, "percentage": 100, "message": "report written"}
    )
    lines = [f"# Competitors of {company or 'an unnamed company'}", ""]
    lines += [f"{rank}. {name}" for rank, name in enumerate(names, 1)] or ["No competitors found."]
    yield response(
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
    )


def refused(exc: BadRequest) -> JSONResponse:
    return JSONResponse({"error": str(exc), "error_code": "INVALID_REQUEST"}, status_code=400)


@app.post("/execute")
async def execute(http: Request) -> Any:
    try:
        request = read_request(await http.body())
    except BadRequest as exc:
        return refused(exc)
    async for item in work(request):
        last = item
    return last


@app.post("/execute/stream")
async def execute_stream(http: Request) -> Any:
    try:
        request = read_request(await http.body())
    except BadRequest as exc:
        return refused(exc)

    async def messages() -> AsyncIterator[str]:
        async for item in work(request):
            name = "" if "event_type" in item else "event: response\n"
            yield f"{name}data: {json.dumps(item)}\n\n"

    return StreamingResponse(messages(), media_type="text/event-stream")


@app.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok", "version": "1.0"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    print(f"listening on {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
