#!/usr/bin/env python3
"""A small, deterministic ATP agent for the quick start: it "researches" a company's competitors.

It speaks the stdin/stdout transport: the request is one JSON line on stdin, events are JSON
lines on stderr, the response is one JSON line on stdout. Instead of calling real tools and an
LLM it looks answers up in a table, but it reports its work as a real agent would: reasoning,
tool calls, LLM requests, progress, and two artifacts (a markdown report and structured data).
Standard library only.
"""

import json
import sys
import time
from datetime import datetime, timezone

KNOWN = {
    "slack": [("Microsoft Teams", 0.35), ("Zoom", 0.20), ("Google Chat", 0.12), ("Discord", 0.08), ("Mattermost", 0.02)],
    "zoom": [("Microsoft Teams", 0.30), ("Google Meet", 0.25), ("Webex", 0.15), ("Slack Huddles", 0.05), ("GoTo Meeting", 0.04)],
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
        self.emit("reasoning", {"thought": f"Find the top {top} competitors of {company or 'the company'}", "plan": ["search", "rank", "write report"], "step": "planning"})
        self.emit("progress", {"current_step": 1, "total_steps": 3, "percentage": 0, "message": "searching"})
        started = time.monotonic()
        found = KNOWN.get(company.lower(), [])
        self.emit("tool_call", {"tool": "web_search", "input": {"query": f"{company} competitors"}, "output": {"results": len(found)}, "duration_ms": round((time.monotonic() - started) * 1000, 3), "status": "success"})
        if not company:
            self.emit("error", {"error_type": "invalid_input", "message": "no company given", "recoverable": False})
            return self.respond(request, "failed", [], "input_data.company is missing", steps=1, tool_calls=1)
        self.emit("llm_request", {"model": "table-lookup", "input_tokens": 120, "output_tokens": 80, "duration_ms": 1, "temperature": 0})
        self.emit("progress", {"current_step": 2, "total_steps": 3, "percentage": 66, "message": "writing the report"})
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
        self.emit("tool_call", {"tool": "file_write", "input": {"path": "report.md"}, "output": {"bytes": len(report)}, "duration_ms": 0.1, "status": "success"})
        self.emit("artifact_created", {"artifact_type": "file", "path": "report.md", "size_bytes": len(report.encode())})
        self.emit("progress", {"current_step": 3, "total_steps": 3, "percentage": 100, "message": "done"})
        artifacts = [
            {"type": "file", "path": "report.md", "content_type": "text/markdown", "size_bytes": len(report.encode()), "content": report},
            {"type": "structured", "name": "competitors", "data": {"company": company, "competitors": [{"name": n, "market_share": s} for n, s in ranked]}},
        ]
        return self.respond(request, "completed", artifacts, None, steps=3, tool_calls=2)

    def respond(self, request, status, artifacts, error, steps, tool_calls):
        return {
            "version": "1.0",
            "task_id": request["task_id"],
            "status": status,
            "artifacts": artifacts,
            "metrics": {"total_tokens": 200, "input_tokens": 120, "output_tokens": 80, "total_steps": steps, "tool_calls": tool_calls, "llm_calls": 1},
            "error": error,
        }


def main():
    request = json.loads(sys.stdin.readline())
    response = Agent(request["task_id"]).run(request)
    print(json.dumps(response), flush=True)


if __name__ == "__main__":
    main()
