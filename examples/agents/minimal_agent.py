#!/usr/bin/env python3
"""Minimal ATP-compatible agent."""

import json
import sys
from datetime import datetime, timezone


def main():
    # Read request from stdin
    request_line = sys.stdin.readline()
    request = json.loads(request_line)

    task_id = request["task_id"]
    description = request["task"]["description"]

    # Emit start event to stderr
    emit_event(task_id, 0, "progress", {
        "message": "Starting task",
        "percentage": 0
    })

    # Do actual work here...
    result = f"Processed: {description}"

    # Emit completion event
    emit_event(task_id, 1, "progress", {
        "message": "Task completed",
        "percentage": 100
    })

    # Write response to stdout
    response = {
        "version": "1.0",
        "task_id": task_id,
        "status": "completed",
        "artifacts": [
            {
                "type": "structured",
                "name": "result",
                "data": {"output": result}
            }
        ],
        "metrics": {
            "total_tokens": 0,
            "total_steps": 1,
            "tool_calls": 0,
            "llm_calls": 0,
            "wall_time_seconds": 1.0
        }
    }

    print(json.dumps(response))

def emit_event(task_id: str, seq: int, event_type: str, payload: dict):
    """Emit event to stderr."""
    event = {
        "version": "1.0",
        "task_id": task_id,
        "timestamp": datetime.now(timezone.utc).isoformat(),
        "sequence": seq,
        "event_type": event_type,
        "payload": payload
    }
    print(json.dumps(event), file=sys.stderr)

if __name__ == "__main__":
    main()
