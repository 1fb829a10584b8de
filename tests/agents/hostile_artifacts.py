#!/usr/bin/env python3
"""A test agent for the stdin/stdout transport whose artifacts are made to trouble evaluators.

What it does is the task's ``input_data.mode``:

    normal        a markdown report (inline) and a structured result, both ordinary
    long_heading  a markdown report with a 4,000-character heading line full of spaces
    regex_bomb    a text file (inline) of 40 'a' and a '!'
    special       a reference artifact at ``input_data.path``, first made a FIFO
                  (``make: fifo``) or a directory (``make: dir``), or left as it is (a device)
    relative      writes report.md in its working folder and names it by the relative path
    sleep         sends one event, then sleeps forever
"""

import json
import os
import sys
import time

STAMP = "2026-01-01T00:00:00Z"
REPORT = "# Report\n\n## Overview\nThe market.\n\n## Competitors\n1. Microsoft Teams\n"


def respond(task_id, artifacts):
    print(
        json.dumps(
            {
                "version": "1.0",
                "task_id": task_id,
                "status": "completed",
                "artifacts": artifacts,
                "metrics": {"total_steps": 1, "tool_calls": 0},
            }
        ),
        flush=True,
    )


def main():
    request = json.loads(sys.stdin.readline())
    task_id = request["task_id"]
    data = request["task"].get("input_data") or {}
    mode = data["mode"]
    if mode == "normal":
        respond(
            task_id,
            [
                {"type": "file", "path": "report.md", "content": REPORT},
                {"type": "structured", "name": "result", "data": {"competitors": ["Microsoft Teams"]}},
            ],
        )
    elif mode == "long_heading":
        report = "# Intro\n\n# a" + " " * 4000 + "b\n\n## Summary\nShort.\n"
        respond(task_id, [{"type": "file", "path": "report.md", "content": report}])
    elif mode == "regex_bomb":
        respond(task_id, [{"type": "file", "path": "out.txt", "content": "a" * 40 + "!"}])
    elif mode == "special":
        path = data["path"]
        if data.get("make") == "fifo":
            os.mkfifo(path)
        elif data.get("make") == "dir":
            os.makedirs(path)
        respond(task_id, [{"type": "reference", "path": path}])
    elif mode == "relative":
        with open("report.md", "w") as handle:
            handle.write("the agent's own report\n")
        respond(task_id, [{"type": "file", "path": "report.md"}])
    elif mode == "sleep":
        event = {
            "version": "1.0",
            "task_id": task_id,
            "timestamp": STAMP,
            "sequence": 0,
            "event_type": "progress",
            "payload": {"message": "thinking"},
        }
        print(json.dumps(event), file=sys.stderr, flush=True)
        while True:
            time.sleep(3600)
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
