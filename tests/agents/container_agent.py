"""An agent for the container tests, run in a busybox container by the host's interpreter
(mounted read-only). Its task description says what to do:

    work        two events, a file written into the workspace (listed by path only), answer
    unlisted    write report.md into the workspace and answer with no artifacts at all
    oom         allocate memory until the container's limit kills it
    network     try to open a TCP connection to ATP_TEST_HOST:ATP_TEST_PORT; answer with what happened
    hang        one event, then sleep (the test's timeout stops it)
    canary      print $API_TOKEN on stdout and stderr, in an event and in an artifact
    whoami      answer with its uid and whether / is writable
    escape      list artifacts that lead out of the workspace: by .., and by a link it makes
    gateway     call the mock tool, and try ATP_TEST_PORT on the tool endpoint's host
    badname     write a file whose name is not UTF-8, and good.txt
    sparse      write a 2 GiB sparse file
"""

import json
import os
import socket
import sys
import time
import urllib.request


def event(task_id, sequence, event_type, payload):
    print(
        json.dumps(
            {
                "version": "1.0",
                "task_id": task_id,
                "timestamp": "2026-01-01T00:00:00Z",
                "sequence": sequence,
                "event_type": event_type,
                "payload": payload,
            }
        ),
        file=sys.stderr,
        flush=True,
    )


def answer(task_id, artifacts):
    print(
        json.dumps(
            {
                "version": "1.0",
                "task_id": task_id,
                "status": "completed",
                "artifacts": artifacts,
                "metrics": {},
            }
        ),
        flush=True,
    )


def main():
    request = json.loads(sys.stdin.readline())
    task_id = request["task_id"]
    what = request["task"]["description"]
    workspace = (request.get("context") or {}).get("workspace_path") or os.getcwd()
    if what == "work":
        event(task_id, 0, "progress", {"message": "starting", "percentage": 0})
        event(
            task_id,
            1,
            "tool_call",
            {"tool": "writer", "input": {"path": "out/result.txt"}, "status": "success"},
        )
        os.makedirs(os.path.join(workspace, "out"), exist_ok=True)
        with open(os.path.join(workspace, "out", "result.txt"), "w") as f:
            f.write("written inside the container\n")
        answer(task_id, [{"type": "file", "path": "out/result.txt"}])
    elif what == "unlisted":
        with open(os.path.join(workspace, "report.md"), "w") as f:
            f.write("# Report\n\nnothing listed\n")
        answer(task_id, [])
    elif what == "oom":
        event(task_id, 0, "progress", {"message": "allocating"})
        hoard = []
        while True:
            hoard.append(bytearray(8 * 1024 * 1024))
    elif what == "network":
        try:
            socket.create_connection(
                (os.environ["ATP_TEST_HOST"], int(os.environ["ATP_TEST_PORT"])), timeout=3
            ).close()
            outcome = "connected"
        except OSError as exc:
            outcome = f"refused: {exc}"
        answer(task_id, [{"type": "structured", "name": "network", "data": {"outcome": outcome}}])
    elif what == "hang":
        event(task_id, 0, "progress", {"message": "about to hang"})
        time.sleep(600)
    elif what == "canary":
        secret = os.environ["API_TOKEN"]
        print(f"log line with {secret}", file=sys.stderr, flush=True)
        event(task_id, 0, "reasoning", {"thought": f"the token is {secret}"})
        print(f"stdout noise {secret}", flush=True)
        answer(task_id, [{"type": "file", "path": "secret.txt", "content": f"token={secret}"}])
    elif what == "escape":
        os.symlink("/etc/passwd", os.path.join(workspace, "link"))
        with open(os.path.join(workspace, "fine.txt"), "w") as f:
            f.write("inside\n")
        answer(
            task_id,
            [
                {"type": "file", "path": "../outside.txt"},
                {"type": "file", "path": "link"},
                {"type": "file", "path": "/etc/hostname"},
            ],
        )
    elif what == "gateway":
        endpoint = request["context"]["tools_endpoint"]
        host = endpoint.split("//", 1)[1].split(":", 1)[0]
        try:
            socket.create_connection((host, int(os.environ["ATP_TEST_PORT"])), timeout=3).close()
            probe = "connected"
        except OSError as exc:
            probe = f"refused: {exc}"
        call = urllib.request.Request(
            f"{endpoint}/lookup",
            data=json.dumps({"task_id": task_id, "input": {}}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(call, timeout=10) as reply:
            status = reply.status
        answer(
            task_id,
            [{"type": "structured", "name": "gateway", "data": {"probe": probe, "tool_status": status}}],
        )
    elif what == "badname":
        with open(os.fsencode(workspace) + b"/bad\xffname.txt", "w") as f:
            f.write("x")
        with open(os.path.join(workspace, "good.txt"), "w") as f:
            f.write("fine\n")
        answer(task_id, [])
    elif what == "sparse":
        with open(os.path.join(workspace, "sparse.bin"), "wb") as f:
            f.truncate(2 * 1024**3)
        answer(task_id, [])
    elif what == "whoami":
        try:
            open("/written-to-root", "w").close()
            root = "writable"
        except OSError:
            root = "read-only"
        answer(task_id, [{"type": "structured", "name": "who", "data": {"uid": os.getuid(), "root": root}}])


main()
