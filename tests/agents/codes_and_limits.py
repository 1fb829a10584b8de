#!/usr/bin/env python3
"""A test agent for the stdin/stdout transport that fails with the protocol's error codes, or
keeps working past its task's limits until it is stopped.

What it does is the task's ``input_data.mode``:

    tool_not_found  status failed, error_code TOOL_NOT_FOUND, error_details {tool,
                    available_tools} and a trace_id (the specification's own example)
    llm_error       status failed, error_code LLM_ERROR
    complete        status completed
    steps           a progress event for step 1, 2, 3, ... every 0.1 s, for ever
    tokens          an llm_request event of 1000 tokens every 0.1 s, for ever
    cost            an llm_request event costing $0.30 every 0.1 s, for ever

The working modes append ``<what> <n> <time.time()>`` to a file in the working folder
before each event (``beats-<mode>.log``), so a test can see when the agent was stopped.
"""

import json
import sys
import time
from datetime import datetime, timezone

request = json.loads(sys.stdin.readline())
task_id = request["task_id"]
mode = request["task"]["input_data"]["mode"]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def respond(status: str, **fields: object) -> None:
    send({"version": "1.0", "task_id": task_id, "status": status, "artifacts": [], "metrics": {}, **fields})


def event(sequence: int, event_type: str, payload: dict) -> None:
    """An event, on stderr (the cli transport's event stream)."""
    line = json.dumps(
        {
            "version": "1.0",
            "task_id": task_id,
            "timestamp": datetime.now(timezone.utc).isoformat(),
            "sequence": sequence,
            "event_type": event_type,
            "payload": payload,
        }
    )
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


if mode == "tool_not_found":
    respond(
        "failed",
        error="Tool 'database_query' not available",
        error_code="TOOL_NOT_FOUND",
        error_details={"tool": "database_query", "available_tools": ["web_search", "file_write"]},
        trace_id="trace_abc123",
    )
elif mode == "llm_error":
    respond("failed", error="the model provider answered 529 overloaded", error_code="LLM_ERROR")
elif mode == "complete":
    respond("completed")
else:
    with open(f"beats-{mode}.log", "a", encoding="utf-8") as beats:
        n = 0
        while True:
            n += 1
            beats.write(f"{mode} {n} {time.time()}\n")
            beats.flush()
            if mode == "steps":
                event(n, "progress", {"current_step": n, "message": f"step {n}"})
            elif mode == "tokens":
                event(n, "llm_request", {"model": "m", "input_tokens": 600, "output_tokens": 400})
            else:
                event(
                    n, "llm_request", {"model": "m", "input_tokens": 1, "output_tokens": 1, "cost_usd": 0.3}
                )
            time.sleep(0.1)
