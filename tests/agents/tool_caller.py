"""A cli agent (stdin/stdout) that calls the tools its task names through the Tool Protocol.

The task's ``input_data``::

    {"calls": [{"tool": "web_search", "input": {"q": "x"}}, ...],   # made in order
     "report_events": false,   # also emit a tool_call event of its own per call (on stderr)
     "raw_bodies": {"tool_name": "text"},   # send this text as the body instead (malformed JSON)
     "task_id": "other",       # put this task_id in the bodies instead of the request's
     "older_spelling": false}  # call {tools_endpoint}/tools/<tool>, as agents written before issue 27 do

Each call is ``POST {context.tools_endpoint}/<tool>`` with ``{"task_id", "input"}``; the
structured artifact ``calls`` lists what came back: ``{tool, http_status, body}`` per call
(``body`` decoded when it is JSON, else the text). Standard library only.
"""

import json
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone


def call(endpoint: str, tool: str, body: bytes, older_spelling: bool = False) -> dict:
    url = f"{endpoint}/tools/{tool}" if older_spelling else f"{endpoint}/{tool}"
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            status, text = reply.status, reply.read()
    except urllib.error.HTTPError as failed:
        status, text = failed.code, failed.read()
    try:
        decoded = json.loads(text)
    except ValueError:
        decoded = text.decode("utf-8", "replace")
    return {"tool": tool, "http_status": status, "body": decoded}


def emit(task_id: str, sequence: int, payload: dict) -> None:
    event = {
        "version": "1.0",
        "task_id": task_id,
        "timestamp": datetime.now(timezone.utc).isoformat(),
        "sequence": sequence,
        "event_type": "tool_call",
        "payload": payload,
    }
    print(json.dumps(event), file=sys.stderr, flush=True)


def main() -> None:
    request = json.loads(sys.stdin.readline())
    task_id = request["task_id"]
    data = (request.get("task") or {}).get("input_data") or {}
    endpoint = (request.get("context") or {}).get("tools_endpoint")
    results = []
    if endpoint:
        for sequence, planned in enumerate(data.get("calls", [])):
            tool = planned["tool"]
            raw = data.get("raw_bodies", {}).get(tool)
            body = (
                raw.encode()
                if raw is not None
                else json.dumps(
                    {"task_id": data.get("task_id", task_id), "input": planned.get("input", {})}
                ).encode()
            )
            started = time.perf_counter()
            got = call(endpoint, tool, body, bool(data.get("older_spelling")))
            results.append(got)
            if data.get("report_events"):
                answer = got["body"] if isinstance(got["body"], dict) else {}
                emit(
                    task_id,
                    sequence,
                    {
                        "tool": tool,
                        "input": planned.get("input", {}),
                        "output": answer.get("output"),
                        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                        "status": answer.get("status", "error"),
                    },
                )
    response = {
        "version": "1.0",
        "task_id": task_id,
        "status": "completed",
        "artifacts": [
            {"type": "structured", "name": "calls", "data": {"endpoint": endpoint, "calls": results}}
        ],
        "metrics": {"tool_calls": len(results)},
    }
    print(json.dumps(response), flush=True)


if __name__ == "__main__":
    main()
