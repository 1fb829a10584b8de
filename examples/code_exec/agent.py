#!/usr/bin/env python3
"""A small coding agent for the code-execution example: it "writes" a statistics module.

It speaks the stdin/stdout transport, like the quick start's agents (examples/agents): the
request is one JSON line on stdin, events are JSON lines on stderr, the response is one JSON
line on stdout. Instead of asking an LLM for code it has two answers ready: a correct
`solution.py` (`mean` and `median`), or, when `input_data.variant` is "buggy", one whose
`median` forgets to sort and which imports what it does not use, to show the `pytest`, `lint`
and `custom_command` checks failing. The code goes back as a file artifact with inline
content. A request it cannot serve (malformed, or of another protocol major version) is answered
with status "failed" and error_code INVALID_REQUEST. Standard library only.
"""

import json
import sys
from datetime import datetime, timezone

SOLUTION = '''"""Descriptive statistics."""


def mean(values):
    """The arithmetic mean of a non-empty sequence of numbers."""
    if not values:
        raise ValueError("mean of no values")
    return sum(values) / len(values)


def median(values):
    """The middle value of a non-empty sequence of numbers (with an even number
    of them, the mean of the two in the middle)."""
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
'''

BUGGY = '''"""Descriptive statistics."""
import os


def mean(values):
    if not values:
        raise ValueError("mean of no values")
    return sum(values) / len(values)


def median(values):
    middle = len(values) // 2
    if len(values) % 2:
        return values[middle]
    return (values[middle - 1] + values[middle]) / 2
'''


def emit(task_id, sequence, event_type, payload):
    event = {
        "version": "1.0",
        "task_id": task_id,
        "timestamp": datetime.now(timezone.utc).isoformat(),
        "sequence": sequence,
        "event_type": event_type,
        "payload": payload,
    }
    print(json.dumps(event), file=sys.stderr, flush=True)


def run(request):
    task_id = request["task_id"]
    variant = (request["task"].get("input_data") or {}).get("variant", "good")
    code = BUGGY if variant == "buggy" else SOLUTION
    emit(
        task_id,
        0,
        "progress",
        {"current_step": 1, "total_steps": 2, "percentage": 0, "message": "writing solution.py"},
    )
    emit(
        task_id,
        1,
        "tool_call",
        {
            "tool": "file_write",
            "input": {"path": "solution.py"},
            "output": {"bytes": len(code)},
            "status": "success",
        },
    )
    emit(
        task_id,
        2,
        "artifact_created",
        {"artifact_type": "file", "path": "solution.py", "size_bytes": len(code.encode())},
    )
    emit(task_id, 3, "progress", {"current_step": 2, "total_steps": 2, "percentage": 100, "message": "done"})
    return {
        "version": "1.0",
        "task_id": task_id,
        "status": "completed",
        "artifacts": [
            {"type": "file", "path": "solution.py", "content_type": "text/x-python", "content": code}
        ],
        "metrics": {"total_steps": 2, "tool_calls": 1, "llm_calls": 0, "total_tokens": 0},
    }


def request_problem(request):
    """Why `request` cannot be served, or None."""
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


def main():
    try:
        request = json.loads(sys.stdin.readline())
    except ValueError:
        request = None
    problem = request_problem(request)
    if problem is None:
        response = run(request)
    else:
        task_id = request.get("task_id") if isinstance(request, dict) else None
        response = {
            "version": "1.0",
            "task_id": task_id if isinstance(task_id, str) else "",
            "status": "failed",
            "artifacts": [],
            "metrics": {},
            "error": problem,
            "error_code": "INVALID_REQUEST",
        }
    print(json.dumps(response), flush=True)


if __name__ == "__main__":
    main()
