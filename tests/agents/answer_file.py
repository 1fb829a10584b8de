"""A test agent that writes a file of a fixed name, answer.md, holding its request's task_id, waits
a little (so that runs in parallel overlap), reads the file back and answers with it as a file
artifact by its relative path (declaring the SHA-256 of what it wrote, which ATP checks against
the file it reads), and a structured artifact ``seen``: what it read back, its working folder and
the request's ``context.workspace_path`` and ``ATP_AGENT_DIR`` (the agent's own folder).

Where it writes: its working folder, or with ``--in-workspace`` the request's
``context.workspace_path`` (a persistent agent's process stays in one folder for many runs);
``--out NAME`` names the file there (``answer.md`` by default).
It serves request lines from stdin until stdin ends, so it works with and without
``persistent: true``.
"""

import hashlib
import json
import os
import sys
import time

IN_WORKSPACE = "--in-workspace" in sys.argv[1:]
NAME = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv[1:] else "answer.md"

for line in sys.stdin:
    request = json.loads(line)
    task_id = request["task_id"]
    workspace = (request.get("context") or {}).get("workspace_path")
    folder = workspace if IN_WORKSPACE and workspace else "."
    path = os.path.join(folder, NAME)
    with open(path, "w") as handle:
        handle.write(task_id)
    time.sleep(0.3)
    with open(path) as handle:
        read_back = handle.read()
    response = {
        "version": "1.0",
        "task_id": task_id,
        "status": "completed",
        "artifacts": [
            {
                "type": "file",
                "path": NAME,
                "content_hash": "sha256:" + hashlib.sha256(task_id.encode()).hexdigest(),
            },
            {
                "type": "structured",
                "name": "seen",
                "data": {
                    "read_back": read_back,
                    "cwd": os.getcwd(),
                    "workspace_path": workspace,
                    "agent_dir": os.environ.get("ATP_AGENT_DIR"),
                },
            },
        ],
        "metrics": {},
    }
    sys.stdout.write(json.dumps(response) + "\n")
    sys.stdout.flush()
