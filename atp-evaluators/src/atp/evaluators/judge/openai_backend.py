"""The ``openai`` judge back end: OpenAI's Chat Completions API through the ``openai`` SDK
(extra ``atp-evaluators[judge-openai]``).

As for ``anthropic``: the SDK's own retries are off (``max_retries=0``; ATP retries, the same
for every back end), redirects are not followed (a redirect would carry the prompt, the agent's
output included, and the key's header to wherever it points), and the answer is asked for as a
forced call of the judgement function (``tool_choice``, one call at most). ATP's turns are
Messages API shaped (:class:`~atp.evaluators.judge.backend.JudgeCall`): :func:`chat_messages`
translates them, a correction's ``tool_result`` becoming a ``tool`` message.

The service's answer is hostile input: its body is read up to :data:`atp.evaluators.judge.bounded.MAX_ANSWER_BYTES` and
decoded here (:func:`read_completion`), not by the SDK, so that a body that is not a chat
completion (not JSON, a field of the wrong type, no choice) is a :class:`JudgeError` naming what
is wrong, never an exception from deep inside the SDK. The function's ``arguments`` are JSON
text the model wrote: read as strictly as a text answer (:func:`~atp.evaluators.judge.prompt.load_json`);
arguments that do not read are the answer's text, so that the judge says what is wrong with
them and the model is corrected.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from atp.core.plugins import require
from atp.core.secrets import Masker
from atp.core.text import shorten
from atp.evaluators.judge.backend import (
    RETRIED_STATUSES,
    JudgeBackend,
    JudgeCall,
    JudgeError,
    JudgeReply,
    TransientJudgeError,
    retry_after,
)
from atp.evaluators.judge.prompt import AnswerProblem, load_json

SHOWN_CHARS = 500
"""What the service said, in an error message, is cut at this many characters."""


class ChatFunction(msgspec.Struct):
    name: str = ""
    arguments: str = ""


class ChatToolCall(msgspec.Struct):
    id: str = ""
    type: str = "function"
    function: ChatFunction | None = None


class ChatMessage(msgspec.Struct):
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[ChatToolCall] | None = None


class ChatChoice(msgspec.Struct):
    message: ChatMessage


class ChatUsage(msgspec.Struct):
    prompt_tokens: Any = 0
    """Any JSON value: the judge checks the counts against its bounds and names what is wrong."""
    completion_tokens: Any = 0


class ChatCompletion(msgspec.Struct):
    """What ATP reads of a chat completion (other fields are ignored)."""

    choices: list[ChatChoice]
    usage: ChatUsage | None = None
    model: str | None = None


def function_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """The judgement tool as a Chat Completions function."""
    return {
        "type": "function",
        "function": {
            "name": tool["name"],
            "description": tool["description"],
            "parameters": tool["input_schema"],
        },
    }


def chat_messages(system: str, turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ATP's Messages API shaped turns as Chat Completions messages: the system prompt first;
    an assistant turn's ``tool_use`` blocks as its ``tool_calls`` (their arguments as sent);
    a user turn's ``tool_result`` blocks as ``tool`` messages, its text as a user message."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for turn in turns:
        role, content = turn["role"], turn["content"]
        if isinstance(content, str):
            messages.append({"role": role, "content": content})
            continue
        text = "".join(str(block.get("text", "")) for block in content if block.get("type") == "text")
        if role == "assistant":
            calls = [
                {
                    "id": block["id"],
                    "type": "function",
                    "function": {"name": block["name"], "arguments": block.get("arguments", "")},
                }
                for block in content
                if block.get("type") == "tool_use"
            ]
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                message["tool_calls"] = calls
            elif not text:
                message["content"] = "(no answer)"
            messages.append(message)
            continue
        for block in content:
            if block.get("type") == "tool_result":
                messages.append(
                    {"role": "tool", "tool_call_id": block["tool_use_id"], "content": block["content"]}
                )
        if text:
            messages.append({"role": "user", "content": text})
    return messages


def read_completion(body: bytes, tool_name: str) -> JudgeReply:
    """The judge's reply in a chat completion's body; :class:`JudgeError` when the body is not
    one (the problem and where it is, never the body)."""
    try:
        completion = msgspec.json.decode(body, type=ChatCompletion)
    except msgspec.DecodeError as exc:
        raise JudgeError(
            f"the Chat Completions API answered with something that is not a chat completion: {exc}"
        ) from None
    if not completion.choices:
        raise JudgeError("the Chat Completions API answered with no choice")
    message = completion.choices[0].message
    text = message.content or message.refusal or ""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    tool_input: Any = None
    tool_use_id: str | None = None
    for call in message.tool_calls or []:
        name = call.function.name if call.function is not None else f"({call.type})"
        arguments = call.function.arguments if call.function is not None else ""
        try:
            value: Any = load_json(arguments)
        except AnswerProblem:
            value = None
        content.append(
            {"type": "tool_use", "id": call.id, "name": name, "input": value, "arguments": arguments}
        )
        if name == tool_name and tool_use_id is None:
            tool_use_id = call.id
            if value is None:  # not JSON, or JSON null: read as the answer's text, which says why
                text = arguments
            tool_input = value
    usage = completion.usage or ChatUsage()
    return JudgeReply(
        tool_input=tool_input,
        text=text,
        content=content,
        tool_use_id=tool_use_id,
        input_tokens=usage.prompt_tokens,  # (checked against bounds by the judge)
        output_tokens=usage.completion_tokens,
        model=shorten(completion.model, 200) if completion.model else None,
    )


class OpenAIJudge(JudgeBackend):
    name: ClassVar[str] = "openai"
    key_variable: ClassVar[str | None] = "OPENAI_API_KEY"
    key_secret: ClassVar[str | None] = "openai_api_key"
    default_model: ClassVar[str] = "gpt-4.1"
    base_url_variable: ClassVar[str | None] = "OPENAI_BASE_URL"

    def __init__(self, settings: Any, api_key: str | None) -> None:
        super().__init__(settings, api_key)
        self._sdk = require(
            "openai", install="atp-evaluators[judge-openai]", feature="the OpenAI judge (llm_eval)"
        )
        from atp.evaluators.judge import bounded  # (httpx: here once the SDK is)

        self._bounded = bounded
        self._client: Any = None
        self._masker = Masker([api_key] if api_key else [])

    def _client_now(self) -> Any:
        if self._client is None:
            self._client = self._sdk.AsyncOpenAI(
                api_key=self.api_key,
                base_url=self.endpoint(self.settings),
                max_retries=0,
                timeout=self.settings.request_timeout_seconds,
                http_client=self._bounded.client(self._sdk),
            )
        return self._client

    def request(self, call: JudgeCall) -> dict[str, Any]:
        """The arguments of ``chat.completions.create`` for ``call``."""
        request: dict[str, Any] = {
            "model": call.model,
            "messages": chat_messages(call.system, call.messages),
            "tools": [function_tool(call.tool)],
            "tool_choice": {"type": "function", "function": {"name": call.tool["name"]}},
            "max_completion_tokens": call.max_tokens,
        }
        if call.temperature is not None:
            request["temperature"] = call.temperature
        return request

    async def send(self, call: JudgeCall) -> JudgeReply:
        sdk = self._sdk
        try:
            raw = await self._client_now().chat.completions.with_raw_response.create(**self.request(call))
            body = raw.http_response.content
        except self._bounded.AnswerTooLarge as exc:
            raise JudgeError(f"the Chat Completions API's answer is not read: {exc}") from None
        except sdk.APIStatusError as exc:
            status = exc.status_code
            said = f"the Chat Completions API answered HTTP {status}: {self._brief(exc)}"
            if status in RETRIED_STATUSES or status >= 500:
                raise TransientJudgeError(said, retry_after(getattr(exc.response, "headers", None))) from None
            raise JudgeError(said) from None
        except sdk.APITimeoutError as exc:
            raise TransientJudgeError(f"the Chat Completions API did not answer in time: {exc}") from None
        except sdk.APIConnectionError as exc:
            cause = exc.__cause__ or exc.__context__
            large = self._bounded.too_large(exc)
            if large is not None:
                raise JudgeError(f"the Chat Completions API's answer is not read: {large}") from None
            raise TransientJudgeError(
                f"the Chat Completions API could not be reached: {exc} ({self._said(str(cause))})",
                unreachable=True,
            ) from None
        except sdk.OpenAIError as exc:
            raise JudgeError(f"the openai SDK failed: {type(exc).__name__}: {self._said(str(exc))}") from None
        return read_completion(body, call.tool["name"])

    def _said(self, text: str) -> str:
        """Text the service (or the SDK quoting it) sent, the key masked before it is cut."""
        return shorten(text, SHOWN_CHARS, self._masker)

    def _brief(self, exc: Any) -> str:
        """What an error answer says: its ``error.message`` (the SDK hands over ``error``'s
        content as ``body``), else the SDK's own message."""
        body = getattr(exc, "body", None)
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            kind = body.get("type") or body.get("code") or "error"
            return self._said(f"{str(kind)[:80]}: {body['message']}")
        return self._said(str(getattr(exc, "message", exc)))

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()
