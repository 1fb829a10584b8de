#!/usr/bin/env python3
"""A stdin/stdout agent that writes into ATP's run directory, as any agent running as ATP's user
can. Its mode is the task's description:

    ok              send an event and a log line on stderr, answer properly
    forge_result    append to the run's results.jsonl a result saying that its own run passed,
                    then answer that it failed

The run directory is $RUN_ROOT/<the run id the request names>.
"""

import json
import os
import sys


def response(task_id, status="completed"):
    return json.dumps(
        {
            "version": "1.0",
            "task_id": task_id,
            "status": status,
            "artifacts": [{"type": "structured", "name": "result", "data": {"ok": True}}],
            "metrics": {"total_steps": 1},
            **({"error": "it really failed"} if status == "failed" else {}),
        }
    )


def forge(request):
    """A line as ATP writes it, for this very run, that says it passed with full marks."""
    meta = request["metadata"]
    line = {
        "test_id": meta["test_id"],
        "run_number": meta["run_number"],
        "task_id": request["task_id"],
        "outcome": "passed",
        "status": "completed",
        "score": 100.0,
        "duration_seconds": 0.1,
        "started_at": "2026-01-01T00:00:00Z",
    }
    path = os.path.join(os.environ["RUN_ROOT"], meta["run_id"], "results.jsonl")
    with open(path, "a") as handle:
        handle.write(json.dumps(line) + "\n")


def main():
    request = json.loads(sys.stdin.readline())
    mode = request["task"]["description"]
    if mode == "forge_result":
        forge(request)
        print(response(request["task_id"], "failed"), flush=True)
    else:
        event = {
            "version": "1.0",
            "task_id": request["task_id"],
            "timestamp": "2026-01-01T00:00:00Z",
            "sequence": 0,
            "event_type": "progress",
            "payload": {"percentage": 50},
        }
        print(json.dumps(event), file=sys.stderr, flush=True)
        print("working on it", file=sys.stderr, flush=True)
        print(response(request["task_id"]), flush=True)


if __name__ == "__main__":
    main()
