"""Model servers on loopback for the LLM judge's tests: scripted answers (judgements as tool
calls, text, errors with ``retry-after``, bodies that are not JSON), every request recorded.

:class:`JudgeServer` speaks Anthropic's Messages API (the real ``anthropic`` SDK talks to it
through ``base_url``), :class:`ChatServer` OpenAI's Chat Completions API (the real ``openai``
SDK, ``base_url`` ending in ``/v1``).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, dict[str, str], Any]
"""Status, headers, JSON body (bytes are sent as they are)."""


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

    path = "/v1/messages"

    def not_found(self, path: str) -> Reply:
        return error(404, "not_found_error", f"no {path}")

    def first_default(self, body: dict[str, Any]) -> Reply:
        return judgement(0.9, "fine")

    def __init__(self, default: Callable[[dict[str, Any]], Reply] | None = None) -> None:
        self.script: deque[Reply] = deque()
        self.default = default or self.first_default
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
                if self.path.split("?")[0] != server.path:
                    reply = server.not_found(self.path)
                status, headers, payload = reply if reply is not None else server.default(body)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("x-should-retry", "false")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # a client that refused a large body
                    pass

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
        return prompt_in(self.requests[index])


def prompt_in(body: dict[str, Any]) -> str:
    """The first user message's text of a request's body."""
    content = next(m for m in body["messages"] if m["role"] == "user")["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


# --- OpenAI's Chat Completions API ---------------------------------------------------------------


def completion(
    message: dict[str, Any], model: str = "gpt-4.1", prompt_tokens: Any = 150, completion_tokens: Any = 50
) -> Reply:
    """A chat completion whose one choice is ``message``."""
    return (
        200,
        {},
        {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 1700000000,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "refusal": None, **message},
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": 200,
            },
        },
    )


def chat_call(
    arguments: str, name: str = "record_judgement", call_id: str = "call_test", **usage: Any
) -> Reply:
    """A call of a function with ``arguments`` (JSON text, or anything) as sent."""
    return completion(
        {
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            ]
        },
        **usage,
    )


def chat_judgement(
    score: Any,
    explanation: str = "judged",
    issues: list[str] | None = None,
    strengths: list[str] | None = None,
    **usage: Any,
) -> Reply:
    """A judgement as a call of the judgement function."""
    data = {"score": score, "explanation": explanation, "issues": issues or [], "strengths": strengths or []}
    return chat_call(json.dumps(data), **usage)


def chat_text(answer: str) -> Reply:
    return completion({"content": answer})


def chat_error(
    status: int, kind: str = "server_error", detail: str = "scripted error", retry_after: float | None = None
) -> Reply:
    headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
    return status, headers, {"error": {"message": detail, "type": kind, "param": None, "code": None}}


def raw(body: bytes, status: int = 200) -> Reply:
    """A body sent as it is (not JSON, say)."""
    return status, {}, body


class ChatServer(JudgeServer):
    """``POST /v1/chat/completions`` answered from :attr:`script`, then by :attr:`default`;
    give the SDK ``base_url=server.api``."""

    path = "/v1/chat/completions"

    def not_found(self, path: str) -> Reply:
        return chat_error(404, "invalid_request_error", f"no {path}")

    def first_default(self, body: dict[str, Any]) -> Reply:
        return chat_judgement(0.9, "fine")

    @property
    def api(self) -> str:
        return f"{self.url}/v1"
