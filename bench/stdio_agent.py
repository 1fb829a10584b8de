"""An instant stdio agent for the benchmarks: answers every request line on stdin at once, until
stdin ends (so it serves one request per process, or many with ``persistent: true``)."""

import json
import sys

for line in sys.stdin:
    request = json.loads(line)
    response = {
        "version": "1.0",
        "task_id": request["task_id"],
        "status": "completed",
        "artifacts": [{"type": "structured", "name": "result", "data": {"answer": 42}}],
        "metrics": {"total_steps": 1},
    }
    sys.stdout.write(json.dumps(response) + "\n")
    sys.stdout.flush()
