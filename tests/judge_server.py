"""A Messages API server on loopback for the LLM judge's tests: scripted answers (judgements
as tool calls, text, errors with ``retry-after``), every request recorded.

The real ``anthropic`` SDK talks to it through ``base_url``.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, dict[str, str], dict[str, Any]]
"""Status, headers, JSON body."""


def message(
    content: list[dict[str, Any]],
    model: str = "claude-sonnet-4-6",
    input_tokens: int = 120,
    output_tokens: int = 40,
) -> Reply:
    return (
        200,
        {},
        {
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        },
    )


def judgement(
    score: Any,
    explanation: str = "judged",
    issues: list[str] | None = None,
    strengths: list[str] | None = None,
    **extra: Any,
) -> Reply:
    """A judgement as a call of the judgement tool."""
    data = {
        "score": score,
        "explanation": explanation,
        "issues": issues or [],
        "strengths": strengths or [],
        **extra,
    }
    return message([{"type": "tool_use", "id": "toolu_test", "name": "record_judgement", "input": data}])


def tool_input(data: dict[str, Any]) -> Reply:
    """A call of the judgement tool with exactly ``data`` as its input."""
    return message([{"type": "tool_use", "id": "toolu_test", "name": "record_judgement", "input": data}])


def text(answer: str) -> Reply:
    return message([{"type": "text", "text": answer}])


def error(
    status: int, kind: str = "api_error", detail: str = "scripted error", retry_after: float | None = None
) -> Reply:
    headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
    return status, headers, {"type": "error", "error": {"type": kind, "message": detail}}


class JudgeServer:
    """``POST /v1/messages`` answered from :attr:`script` (in order), then by :attr:`default`
    (a function of the request body)."""

    def __init__(self, default: Callable[[dict[str, Any]], Reply] | None = None) -> None:
        self.script: deque[Reply] = deque()
        self.default = default or (lambda body: judgement(0.9, "fine"))
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.times: list[float] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                import time

                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    server.times.append(time.monotonic())
                    reply = server.script.popleft() if server.script else None
                if self.path.split("?")[0] != "/v1/messages":
                    reply = error(404, "not_found_error", f"no {self.path}")
                status, headers, payload = reply if reply is not None else server.default(body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("x-should-retry", "false")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> JudgeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def key_of(self, index: int = -1) -> str | None:
        """The API key a recorded request carried (``x-api-key``, or a bearer token)."""
        headers = self.headers[index]
        if "x-api-key" in headers:
            return headers["x-api-key"]
        auth = headers.get("authorization", "")
        return auth[len("Bearer ") :] if auth.startswith("Bearer ") else None

    def prompt_of(self, index: int = -1) -> str:
        """The first user message's text of a recorded request."""
        content = self.requests[index]["messages"][0]["content"]
        return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
