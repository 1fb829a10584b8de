#!/usr/bin/env python3
"""Minimal ATP-compatible agent.

The protocol document's minimal agent, which also refuses (status "failed", error_code
INVALID_REQUEST) a request it cannot serve: a malformed one, or one of another major version.
"""

import json
import sys
from datetime import datetime, timezone


def main():
    # Read request from stdin
    request_line = sys.stdin.readline()
    try:
        request = json.loads(request_line)
    except ValueError:
        request = None

    # Refuse what cannot be served: a malformed request, another major version
    problem = request_problem(request)
    if problem:
        task_id = request.get("task_id") if isinstance(request, dict) else None
        print(
            json.dumps(
                {
                    "version": "1.0",
                    "task_id": task_id if isinstance(task_id, str) else "",
                    "status": "failed",
                    "artifacts": [],
                    "metrics": {},
                    "error": problem,
                    "error_code": "INVALID_REQUEST",
                }
            )
        )
        return

    task_id = request["task_id"]
    description = request["task"]["description"]

    # Emit start event to stderr
    emit_event(task_id, 0, "progress", {"message": "Starting task", "percentage": 0})

    # Do actual work here...
    result = f"Processed: {description}"

    # Emit completion event
    emit_event(task_id, 1, "progress", {"message": "Task completed", "percentage": 100})

    # Write response to stdout
    response = {
        "version": "1.0",
        "task_id": task_id,
        "status": "completed",
        "artifacts": [{"type": "structured", "name": "result", "data": {"output": result}}],
        "metrics": {
            "total_tokens": 0,
            "total_steps": 1,
            "tool_calls": 0,
            "llm_calls": 0,
            "wall_time_seconds": 1.0,
        },
    }

    print(json.dumps(response))


def request_problem(request):
    """Why the request cannot be served, or None when it can."""
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
    return None


def emit_event(task_id: str, seq: int, event_type: str, payload: dict):
    """Emit event to stderr."""
    event = {
        "version": "1.0",
        "task_id": task_id,
        "timestamp": datetime.now(timezone.utc).isoformat(),
        "sequence": seq,
        "event_type": event_type,
        "payload": payload,
    }
    print(json.dumps(event), file=sys.stderr)


if __name__ == "__main__":
    main()
