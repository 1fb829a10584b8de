#!/usr/bin/env python3
"""A test agent for the stdin/stdout transport that behaves as its first argument says.

ok                  answer properly, with two progress events
sleep               send two events, then sleep forever
sleep_ignoring_term like sleep, but ignore SIGTERM (must be killed)
crash               write a traceback to stderr and exit 3 without answering
garbage             print something that is not an ATP response
wrong_task_id       answer with another task_id
noisy_stdout        print log lines on stdout before the response
flood N             send N tool_call events, then answer
long_line           write a 2 MiB stderr line, then answer
env                 answer with its environment and working directory as structured data
version2            answer with protocol version 2.0
echo_request        answer with the request it received as structured data
slow SECONDS        send an event, wait, then answer properly
orphan              start a process that keeps stdout and stderr open, answer, exit
pretty              answer with the response pretty-printed over several lines
pretty_after_log    print log lines on stdout, then the pretty-printed response
pretty_invalid      a pretty-printed response with a wrong field
pretty_lingering    the pretty-printed response, then keep running with stdout open
stderr_garbage      write to stderr, print something that is not a response, exit 1
long_stderr         write 20 long stderr lines, exit 1 without answering
secret_stderr       write $AGENT_SECRET to stderr, exit 1 without answering
"""

import json
import os
import signal
import sys
import time

STAMP = "2026-01-01T00:00:00Z"


def event(task_id, sequence, event_type, payload):
    return json.dumps(
        {
            "version": "1.0",
            "task_id": task_id,
            "timestamp": STAMP,
            "sequence": sequence,
            "event_type": event_type,
            "payload": payload,
        }
    )


def answer(task_id, data=None, version="1.0"):
    return json.dumps(
        {
            "version": version,
            "task_id": task_id,
            "status": "completed",
            "artifacts": [{"type": "structured", "name": "result", "data": data or {"ok": True}}],
            "metrics": {"total_steps": 1, "tool_calls": 0},
        }
    )


def main():
    mode = sys.argv[1]
    request = json.loads(sys.stdin.readline())
    task_id = request["task_id"]
    err = sys.stderr
    if mode == "ok":
        print(event(task_id, 0, "progress", {"percentage": 0}), file=err)
        print(event(task_id, 1, "progress", {"percentage": 100}), file=err)
        print(answer(task_id))
    elif mode in ("sleep", "sleep_ignoring_term"):
        if mode == "sleep_ignoring_term":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print(event(task_id, 0, "tool_call", {"tool": "web_search"}), file=err, flush=True)
        print(
            event(task_id, 1, "progress", {"current_step": 1, "message": "thinking hard"}),
            file=err,
            flush=True,
        )
        with open(os.environ.get("AGENT_PID_FILE", os.devnull), "w") as handle:
            handle.write(str(os.getpid()))
        while True:
            time.sleep(3600)
    elif mode == "crash":
        print("Traceback (most recent call last):\n  ...\nRuntimeError: the agent broke", file=err)
        sys.exit(3)
    elif mode == "garbage":
        print("Hello! I am definitely not JSON.")
    elif mode == "wrong_task_id":
        print(answer("11111111-2222-3333-4444-555555555555"))
    elif mode == "noisy_stdout":
        print("starting up")
        print("loading model")
        print(answer(task_id))
    elif mode == "flood":
        count = int(sys.argv[2])
        template = event(task_id, 0, "tool_call", {"tool": "web_search", "input": {"q": "x"}}).replace(
            '"sequence": 0', '"sequence": %d'
        )
        out = err.buffer if hasattr(err, "buffer") else err
        batch = 10000
        for start in range(0, count, batch):
            chunk = "\n".join(template % i for i in range(start, min(start + batch, count))) + "\n"
            out.write(chunk.encode())
        out.flush()
        print(answer(task_id))
    elif mode == "long_line":
        print("x" * (2 * 1024 * 1024), file=err)
        print(answer(task_id))
    elif mode == "env":
        print(answer(task_id, {"cwd": os.getcwd(), "env": dict(os.environ)}))
    elif mode == "version2":
        print(answer(task_id, version="2.0"))
    elif mode == "slow":
        print(event(task_id, 0, "progress", {"percentage": 0}), file=err, flush=True)
        time.sleep(float(sys.argv[2]))
        print(answer(task_id))
    elif mode == "orphan":
        import subprocess

        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        with open(os.environ.get("AGENT_PID_FILE", os.devnull), "w") as handle:
            handle.write(str(child.pid))
        print(answer(task_id), flush=True)
    elif mode in ("pretty", "pretty_after_log", "pretty_lingering"):
        if mode == "pretty_after_log":
            print("starting up")
            print("{not the response")
        print(json.dumps(json.loads(answer(task_id)), indent=2), flush=True)
        if mode == "pretty_lingering":
            time.sleep(60)
    elif mode == "pretty_invalid":
        response = json.loads(answer(task_id))
        response["status"] = 5
        print(json.dumps(response, indent=2))
    elif mode == "stderr_garbage":
        print("loading the model", file=err)
        print("boom: the model is missing", file=err)
        print("Hello! I am definitely not JSON.")
        sys.exit(1)
    elif mode == "long_stderr":
        for i in range(20):
            print(f"line {i}: " + "x" * 60, file=err)
        print("FinalError: the last line", file=err)
        sys.exit(1)
    elif mode == "secret_stderr":
        print("the key is " + os.environ["AGENT_SECRET"] + " and it is wrong", file=err)
        sys.exit(1)
    elif mode == "echo_request":
        print(answer(task_id, {"request": request}))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
