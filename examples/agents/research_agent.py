#!/usr/bin/env python3
"""A small, deterministic ATP agent for the quick start: it "researches" a company's competitors.

It speaks the stdin/stdout transport: the request is one JSON line on stdin, events are JSON
lines on stderr, the response is one JSON line on stdout. Instead of calling real tools and an
LLM it looks answers up in a table, but it reports its work as a real agent would: reasoning,
tool calls, LLM requests, progress, and two artifacts (a markdown report and structured data).
A request it cannot serve (malformed, or of another protocol major version) is answered with
status "failed" and error_code INVALID_REQUEST (`atp validate` checks this).
Standard library only.
"""

import json
import sys
import time
from datetime import datetime, timezone

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


class Agent:
    def __init__(self, task_id):
        self.task_id = task_id
        self.sequence = 0

    def emit(self, event_type, payload):
        event = {
            "version": "1.0",
            "task_id": self.task_id,
            "timestamp": datetime.now(timezone.utc).isoformat(),
            "sequence": self.sequence,
            "event_type": event_type,
            "payload": payload,
        }
        self.sequence += 1
        print(json.dumps(event), file=sys.stderr, flush=True)

    def run(self, request):
        task = request["task"]
        data = task.get("input_data") or {}
        company = str(data.get("company", "")).strip()
        top = int(data.get("top", 5))
        self.emit(
            "reasoning",
            {
                "thought": f"Find the top {top} competitors of {company or 'the company'}",
                "plan": ["search", "rank", "write report"],
                "step": "planning",
            },
        )
        self.emit("progress", {"current_step": 1, "total_steps": 3, "percentage": 0, "message": "searching"})
        started = time.monotonic()
        found = KNOWN.get(company.lower(), [])
        self.emit(
            "tool_call",
            {
                "tool": "web_search",
                "input": {"query": f"{company} competitors"},
                "output": {"results": len(found)},
                "duration_ms": round((time.monotonic() - started) * 1000, 3),
                "status": "success",
            },
        )
        if not company:  # nothing to look up: an empty result (failed is for what could not be done)
            self.emit(
                "error",
                {
                    "error_type": "invalid_input",
                    "message": "no company given in input_data",
                    "recoverable": True,
                },
            )
            return self.respond(
                request,
                "completed",
                [{"type": "structured", "name": "competitors", "data": {"company": None, "competitors": []}}],
                None,
                steps=1,
                tool_calls=1,
            )
        self.emit(
            "llm_request",
            {
                "model": "table-lookup",
                "input_tokens": 120,
                "output_tokens": 80,
                "duration_ms": 1,
                "temperature": 0,
            },
        )
        self.emit(
            "progress",
            {"current_step": 2, "total_steps": 3, "percentage": 66, "message": "writing the report"},
        )
        ranked = found[:top]
        lines = [f"# Competitor analysis: {company}", "", "## Overview", ""]
        if ranked:
            lines.append(f"{company} competes with {len(ranked)} notable products in its market.")
        else:
            lines.append(f"No competitors of {company} are known to this agent.")
        lines += ["", "## Competitors", ""]
        lines += [f"{i}. {name}: {share:.0%} market share" for i, (name, share) in enumerate(ranked, 1)]
        lines += ["", "## Summary", "", f"Analysed {len(ranked)} competitors of {company}.", ""]
        report = "\n".join(lines)
        self.emit(
            "tool_call",
            {
                "tool": "file_write",
                "input": {"path": "report.md"},
                "output": {"bytes": len(report)},
                "duration_ms": 0.1,
                "status": "success",
            },
        )
        self.emit(
            "artifact_created",
            {"artifact_type": "file", "path": "report.md", "size_bytes": len(report.encode())},
        )
        self.emit("progress", {"current_step": 3, "total_steps": 3, "percentage": 100, "message": "done"})
        artifacts = [
            {
                "type": "file",
                "path": "report.md",
                "content_type": "text/markdown",
                "size_bytes": len(report.encode()),
                "content": report,
            },
            {
                "type": "structured",
                "name": "competitors",
                "data": {
                    "company": company,
                    "competitors": [{"name": n, "market_share": s} for n, s in ranked],
                },
            },
        ]
        return self.respond(request, "completed", artifacts, None, steps=3, tool_calls=2)

    def respond(self, request, status, artifacts, error, steps, tool_calls):
        return {
            "version": "1.0",
            "task_id": request["task_id"],
            "status": status,
            "artifacts": artifacts,
            "metrics": {
                "total_tokens": 200,
                "input_tokens": 120,
                "output_tokens": 80,
                "total_steps": steps,
                "tool_calls": tool_calls,
                "llm_calls": 1,
            },
            "error": error,
        }


def request_problem(request):
    """Why `request` cannot be served, or None. An agent refuses a malformed request and one of
    a protocol version it does not speak (another major version) instead of guessing."""
    if not isinstance(request, dict):
        return "the request is not a JSON object"
    version = request.get("version")
    if not isinstance(version, str) or version.split(".")[0] != "1":
        return f"protocol version {version!r} is not supported; this agent speaks 1.x"
    if not isinstance(request.get("task_id"), str) or not request["task_id"]:
        return "task_id is missing"
    task = request.get("task")
    if not isinstance(task, dict) or not isinstance(task.get("description"), str) or not task["description"]:
        return "task.description is missing or empty"
    if not isinstance(task.get("input_data") or {}, dict):
        return "task.input_data is not an object"
    return None


def answer(line):
    """The response to one request line: the work done, or a refusal (status failed,
    error_code INVALID_REQUEST) of a request that cannot be served."""
    try:
        request = json.loads(line)
    except ValueError:
        request = None
    problem = request_problem(request)
    if problem is None:
        return Agent(request["task_id"]).run(request)
    task_id = request.get("task_id") if isinstance(request, dict) else None
    return {
        "version": "1.0",
        "task_id": task_id if isinstance(task_id, str) else "",
        "status": "failed",
        "artifacts": [],
        "metrics": {},
        "error": problem,
        "error_code": "INVALID_REQUEST",
    }


def main():
    print(json.dumps(answer(sys.stdin.readline())), flush=True)


if __name__ == "__main__":
    main()
