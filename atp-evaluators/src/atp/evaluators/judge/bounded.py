"""A judge service's answer read no further than a limit: the HTTP client every back end's SDK
is given (:func:`client`).

Imported by a back end once its SDK is (httpx comes with the SDK, not with ATP's evaluators).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

MAX_ANSWER_BYTES = 4 * 1024 * 1024
"""The most a judge service's answer may be, as it is read (uncompressed)."""


class AnswerTooLarge(Exception):
    """The service's answer is larger than the limit."""


class BoundedStream(httpx.AsyncByteStream):
    """A response body that stops with :class:`AnswerTooLarge` past ``limit`` bytes."""

    def __init__(self, stream: httpx.AsyncByteStream, limit: int) -> None:
        self.stream = stream
        self.limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self.stream:
            size += len(chunk)
            if size > self.limit:
                raise AnswerTooLarge(f"the answer is larger than {self.limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()


def bounding(limit: int) -> Callable[[httpx.Response], Awaitable[None]]:
    """httpx's response hook that reads a body at most ``limit`` bytes long (a declared length
    past it is refused before anything is read)."""

    async def bound(response: httpx.Response) -> None:
        encoding = response.headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity"):  # asked for uncompressed: the bound counts what is read
            raise AnswerTooLarge(
                f"the answer is {encoding[:40]}-encoded, not the uncompressed answer asked for"
            )
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise AnswerTooLarge(f"the answer is {declared} bytes, more than {limit}")
        if isinstance(response.stream, httpx.AsyncByteStream):
            response.stream = BoundedStream(response.stream, limit)

    return bound


def client(sdk: Any, limit: int = MAX_ANSWER_BYTES) -> Any:
    """The httpx client an SDK (``anthropic``, ``openai``) is given: no redirect followed (it
    would carry the prompt, the agent's output in it, and the key's headers wherever it
    points), bodies asked for uncompressed (the bound counts the bytes read: a small gzip body
    could inflate to gigabytes) and read no further than ``limit``."""
    return sdk.DefaultAsyncHttpxClient(
        follow_redirects=False,
        headers={"Accept-Encoding": "identity"},
        event_hooks={"response": [bounding(limit)]},
    )


def too_large(exc: BaseException) -> AnswerTooLarge | None:
    """The :class:`AnswerTooLarge` that ``exc`` is or was raised from (an SDK wraps it in its
    connection error), or ``None``."""
    for found in (exc, exc.__cause__, exc.__context__):
        if isinstance(found, AnswerTooLarge):
            return found
    return None
