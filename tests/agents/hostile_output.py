#!/usr/bin/env python3
"""A hostile stdin/stdout agent: what it sends tries to fool, leak through or break ATP's output.

escapes             fail with terminal escape codes in its error and its log
secrets             send the secret of $SECRET_VALUE in events and its response, spelled
                    with JSON \\u escapes
negative_metrics    answer with negative and huge metrics and negative token counts in events
secret_at_cut       write a non-response whose 200-character preview would end inside the
                    secret of $SECRET_VALUE
plant_fifo          in run 1, put a FIFO where ATP will write the log of run 2
ok                  answer properly
"""

import json
import os
import sys

STAMP = "2026-01-01T00:00:00Z"


def event(task_id, sequence, event_type, payload, **dumps):
    return json.dumps(
        {
            "version": "1.0",
            "task_id": task_id,
            "timestamp": STAMP,
            "sequence": sequence,
            "event_type": event_type,
            "payload": payload,
        },
        **dumps,
    )


def response(task_id, status="completed", error=None, metrics=None, data=None, **dumps):
    message = {
        "version": "1.0",
        "task_id": task_id,
        "status": status,
        "artifacts": [{"type": "structured", "name": "result", "data": data or {"ok": True}}],
        "metrics": metrics or {},
    }
    if error is not None:
        message["error"] = error
    return json.dumps(message, **dumps)


def main():
    mode = sys.argv[1]
    request = json.loads(sys.stdin.readline())
    task_id = request["task_id"]
    workspace = (request.get("context") or {}).get("workspace_path")
    err = sys.stderr
    if mode == "escapes":
        print("\x1b[2J\x1b[H\x1b]0;pwned\x07 ✓ everything passed", file=err)
        print(response(task_id, status="failed", error="\x1b[2J\x1b[1;32m✓ all 100 tests passed\x1b[0m\r"))
    elif mode == "secrets":
        secret = os.environ["SECRET_VALUE"]
        escaped = "".join(f"\\u{ord(c):04x}" for c in secret)
        line = event(task_id, 0, "tool_call", {"tool": "web_search", "input": {"key": "@@"}}).replace(
            "@@", escaped
        )
        print(line, file=err)
        print(
            event(task_id, 1, "reasoning", {"thought": f"the key is {secret}"}), file=err
        )  # \u escapes for non-ASCII
        print(f"log line with {secret}", file=err)
        print(response(task_id, error=f"also {secret}", data={"key": secret}))
    elif mode == "negative_metrics":
        print(
            event(task_id, 0, "llm_request", {"model": "m", "input_tokens": -1000000, "output_tokens": -1}),
            file=err,
        )
        print(
            response(
                task_id,
                metrics={
                    "total_tokens": -5,
                    "cost_usd": -1.5,
                    "input_tokens": -3,
                    "wall_time_seconds": 1e308,
                },
            )
        )
    elif mode == "secret_at_cut":
        print("x" * 190 + os.environ["SECRET_VALUE"] + "y" * 50)
    elif mode == "plant_fifo":
        import glob

        # (run in a folder of its own, workspaces/t.1 of the run directory; else in ATP's folder)
        run_dir = os.path.dirname(os.path.dirname(workspace)) if workspace else None
        marker = os.path.join(run_dir or ".", "planted")
        if not os.path.exists(marker):
            with open(marker, "w"):
                pass
            run_dir = run_dir or sorted(glob.glob(".atp/runs/*"), key=os.path.getmtime)[-1]
            os.makedirs(run_dir + "/logs", exist_ok=True)
            os.mkfifo(run_dir + "/logs/t.2.log")
        print("a log line", file=err)
        print(response(task_id))
    elif mode == "ok":
        print(response(task_id))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
