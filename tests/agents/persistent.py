"""A persistent test agent: serves request lines from stdin until it ends. What it does with a
request depends on the task's description:

- anything else: two progress events, then a response with a structured artifact ``answer``
  (the description in capitals, and the pid of the process)
- ``crash``: writes a line on stderr and exits with code 3
- ``hang``: never answers
- ``wrong_id``: answers with another task_id
- ``late_event``: answers, then writes an event of that task (after the response)
- ``noise``: a line that is not JSON on stdout before its response
- ``exit_after``: answers, then exits

At start it creates a file named after its pid in ``$AGENT_PIDS_DIR`` (when set). With
``AGENT_IGNORE_EOF=1`` it keeps running when stdin ends (until it is stopped).
"""

import json
import os
import sys
import time

pids = os.environ.get("AGENT_PIDS_DIR")
if pids:
    open(os.path.join(pids, str(os.getpid())), "w").close()


def event(task_id, sequence, message):
    line = {
        "version": "1.0",
        "task_id": task_id,
        "timestamp": "2026-01-01T00:00:00Z",
        "sequence": sequence,
        "event_type": "progress",
        "payload": {"message": message},
    }
    sys.stderr.write(json.dumps(line) + "\n")


def respond(task_id, answer):
    response = {
        "version": "1.0",
        "task_id": task_id,
        "status": "completed",
        "artifacts": [
            {"type": "structured", "name": "answer", "data": {"answer": answer, "pid": os.getpid()}}
        ],
        "metrics": {"total_steps": 1},
    }
    sys.stderr.flush()
    sys.stdout.write(json.dumps(response) + "\n")
    sys.stdout.flush()


for served, line in enumerate(sys.stdin, start=1):
    request = json.loads(line)
    task_id, what = request["task_id"], request["task"]["description"]
    if what == "crash":
        sys.stderr.write("about to crash\n")
        sys.stderr.flush()
        sys.exit(3)
    if what == "hang":
        time.sleep(3600)
    event(task_id, 0, "started")
    event(task_id, 1, f"request {served} of this process")
    if what == "noise":
        print("debug: thinking", flush=True)
    respond("not-" + task_id if what == "wrong_id" else task_id, what.upper())
    if what == "late_event":
        event(task_id, 2, "after the response")
        sys.stderr.flush()
    if what == "exit_after":
        sys.exit(0)

if os.environ.get("AGENT_IGNORE_EOF") == "1":
    time.sleep(3600)
