"""A cli agent written from ATP Protocol 1.0 alone (issue 27), nothing of ATP's own docs: its
stdin/stdout transport, its request and response messages, and its Tool Protocol appendix.

It reads one request line, and for each tool of ``constraints.allowed_tools`` calls, as the
appendix shows::

    POST {context.tools_endpoint}/<tool>
    {"task_id": "...", "input": {...}}          # input: task.input_data[<tool>], else {}

and answers ``completed`` with a structured artifact ``results`` (each tool's ``output``) when
every call was answered ``{"status": "success", ...}``; otherwise ``failed``, with the error.
Standard library only.
"""

import json
import sys
import urllib.error
import urllib.request


def call_tool(endpoint: str, task_id: str, tool: str, tool_input: dict) -> dict:
    body = json.dumps({"task_id": task_id, "input": tool_input}).encode()
    request = urllib.request.Request(
        f"{endpoint}/{tool}", data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as failed:
        return {"status": "error", "error": f"HTTP {failed.code} from {endpoint}/{tool}"}


def main() -> None:
    request = json.loads(sys.stdin.readline())
    task_id = request["task_id"]
    task = request["task"]
    endpoint = (request.get("context") or {}).get("tools_endpoint")
    tools = (request.get("constraints") or {}).get("allowed_tools") or []
    inputs = task.get("input_data") or {}
    results, errors = {}, []
    for tool in tools if endpoint else []:
        answer = call_tool(endpoint, task_id, tool, inputs.get(tool, {}))
        if answer.get("status") == "success":
            results[tool] = answer.get("output")
        else:
            errors.append(f"{tool}: {answer.get('error')}")
    response = {
        "version": "1.0",
        "task_id": task_id,
        "status": "failed" if errors or not endpoint else "completed",
        "artifacts": [{"type": "structured", "name": "results", "data": results}],
        "metrics": {"tool_calls": len(tools) if endpoint else 0, "total_steps": 1},
    }
    if errors or not endpoint:
        response["error"] = "; ".join(errors) or "no context.tools_endpoint in the request"
    print(json.dumps(response), flush=True)


if __name__ == "__main__":
    main()
