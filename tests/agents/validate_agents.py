"""Agents for `atp validate`'s tests: a correct stdin/stdout agent and ways of getting ATP wrong.

    python validate_agents.py MODE

MODE is one of:

- ``good``: answers a valid request (two progress events, a structured result), refuses a
  malformed one and one of another major version (status failed, error_code INVALID_REQUEST);
- ``no_task_id``: as good, but its responses have no task_id;
- ``accepts_v2``: checks the request's fields but not its version;
- ``hangs_on_malformed``: never answers a request with an empty description;
- ``hangs``: never answers anything (it writes its pid to $AGENT_PID_FILE first);
- ``out_of_order``: its events are numbered 0, 2, 1;
- ``fails``: answers every valid request with status failed, its error quoting $API_TOKEN and
  holding an escape sequence.

``run`` is the same good agent as a function, for the ``python`` adapter.
"""

import json
import os
import sys
import time
from datetime import datetime, timezone


def problem_of(request, check_version=True):
    """Why the request cannot be served, or None."""
    if not isinstance(request, dict):
        return "the request is not a JSON object"
    version = request.get("version")
    if check_version and (not isinstance(version, str) or version.split(".")[0] != "1"):
        return f"protocol version {version!r} is not supported"
    task = request.get("task")
    if not isinstance(task, dict) or not task.get("description"):
        return "task.description is missing or empty"
    return None


def event(task_id, sequence, message):
    return {
        "version": "1.0",
        "task_id": task_id,
        "timestamp": datetime.now(timezone.utc).isoformat(),
        "sequence": sequence,
        "event_type": "progress",
        "payload": {"message": message},
    }


def respond(mode, request):
    task_id = request.get("task_id") if isinstance(request, dict) else ""
    problem = problem_of(request, check_version=mode != "accepts_v2")
    if problem is not None and mode == "hangs_on_malformed" and "description" in problem:
        time.sleep(3600)
    if problem is not None:
        response = {"status": "failed", "error": problem, "error_code": "INVALID_REQUEST"}
    else:
        sequences = [0, 2, 1] if mode == "out_of_order" else [0, 1, 2]
        for sequence in sequences:
            print(json.dumps(event(task_id, sequence, f"step {sequence}")), file=sys.stderr, flush=True)
        if mode == "fails":
            token = os.environ.get("API_TOKEN", "")
            response = {"status": "failed", "error": f"the service refused token {token} \x1b[2J"}
        else:
            response = {
                "status": "completed",
                "artifacts": [{"type": "structured", "name": "result", "data": {"text": "hello"}}],
            }
    response = {"version": "1.0", "task_id": task_id, "artifacts": [], "metrics": {}, **response}
    if mode == "no_task_id":
        del response["task_id"]
    return response


def run(request, emit):
    """The good agent for the ``python`` adapter (which hands it only requests that decode)."""
    emit({"event_type": "progress", "payload": {"message": "working"}})
    return {
        "status": "completed",
        "artifacts": [{"type": "structured", "name": "result", "data": {"text": "hello"}}],
        "metrics": {},
    }


def main():
    mode = sys.argv[1]
    if mode == "hangs":
        with open(os.environ["AGENT_PID_FILE"], "w") as handle:
            handle.write(str(os.getpid()))
        time.sleep(3600)
    try:
        request = json.loads(sys.stdin.readline())
    except ValueError:
        request = None
    print(json.dumps(respond(mode, request)), flush=True)


if __name__ == "__main__":
    main()
