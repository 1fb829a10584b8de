#!/usr/bin/env python3
"""A native ATP agent (ATP Protocol 1.0 over stdin/stdout, standard library only) that answers
"What is A + B?" with its one tool, ``add``: the `native` agent of examples/frameworks/suite.yaml.

It has no language model: it reads the two numbers from the task, calls its tool (a function
here; an agent's tool may be anything), reports the call as a ``tool_call`` event on stderr,
and answers with the sum in ``answer.txt`` (a file artifact, its content inline). A task that
asks for no sum is answered with a note, without the tool.

    echo '{"version": "1.0", "task_id": "t1", "task": {"description": "What is 17 + 25?"}}' \\
        | python3 examples/frameworks/native_calculator.py
"""

from __future__ import annotations

import json
import re
import sys
import time
from datetime import datetime, timezone
from typing import Any

SUM = re.compile(r"(-?\d+(?:\.\d+)?)\s*\+\s*(-?\d+(?:\.\d+)?)")


def add(a: float, b: float) -> float:
    """The tool."""
    return a + b


def number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def emit(task_id: str, sequence: int, event_type: str, payload: dict[str, Any]) -> None:
    event = {
        "version": "1.0",
        "task_id": task_id,
        "timestamp": datetime.now(timezone.utc).isoformat(),
        "sequence": sequence,
        "event_type": event_type,
        "payload": payload,
    }
    print(json.dumps(event), file=sys.stderr, flush=True)


def handle(request: dict[str, Any]) -> dict[str, Any]:
    task_id = request["task_id"]
    started = time.monotonic()
    reply: dict[str, Any] = {"version": "1.0", "task_id": task_id}
    found = SUM.search(request["task"]["description"])
    if found is None:  # nothing to add (atp validate's probe, say): an answer all the same
        note = "I add two numbers: ask 'What is A + B?'\n"
        return {
            **reply,
            "status": "completed",
            "metrics": {"total_steps": 1, "tool_calls": 0},
            "artifacts": [
                {"type": "file", "path": "answer.txt", "content": note, "content_type": "text/plain"}
            ],
        }
    a, b = number(float(found.group(1))), number(float(found.group(2)))
    called = time.monotonic()
    total = number(add(a, b))
    emit(
        task_id,
        0,
        "tool_call",
        {
            "tool": "add",
            "input": {"a": a, "b": b},
            "output": total,
            "duration_ms": (time.monotonic() - called) * 1000,
            "status": "success",
        },
    )
    return {
        **reply,
        "status": "completed",
        "artifacts": [
            {"type": "file", "path": "answer.txt", "content": f"{total}\n", "content_type": "text/plain"}
        ],
        "metrics": {"total_steps": 1, "tool_calls": 1, "wall_time_seconds": time.monotonic() - started},
    }


def main() -> None:
    try:
        request = json.loads(sys.stdin.readline())
    except ValueError:
        request = None
    task = request.get("task") if isinstance(request, dict) else None
    if (
        not isinstance(request, dict)
        or not str(request.get("version", "")).startswith("1.")
        or not isinstance(request.get("task_id"), str)
        or not isinstance(task, dict)
        or not isinstance(task.get("description"), str)
        or not task["description"].strip()
    ):
        task_id = request.get("task_id") if isinstance(request, dict) else None
        print(
            json.dumps(
                {
                    "version": "1.0",
                    "task_id": task_id if isinstance(task_id, str) else "",
                    "status": "failed",
                    "artifacts": [],
                    "metrics": {},
                    "error": "not an ATP 1.x request with a task",
                    "error_code": "INVALID_REQUEST",
                }
            )
        )
        return
    print(json.dumps(handle(request)), flush=True)


if __name__ == "__main__":
    main()
