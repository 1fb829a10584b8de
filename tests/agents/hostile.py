#!/usr/bin/env python3
"""A hostile stdin/stdout agent: it answers and runs on, leaves processes behind, or sends bytes
that are not what the protocol allows. Its mode is its first argument, else the task's
description (so one suite can mix modes, and keep `ok` runs next to hostile ones).

    ok                      answer properly
    linger_open             answer, then run on with stdout open
    linger_chatty           answer, then run on with stdout open, logging on stderr
    linger_closed           answer, close stdout, run on
    closed_silent           close stdout without answering, run on
    linger_garbage          write a line that is not a response, run on with stdout open
    linger_wrong_task       answer for another task_id, run on with stdout open
    setsid_holder           start a process in a new session that holds stdout and stderr, answer, exit
    setsid_holder_noenv     the same, the process with an empty environment
    setsid_background       start a process in a new session (output to /dev/null), answer, exit
    double_fork             start a process whose child (holding stdout) outlives it, answer, exit
    tree_ignoring_term      ignore SIGTERM, start a process in a new session that ignores it too,
                            send an event, run on
    sleep_tree              start a process in a new session, send an event, run on
    bad_utf8_response       answer with invalid UTF-8 inside a string
    bad_utf8_event          send a good event, an event with invalid UTF-8, a good event, answer
    deep_response           answer with a response nested 100,000 levels deep
    deep_event              send an event nested 100,000 levels deep, then answer
    long_garbage N          write an N-byte line that is not a response, exit
    duplicate_keys          answer with two `status` keys and two keys in an artifact
    big_duplicate_keys      answer with duplicate keys in a response line over 1 MiB
    write_file              write report.md in the working folder, answer with it as a relative path
    foreign_token           fork twice: the grandchild (an orphan, in the agent's group and session,
                            holding stdout and stderr) sets another ATP_AGENT_TOKEN and sleeps; answer, exit
    foreign_token_quiet     the same, the grandchild with /dev/null as its stdin, stdout and stderr
    hopper N                start a process that leaves the session, ignores SIGTERM, and N times
                            forks and exits (each child sleeps 5 ms first); answer, exit
    hopper_linger N         the same, then send nothing and sleep
    tree_noenv              ignore SIGTERM, start a process in a new session with an empty environment
                            that ignores SIGTERM too, send an event, run on
    many_duplicate_keys N   answer with one object holding N keys twice each
    sleeper                 send nothing, sleep
    secret_cut N            write N bytes of x, $THE_KEY, 1000 bytes of y on stderr, and 0.3 s later
                            the newline; answer

Every process it starts (itself first) is appended to the file $AGENT_PID_FILE, one pid a line
(a hopper: only its first process, whose pid is the id of its session).
"""

import json
import os
import signal
import subprocess
import sys
import time

STAMP = "2026-01-01T00:00:00Z"
SLEEPER = "import signal, sys, time\nif 'ignore' in sys.argv: signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(120)"


def event(task_id, sequence, event_type="progress", payload=None):
    return json.dumps(
        {
            "version": "1.0",
            "task_id": task_id,
            "timestamp": STAMP,
            "sequence": sequence,
            "event_type": event_type,
            "payload": payload or {"percentage": sequence},
        }
    )


def response(task_id, data=None, artifacts=None):
    return json.dumps(
        {
            "version": "1.0",
            "task_id": task_id,
            "status": "completed",
            "artifacts": artifacts
            or [{"type": "structured", "name": "result", "data": data or {"ok": True}}],
            "metrics": {"total_steps": 1},
        }
    )


def record(pid):
    path = os.environ.get("AGENT_PID_FILE")
    if path:
        with open(path, "a") as handle:
            handle.write(f"{pid}\n")


def sleeper(*flags, **options):
    child = subprocess.Popen([sys.executable, "-c", SLEEPER, *flags], **options)
    record(child.pid)
    return child


def foreign_token(quiet):
    """Fork twice; the grandchild, an orphan in the agent's group and session, claims another
    agent's token and sleeps."""
    middle = os.fork()
    if middle == 0:
        grandchild = os.fork()
        if grandchild == 0:
            os.environ["ATP_AGENT_TOKEN"] = "not-yours"
            if quiet:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)"])
        record(grandchild)
        os._exit(0)
    os.waitpid(middle, 0)


def hopper(hops):
    """A process in a session of its own that ignores SIGTERM and keeps changing its pid: it
    forks, the parent exits, the child sleeps 5 ms and does the same, ``hops`` times."""
    first = os.fork()
    if first:
        record(first)
        return
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    for _ in range(hops):
        if os.fork():
            os._exit(0)
        time.sleep(0.005)
    os._exit(0)


def base36(number):
    digits = ""
    while True:
        number, digit = divmod(number, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + digits
        if not number:
            return digits


def forever():
    while True:
        time.sleep(3600)


def main():
    request = json.loads(sys.stdin.readline())
    task_id = request["task_id"]
    mode, *args = sys.argv[1:] or request["task"]["description"].split()
    record(os.getpid())
    out, err = sys.stdout, sys.stderr
    if mode == "ok":
        print(event(task_id, 0), file=err)
        print(response(task_id))
    elif mode in ("linger_open", "linger_chatty"):
        print(response(task_id), flush=True)
        while True:
            time.sleep(0.2)
            if mode == "linger_chatty":
                print("still busy", file=err, flush=True)
    elif mode == "linger_closed":
        print(response(task_id), flush=True)
        os.close(1)
        forever()
    elif mode == "closed_silent":
        os.close(1)
        forever()
    elif mode == "linger_garbage":
        print("this is not a response", flush=True)
        forever()
    elif mode == "linger_wrong_task":
        print(response("11111111-2222-3333-4444-555555555555"), flush=True)
        forever()
    elif mode in ("setsid_holder", "setsid_holder_noenv"):
        env = {} if mode == "setsid_holder_noenv" else None
        sleeper(start_new_session=True, env=env)
        print(response(task_id), flush=True)
    elif mode == "setsid_background":
        sleeper(
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        print(response(task_id), flush=True)
    elif mode == "double_fork":
        # The middle process exits at once: its child, holding stdout, is an orphan.
        code = f"import subprocess, sys\nchild = subprocess.Popen([sys.executable, '-c', {SLEEPER!r}])\nprint(child.pid, file=sys.stderr)"
        middle = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
        record(int(middle.stderr.readline()))
        middle.wait()
        print(response(task_id), flush=True)
    elif mode in ("tree_ignoring_term", "sleep_tree"):
        if mode == "tree_ignoring_term":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            sleeper("ignore", start_new_session=True)
        else:
            sleeper(start_new_session=True)
        print(event(task_id, 0), file=err, flush=True)
        forever()
    elif mode == "bad_utf8_response":
        line = response(task_id, {"text": "@@"}).encode().replace(b"@@", b"caf\xe9")
        out.buffer.write(line + b"\n")
    elif mode == "bad_utf8_event":
        print(event(task_id, 0), file=err, flush=True)
        err.buffer.write(
            event(task_id, 1, "reasoning", {"thought": "@@"}).encode().replace(b"@@", b"\xff\xfe") + b"\n"
        )
        err.buffer.flush()
        print(event(task_id, 2), file=err, flush=True)
        print(response(task_id))
    elif mode == "deep_response":
        depth = 100_000
        line = response(task_id, {"deep": "@@"}).replace('"@@"', "[" * depth + "]" * depth)
        print(line)
    elif mode == "deep_event":
        depth = 100_000
        print(
            event(task_id, 0, "reasoning", {"thought": "x", "extra": "@@"}).replace(
                '"@@"', "[" * depth + "]" * depth
            ),
            file=err,
        )
        print(event(task_id, 1), file=err)
        print(response(task_id))
    elif mode == "long_garbage":
        print("g" * int(args[0]))
    elif mode == "duplicate_keys":
        line = response(task_id, {"a": 1}).replace(
            '"status": "completed"', '"status": "failed", "status": "completed"'
        )
        line = line.replace('"data": {"a": 1}', '"data": {"a": 1, "a": 2}')
        print(line)
    elif mode == "big_duplicate_keys":
        line = response(task_id, {"pad": "x" * (1024 * 1024)})
        print(line.replace('"status": "completed"', '"status": "failed", "status": "completed"'))
    elif mode in ("foreign_token", "foreign_token_quiet"):
        foreign_token(mode == "foreign_token_quiet")
        print(response(task_id), flush=True)
    elif mode in ("hopper", "hopper_linger"):
        hopper(int(args[0]) if args else 3000)
        if mode == "hopper_linger":
            forever()
        print(response(task_id), flush=True)
    elif mode == "tree_noenv":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print(event(task_id, 0), file=err, flush=True)
        sleeper("ignore", start_new_session=True, env={})
        forever()
    elif mode == "many_duplicate_keys":
        count = int(args[0]) if args else 52_000
        keys = ",".join(f'"{base36(i)}":1,"{base36(i)}":2' for i in range(count))  # 0.84 MB for 52,000
        print(response(task_id).replace('"ok": true', keys))
    elif mode == "sleeper":
        forever()
    elif mode == "secret_cut":
        err.write("x" * int(args[0]) + os.environ["THE_KEY"] + "y" * 1000)
        err.flush()
        time.sleep(0.3)
        err.write("\n")
        err.flush()
        print(response(task_id))
    elif mode == "write_file":
        with open("report.md", "w") as handle:
            handle.write("# Report\nwritten by the agent\n")
        print(response(task_id, artifacts=[{"type": "file", "path": "report.md"}]))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
