"""Asking the judge: settings, samples, strict answers with one correction, retries, cache.

:class:`Judge` turns a :class:`~atp.evaluators.judge.prompt.Prompt` into a :class:`Judgement`:

- ``samples`` requests (at once, within ``max_concurrent`` calls in flight for the whole
  ``atp test``), each its own cache entry; the score is their mean, their spread is reported;
- an answer that is not a judgement (a score outside 0-1, a missing field, prose around the
  JSON) is sent back once with what is wrong (:func:`~atp.evaluators.judge.prompt.correction`);
  a second such answer fails the judgement with both answers as evidence;
- a rate limit, a 5xx or a failed connection is retried up to ``max_retries`` times, after the
  ``retry-after`` the service asked for, else after an exponential backoff with jitter (0.5 s,
  1 s, 2 s, ... at most :data:`MAX_WAIT_SECONDS`).

The judge's tokens and cost are counted apart from the agent's (:class:`Spent`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path
from statistics import fmean, pstdev
from typing import Annotated, Any, Literal, NamedTuple

import anyio
import msgspec

from atp.core.bounds import MAX_COUNT, number_in, shown_number
from atp.core.errors import ConfigError
from atp.core.secrets import Masker
from atp.core.text import shorten
from atp.evaluators.judge.backend import (
    JudgeBackend,
    JudgeCall,
    JudgeError,
    JudgeReply,
    TransientJudgeError,
    cost_of,
    infer_backend,
    load_backend,
    pairing_problem,
    price_of,
)
from atp.evaluators.judge.cache import JudgeCache, cache_key, default_cache_dir
from atp.evaluators.judge.prompt import (
    JUDGEMENT_TOOL,
    TOOL_NAME,
    AnswerProblem,
    Prompt,
    Verdict,
    correction,
    read_fields,
    read_text,
)

MAX_WAIT_SECONDS = 60.0
"""The longest ATP waits before asking again, whatever ``retry-after`` says."""
SHOWN_ANSWER_CHARS = 2000
"""An answer that is not a judgement is shown up to this many characters."""

Fraction = Annotated[float, msgspec.Meta(ge=0, le=1)]


class Price(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    input: Annotated[float, msgspec.Meta(ge=0)]
    output: Annotated[float, msgspec.Meta(ge=0)]


class JudgeSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """``evaluators.llm_judge`` in ``atp.config.yaml`` (docs/llm-judge.md)."""

    backend: str | None = None
    """``anthropic``, ``openai``, a plugin's name or ``module:Class``; without it, ``anthropic``
    when ``base_url`` is set, else the model's name chooses (``gpt-*``, ``o3``, ...: ``openai``;
    else ``anthropic``)."""
    model: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    """Without it, the back end's default (``claude-sonnet-4-6``; ``gpt-4.1`` for ``openai``)."""
    temperature: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    """Sent only when set. Anthropic's Messages API as the ``anthropic`` SDK 2.x speaks it
    (version 2026-10-21) refuses every sampling parameter, ``temperature: 0`` included, so the
    default sends none; set it for a compatible server or proxy that takes it."""
    samples: Annotated[int, msgspec.Meta(ge=1, le=20)] = 1
    max_tokens: Annotated[int, msgspec.Meta(ge=16, le=64000)] = 1024
    max_concurrent: Annotated[int, msgspec.Meta(ge=1, le=256)] = 4
    threshold: Fraction = 0.7
    base_url: str | None = None
    api_key: str | None = None
    request_timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 120.0
    max_retries: Annotated[int, msgspec.Meta(ge=0, le=20)] = 4
    cache: bool = True
    cache_dir: str | None = None
    max_artifact_chars: Annotated[int, msgspec.Meta(ge=100)] = 100_000
    price_per_mtok: Price | None = None
    when_unavailable: Literal["skip", "fail"] = "skip"
    """Without an API key: ``skip`` the checks (the default), or ``fail`` the run."""
    timeout_seconds: float | None = None
    """ATP's own limit for one run's judging (checked by the kernel)."""

    def __post_init__(self) -> None:
        problem = pairing_problem(self.backend, self.model, self.base_url)
        if problem is not None:
            raise ValueError(problem)


def read_settings(settings: Mapping[str, Any]) -> JudgeSettings:
    try:
        return msgspec.convert(dict(settings), JudgeSettings)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"evaluators.llm_judge: {exc}") from None


def backend_of(settings: JudgeSettings) -> type[JudgeBackend]:
    """The back end class the settings choose: ``backend``; else, with a ``base_url`` (a proxy
    or a compatible server, which may serve any model under any name), ``anthropic`` as before
    there was a choice; else the one the model's name belongs to
    (:func:`~atp.evaluators.judge.backend.infer_backend`)."""
    if settings.backend:
        return load_backend(settings.backend)
    return load_backend("anthropic" if settings.base_url else infer_backend(settings.model))


class Spent(NamedTuple):
    calls: int = 0
    cached: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    retries: int = 0
    corrections: int = 0

    def __add__(self, other: object) -> Spent:  # a sum, not tuple concatenation
        assert isinstance(other, Spent)
        return Spent(*(a + b for a, b in zip(self, other, strict=True)))


class Sample(NamedTuple):
    verdict: Verdict
    spent: Spent
    model: str | None


class Judgement(NamedTuple):
    """What ``samples`` answers add up to."""

    score: float
    samples: list[Sample]
    spent: Spent
    cost_usd: float | None

    @property
    def scores(self) -> list[float]:
        return [s.verdict.score for s in self.samples]

    @property
    def spread(self) -> dict[str, float]:
        scores = self.scores
        return {"stdev": round(pstdev(scores), 4), "min": min(scores), "max": max(scores)}


class JudgeFailed(Exception):
    """The judge gave no judgement: ``details`` hold the evidence (its answers)."""

    def __init__(self, message: str, spent: Spent, **details: Any) -> None:
        super().__init__(message)
        self.spent = spent
        self.details = details


def reply_spent(reply: JudgeReply, retries: int) -> Spent:
    """What a reply cost: the attempts made and the tokens the service reported, each checked
    against its bounds (an integer from 0 to 10^15). A service reporting negative (or absurd)
    usage would cancel what the agent spent in a budget: its reply is not taken (JudgeFailed,
    naming the field and the value) and each such count is counted as 10^15, so that a budget
    is exceeded."""
    problems: list[str] = []
    counts: list[int] = []
    for name in ("input_tokens", "output_tokens"):
        value = getattr(reply, name)
        if number_in(value, 0, MAX_COUNT, integer=True) is None:
            problems.append(f"usage.{name} = {shown_number(value)}")
            value = MAX_COUNT
        counts.append(value)
    spent = Spent(calls=retries + 1, input_tokens=counts[0], output_tokens=counts[1], retries=retries)
    if problems:
        raise JudgeFailed(
            f"the judge's service reported {', '.join(problems)}: out of bounds (a count of tokens is "
            f"an integer from 0 to 1e15); it counts as 1e15 tokens",
            spent,
        )
    return spent


def shown(reply: JudgeReply, masker: Masker | None = None) -> str:
    """What came back, for a check's evidence (the secrets of ``masker``, the run's, masked
    before it is cut)."""
    text = json.dumps(reply.tool_input, ensure_ascii=False) if reply.tool_input is not None else reply.text
    return shorten(text, SHOWN_ANSWER_CHARS, masker) if text else "(an empty answer)"


def read_reply(reply: JudgeReply) -> Verdict:
    """The judgement in a reply: one call of the judgement tool (and no other tool), or the
    JSON object alone in text."""
    calls = [block for block in reply.content if block.get("type") == "tool_use"]
    other = next((block.get("name") for block in calls if block.get("name") != TOOL_NAME), None)
    if other is not None:
        raise AnswerProblem(f"the answer calls the tool {str(other)[:80]!r}; only {TOOL_NAME} may be called")
    if len(calls) > 1:
        raise AnswerProblem(f"the answer calls {TOOL_NAME} {len(calls)} times; call it once")
    if reply.tool_input is not None:
        return read_fields(reply.tool_input)
    if not reply.text.strip():
        raise AnswerProblem(
            f"the call of {TOOL_NAME} has no arguments"
            if calls
            else "the answer is empty: no tool call and no text"
        )
    return read_text(reply.text)


def backoff(attempt: int) -> float:
    """Seconds before retry ``attempt`` (0, 1, ...) when the service did not say: 0.5 s
    doubling, with up to a quarter of jitter."""
    doubled: int = 2**attempt  # (int ** int is typed Any: it is a float for a negative power)
    base = min(0.5 * doubled, MAX_WAIT_SECONDS)
    return base * (1.0 + random.uniform(-0.25, 0.25))


class Judge:
    """Judges prompts with one back end class; shared by every run of an ``atp test``."""

    def __init__(
        self,
        settings: JudgeSettings,
        backend: type[JudgeBackend],
        api_key: str | None,
        *,
        sleep: Any = None,
    ) -> None:
        self.settings = settings
        self.backend_cls = backend
        self.backend_name = settings.backend or backend.name
        """The back end as the settings name it (a ``module:Class`` path), else its name."""
        self.model = settings.model or backend.default_model
        self.api_key = api_key
        self.cache: JudgeCache | None = None
        if settings.cache:
            self.cache = JudgeCache(Path(settings.cache_dir) if settings.cache_dir else default_cache_dir())
        self.price = price_of(
            self.model,
            (settings.price_per_mtok.input, settings.price_per_mtok.output)
            if settings.price_per_mtok
            else None,
        )
        self._limiter: anyio.CapacityLimiter | None = None
        self._backend: JudgeBackend | None = None
        self._making: anyio.Lock | None = None
        self._unreachable: str | None = None
        """Why the judge could not be reached at all, once every attempt of a request failed
        to connect: later requests of this judge fail at once instead of waiting again."""
        self._sleep = sleep or anyio.sleep

    def limiter(self) -> anyio.CapacityLimiter:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.settings.max_concurrent)
        return self._limiter

    async def backend(self) -> JudgeBackend:
        """The back end every judgement of this judge goes through (one connection pool),
        made once on a worker thread (the SDK's import takes most of a second, which would
        stall every run in flight); :meth:`aclose` releases it."""
        if self._backend is None:
            if self._making is None:
                self._making = anyio.Lock()
            async with self._making:
                if self._backend is None:
                    self._backend = await anyio.to_thread.run_sync(
                        self.backend_cls, self.settings, self.api_key
                    )
        return self._backend

    async def aclose(self) -> None:
        if self._backend is not None:
            backend, self._backend = self._backend, None
            await backend.aclose()

    async def judge(self, prompt: Prompt, samples: int, *, masker: Masker | None = None) -> Judgement:
        """``samples`` judgements of ``prompt``, taken together; the answers a failure quotes
        have the secrets of ``masker`` (the run's) masked."""
        backend = await self.backend()
        results: list[Sample | None] = [None] * samples
        failures: list[JudgeFailed] = []
        async with anyio.create_task_group() as group:
            for index in range(samples):
                group.start_soon(self._one, backend, prompt, index, results, failures, masker)
        if failures:
            first = failures[0]
            spent = sum((s.spent for s in results if s is not None), Spent()) + sum(
                (f.spent for f in failures), Spent()
            )
            raise JudgeFailed(str(first), spent, **first.details)
        done = [s for s in results if s is not None]
        spent = sum((s.spent for s in done), Spent())
        return Judgement(
            score=fmean(s.verdict.score for s in done),
            samples=done,
            spent=spent,
            cost_usd=cost_of(spent.input_tokens, spent.output_tokens, self.price),
        )

    async def _one(
        self,
        backend: JudgeBackend,
        prompt: Prompt,
        index: int,
        results: list[Sample | None],
        failures: list[JudgeFailed],
        masker: Masker | None = None,
    ) -> None:
        try:
            results[index] = await self.sample(backend, prompt, index, masker=masker)
        except JudgeFailed as failed:
            failures.append(failed)
        except Exception as exc:  # a back end's or the cache's own bug: said, not an exception group
            failures.append(JudgeFailed(f"the judge failed: {type(exc).__name__}: {exc}", Spent()))

    def key(self, prompt: Prompt, index: int) -> str:
        s = self.settings
        return cache_key(
            {
                "backend": self.backend_name,
                "backend_class": f"{self.backend_cls.__module__}.{self.backend_cls.__qualname__}",
                "base_url": self.backend_cls.endpoint(s),
                "model": self.model,
                "temperature": s.temperature,
                "max_tokens": s.max_tokens,
                "system": prompt.system,
                "user": prompt.user,
                "tool": JUDGEMENT_TOOL,
                "sample": index,
            }
        )

    async def sample(
        self, backend: JudgeBackend, prompt: Prompt, index: int, *, masker: Masker | None = None
    ) -> Sample:
        """One judgement: from the cache, or asked (with one correction at most); the answers a
        failure quotes have the secrets of ``masker`` masked."""
        key = self.key(prompt, index)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                return Sample(hit.verdict, Spent(cached=1), hit.model)
        s = self.settings
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt.user}]
        spent = Spent()
        answers: list[str] = []
        problems: list[str] = []
        for attempt in range(2):
            call = JudgeCall(self.model, prompt.system, messages, JUDGEMENT_TOOL, s.temperature, s.max_tokens)
            try:
                reply, used = await self._send(backend, call)
            except JudgeFailed as failed:
                if answers:
                    failed.details.update(answers=answers, problems=problems)
                raise JudgeFailed(str(failed), spent + failed.spent, **failed.details) from None
            spent = spent + used
            try:
                verdict = read_reply(reply)
            except AnswerProblem as problem:
                answers.append(shown(reply, masker))
                problems.append(str(problem))
                if attempt == 0:
                    spent = spent + Spent(corrections=1)
                    messages = [*messages, *corrected(reply, str(problem))]
                    continue
                raise JudgeFailed(
                    f"the judge answered twice with something that is not a judgement: {problems[0]}; "
                    f"then {problems[1]}",
                    spent,
                    answers=answers,
                    problems=problems,
                ) from None
            if self.cache is not None:
                self.cache.put(key, verdict, reply.model)
            return Sample(verdict, spent, reply.model)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _send(self, backend: JudgeBackend, call: JudgeCall) -> tuple[JudgeReply, Spent]:
        """The reply to ``call``, retrying what is transient."""
        retries = 0
        errors: list[str] = []
        limit = self.settings.request_timeout_seconds
        unreachable = True
        while True:
            if self._unreachable is not None:
                raise JudgeFailed(
                    f"the judge could not be reached earlier in this run, so it is not asked again: {self._unreachable}",
                    Spent(calls=retries, retries=max(retries - 1, 0)),
                    errors=errors,
                )
            try:
                async with self.limiter():
                    reply = await self._send_once(backend, call, limit)
                return reply, reply_spent(reply, retries)
            except TransientJudgeError as exc:
                errors.append(str(exc))
                unreachable = unreachable and exc.unreachable
                if retries >= self.settings.max_retries:
                    if unreachable:
                        self._unreachable = str(exc)
                    raise JudgeFailed(
                        f"the judge did not answer after {retries + 1} attempts: {exc}",
                        Spent(calls=retries + 1, retries=retries),
                        errors=errors,
                    ) from None
                wait = exc.retry_after if exc.retry_after is not None else backoff(retries)
                retries += 1
                await self._sleep(min(max(wait, 0.0), MAX_WAIT_SECONDS))
            except JudgeError as exc:
                raise JudgeFailed(
                    f"the judge cannot answer: {exc}",
                    Spent(calls=retries + 1, retries=retries),
                    errors=[*errors, str(exc)],
                ) from None

    async def _send_once(self, backend: JudgeBackend, call: JudgeCall, limit: float) -> JudgeReply:
        """One request, answered within ``limit`` seconds in all (a server that trickles its
        answer does not hold a call longer); what a back end raises besides its two errors is
        turned into one of them."""
        try:
            with anyio.fail_after(limit):
                return await backend.send(call)
        except TimeoutError:
            raise TransientJudgeError(f"no answer within {limit:g} s (request_timeout_seconds)") from None
        except JudgeError:
            raise
        except OSError as exc:
            raise TransientJudgeError(
                f"the {self.backend_cls.name} back end could not connect: {exc}", unreachable=True
            ) from None
        except Exception as exc:
            raise JudgeError(
                f"the {self.backend_cls.name} back end raised {type(exc).__name__}: {exc}"
            ) from None


def valid_unicode(value: Any) -> Any:
    """``value`` (JSON-like) with lone surrogates replaced: an answer is replayed to the model
    when it is corrected, and a request cannot carry them."""
    if isinstance(value, str):
        return (
            value.encode("utf-8", "replace").decode("utf-8")
            if any("\ud800" <= c <= "\udfff" for c in value)
            else value
        )
    if isinstance(value, list):
        return [valid_unicode(item) for item in value]
    if isinstance(value, dict):
        return {valid_unicode(k): valid_unicode(v) for k, v in value.items()}
    return value


def corrected(reply: JudgeReply, problem: str) -> list[dict[str, Any]]:
    """The turns that send an unreadable answer back with what is wrong with it."""
    text = correction(problem)
    reply = reply._replace(content=valid_unicode(reply.content))
    if not reply.content:
        return [{"role": "assistant", "content": "(no answer)"}, {"role": "user", "content": text}]
    calls = [block["id"] for block in reply.content if block.get("type") == "tool_use" and "id" in block]
    if calls:  # every tool call is answered, as the Messages API requires
        results = [
            {"type": "tool_result", "tool_use_id": call_id, "is_error": True, "content": text}
            for call_id in calls
        ]
        return [{"role": "assistant", "content": reply.content}, {"role": "user", "content": results}]
    return [{"role": "assistant", "content": reply.content}, {"role": "user", "content": text}]
