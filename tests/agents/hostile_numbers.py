#!/usr/bin/env python3
"""A hostile stdin/stdout agent that sends numbers no measurement can have (issue 26). What it
sends is the task's description, when that is a JSON object (so one suite mixes hostile tests
with fine ones); any other description is an honest answer.

    {"events": [["llm_request", {"input_tokens": 1000...}], ...],  sent first, on stderr
     "metrics": {"total_steps": 2000000000000000, ...}}           the response's metrics

Numbers are passed through as JSON has them: an integer of 401 digits stays one.
"""

import json
import sys

STAMP = "2026-01-01T00:00:00Z"


def main():
    request = json.loads(sys.stdin.readline())
    task_id = request["task_id"]
    description = request["task"]["description"]
    spec = json.loads(description) if description.startswith("{") else {}
    for sequence, (event_type, payload) in enumerate(spec.get("events", [])):
        line = {
            "version": "1.0",
            "task_id": task_id,
            "timestamp": STAMP,
            "sequence": sequence,
            "event_type": event_type,
            "payload": payload,
        }
        print(json.dumps(line), file=sys.stderr, flush=True)
    response = {
        "version": "1.0",
        "task_id": task_id,
        "status": "completed",
        "artifacts": [{"type": "structured", "name": "result", "data": {"ok": True}}],
        "metrics": spec.get("metrics", {"total_steps": 1, "total_tokens": 10}),
    }
    print(json.dumps(response))


if __name__ == "__main__":
    main()
