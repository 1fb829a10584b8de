"""A judge service's answer read no further than a limit: an httpx response hook.

Imported by a back end once its SDK is (httpx comes with the SDK, not with ATP's evaluators).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import httpx


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
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise AnswerTooLarge(f"the answer is {declared} bytes, more than {limit}")
        if isinstance(response.stream, httpx.AsyncByteStream):
            response.stream = BoundedStream(response.stream, limit)

    return bound
