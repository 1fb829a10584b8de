"""The ``anthropic`` judge back end: Anthropic's Messages API through the ``anthropic`` SDK
(extra ``atp-evaluators[judge]``).

The SDK's own retries are off (``max_retries=0``): ATP retries with backoff itself, honouring
``retry-after``, the same for every back end (:mod:`atp.evaluators.judge.judge`). The answer is
asked for as a forced call of the judgement tool.
"""

from __future__ import annotations

from typing import Any, ClassVar

from atp.core.plugins import require
from atp.evaluators.judge.backend import (
    RETRIED_STATUSES,
    JudgeBackend,
    JudgeCall,
    JudgeError,
    JudgeReply,
    TransientJudgeError,
    retry_after,
)


class AnthropicJudge(JudgeBackend):
    name: ClassVar[str] = "anthropic"
    key_variable: ClassVar[str | None] = "ANTHROPIC_API_KEY"
    key_secret: ClassVar[str | None] = "anthropic_api_key"
    default_model: ClassVar[str] = "claude-sonnet-4-6"
    base_url_variable: ClassVar[str | None] = "ANTHROPIC_BASE_URL"

    def __init__(self, settings: Any, api_key: str | None) -> None:
        super().__init__(settings, api_key)
        self._sdk = require("anthropic", install="atp-evaluators[judge]", feature="the LLM judge (llm_eval)")
        from atp.evaluators.judge import bounded  # (httpx: here once the SDK is)

        self._bounded = bounded
        self._client: Any = None

    def _client_now(self) -> Any:
        if self._client is None:
            self._client = self._sdk.AsyncAnthropic(
                api_key=self.api_key,
                base_url=self.settings.base_url,
                max_retries=0,
                timeout=self.settings.request_timeout_seconds,
                http_client=self._bounded.client(self._sdk),  # no redirects, a bounded answer
            )
        return self._client

    async def send(self, call: JudgeCall) -> JudgeReply:
        sdk = self._sdk
        extra: dict[str, Any] = {}
        if call.temperature is not None:
            extra["temperature"] = call.temperature
        try:
            message = await self._client_now().messages.create(
                model=call.model,
                max_tokens=call.max_tokens,
                system=call.system,
                messages=call.messages,
                tools=[call.tool],
                tool_choice={"type": "tool", "name": call.tool["name"], "disable_parallel_tool_use": True},
                extra_body=extra or None,
            )
        except self._bounded.AnswerTooLarge as exc:
            raise JudgeError(f"the Messages API's answer is not read: {exc}") from None
        except sdk.APIStatusError as exc:
            status = exc.status_code
            text = f"the Messages API answered HTTP {status}: {_brief(exc)}"
            if status in RETRIED_STATUSES or status >= 500:
                raise TransientJudgeError(text, retry_after(getattr(exc.response, "headers", None))) from None
            raise JudgeError(text) from None
        except sdk.APITimeoutError as exc:
            raise TransientJudgeError(f"the Messages API did not answer in time: {exc}") from None
        except sdk.APIConnectionError as exc:
            large = self._bounded.too_large(exc)
            if large is not None:
                raise JudgeError(f"the Messages API's answer is not read: {large}") from None
            cause = exc.__cause__ or exc.__context__
            raise TransientJudgeError(
                f"the Messages API could not be reached: {exc} ({cause})", unreachable=True
            ) from None
        except sdk.AnthropicError as exc:
            raise JudgeError(f"the anthropic SDK failed: {type(exc).__name__}: {exc}") from None
        content: list[dict[str, Any]] = []
        texts: list[str] = []
        tool_input: Any = None
        tool_use_id: str | None = None
        for block in message.content or []:
            kind = getattr(block, "type", None)
            if kind == "text":
                texts.append(block.text)
                content.append({"type": "text", "text": block.text})
            elif kind == "tool_use":
                content.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
                if block.name == call.tool["name"] and tool_use_id is None:
                    tool_input, tool_use_id = block.input, block.id
        usage = message.usage
        return JudgeReply(
            tool_input=tool_input,
            text="".join(texts),
            content=content,
            tool_use_id=tool_use_id,
            input_tokens=_reported(usage, "input_tokens"),  # (checked against bounds by the judge)
            output_tokens=_reported(usage, "output_tokens"),
            model=getattr(message, "model", None),
        )

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()


def _reported(usage: Any, name: str) -> Any:
    """A count of ``usage`` as the service sent it (``0`` when it sent none): the judge checks
    it against its bounds and names what is wrong, so it is not converted here (``int()`` of an
    infinity raises, of -5.5 hides the sign of a fraction)."""
    value = getattr(usage, name, None)
    return 0 if value is None else value


def _brief(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return f"{error.get('type', 'error')}: {error['message']}"[:500]
    return str(exc)[:500]
