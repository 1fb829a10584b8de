#!/usr/bin/env python3
"""A test agent for the stdin/stdout transport that reports the tool calls its task asks for.

The task's ``input_data.calls`` is a list of ``{tool, input}``: the agent sends one ``tool_call``
event per item, in order, on stderr (with ``status: success`` and a small ``output``), then
answers with a structured result naming the tools it called.
"""

import json
import sys

STAMP = "2026-01-01T00:00:00Z"


def event(task_id, sequence, payload):
    return json.dumps(
        {
            "version": "1.0",
            "task_id": task_id,
            "timestamp": STAMP,
            "sequence": sequence,
            "event_type": "tool_call",
            "payload": payload,
        }
    )


def main():
    request = json.loads(sys.stdin.readline())
    task_id = request["task_id"]
    calls = (request["task"].get("input_data") or {}).get("calls") or []
    for sequence, call in enumerate(calls):
        payload = {
            "tool": call["tool"],
            "input": call.get("input"),
            "output": {"ok": True},
            "status": "success",
        }
        print(event(task_id, sequence, payload), file=sys.stderr, flush=True)
    response = {
        "version": "1.0",
        "task_id": task_id,
        "status": "completed",
        "artifacts": [
            {"type": "structured", "name": "result", "data": {"tools": [c["tool"] for c in calls]}}
        ],
        "metrics": {"total_steps": 1, "tool_calls": len(calls)},
    }
    print(json.dumps(response), flush=True)


if __name__ == "__main__":
    main()
