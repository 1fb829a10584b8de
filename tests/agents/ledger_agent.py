#!/usr/bin/env python3
"""A test agent (stdin/stdout transport) that writes each task it gets to a ledger file, so that
tests can count exactly which runs were made. It behaves as the task's ``input_data`` says:

    outcome   "pass" (the default), "fail" (answers status failed) or "flaky" (fails its odd
              run numbers, passes the even ones)
    sleep     seconds to take before answering
    cost_usd  the cost it reports (also ``tokens``: the tokens it reports)
    events    how many progress events to send (on stderr) before answering

The ledger is the file named by $LEDGER: one line "<test_id> <run_number>" per task, written
when the task arrives.
"""

import json
import os
import sys
import time


def main() -> None:
    request = json.loads(sys.stdin.readline())
    meta = request.get("metadata") or {}
    data = (request.get("task") or {}).get("input_data") or {}
    with open(os.environ["LEDGER"], "a") as ledger:
        ledger.write(f"{meta.get('test_id')} {meta.get('run_number')}\n")
    for sequence in range(int(data.get("events", 0))):
        event = {
            "version": "1.0", "task_id": request["task_id"], "timestamp": "2026-01-01T00:00:00Z",
            "sequence": sequence, "event_type": "progress", "payload": {"message": f"step {sequence}"},
        }  # fmt: skip
        sys.stderr.write(json.dumps(event) + "\n")
    sys.stderr.flush()
    time.sleep(float(data.get("sleep", 0)))
    outcome = data.get("outcome", "pass")
    if outcome == "flaky":
        outcome = "fail" if int(meta.get("run_number", 1)) % 2 else "pass"
    metrics = {"total_steps": 1}
    if "cost_usd" in data:
        metrics["cost_usd"] = data["cost_usd"]
    if "tokens" in data:
        metrics["total_tokens"] = data["tokens"]
    response = {
        "version": "1.0",
        "task_id": request["task_id"],
        "status": "completed" if outcome == "pass" else "failed",
        "artifacts": [{"type": "structured", "name": "result", "data": {"ok": outcome == "pass"}}],
        "metrics": metrics,
    }
    if outcome != "pass":
        response["error"] = "the task asked this agent to fail"
    sys.stdout.write(json.dumps(response) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
