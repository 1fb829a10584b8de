#!/usr/bin/env python3
"""An ATP agent that sends N tool_call events on stderr as fast as it can, then answers.

python3 event_agent.py N
"""

import json
import sys


def main() -> None:
    count = int(sys.argv[1])
    task_id = json.loads(sys.stdin.readline())["task_id"]
    head = '{"version":"1.0","task_id":"%s","timestamp":"2026-01-01T00:00:00.000000Z","sequence":' % task_id
    tail = ',"event_type":"tool_call","payload":{"tool":"web_search","input":{"query":"q"},"duration_ms":1.5,"status":"success"}}\n'
    out = sys.stderr.buffer
    batch = 20000
    for start in range(0, count, batch):
        out.write("".join(head + str(i) + tail for i in range(start, min(start + batch, count))).encode())
    out.flush()
    print(
        json.dumps(
            {
                "version": "1.0",
                "task_id": task_id,
                "status": "completed",
                "artifacts": [],
                "metrics": {"tool_calls": count},
            }
        )
    )


if __name__ == "__main__":
    main()
