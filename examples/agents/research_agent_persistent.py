#!/usr/bin/env python3
"""The quick-start research agent (research_agent.py), serving one request after another.

With `persistent: true` on its agent definition, ATP starts this process once (or once per
parallel run) and sends it every request of the suite: each request is one JSON line on stdin;
for each, the agent writes its events on stderr and then its response as one JSON line on
stdout, flushing both, and reads the next line. When stdin ends, it exits. Without the flag it
works too: stdin then ends after the first request.

What an expensive agent does once (import a framework, load a model, open connections) it does
here, before the loop.
"""

import json
import sys

from research_agent import answer


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        response = answer(line)  # the work, or the refusal of a request it cannot serve
        sys.stderr.flush()  # the events of this request, before its response
        print(json.dumps(response), flush=True)


if __name__ == "__main__":
    main()
