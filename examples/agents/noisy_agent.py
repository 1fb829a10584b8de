#!/usr/bin/env python3
"""An agent whose quality is random, as an LLM agent's is: for trying ATP's statistics.

Each run reports a number of steps drawn from a normal distribution (mean ``--steps``, standard
deviation ``--spread``); a suite that scores efficiency against ``max_steps: 100`` gives it a
score of about ``100 - steps``. The draws are seeded by ``--seed``, the test id and the run
number, so a run of a suite is reproducible; a larger ``--steps`` is a worse version.

    atp test --suite=examples/statistics/suite.yaml --agent=noisy
"""

import argparse
import json
import random
import sys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=float, default=20.0, help="mean steps per run (higher is worse)")
    parser.add_argument("--spread", type=float, default=5.0, help="standard deviation of the steps")
    parser.add_argument("--seed", default="0", help="seed of the draws")
    options = parser.parse_args()

    request = json.loads(sys.stdin.readline())
    metadata = request.get("metadata") or {}
    draw = random.Random(f"{options.seed}/{metadata.get('test_id')}/{metadata.get('run_number')}")
    steps = max(1, min(100, round(draw.gauss(options.steps, options.spread))))
    print(
        json.dumps(
            {
                "version": "1.0",
                "task_id": request["task_id"],
                "status": "completed",
                "artifacts": [{"type": "structured", "name": "answer", "data": {"steps": steps}}],
                "metrics": {
                    "total_steps": steps,
                    "total_tokens": steps * 120,
                    "llm_calls": steps // 2,
                    "tool_calls": steps // 3,
                },
            }
        )
    )


if __name__ == "__main__":
    main()
