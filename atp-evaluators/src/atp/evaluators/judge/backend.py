"""Judge back ends: what sends a prompt to a model and brings its answer back.

A back end is a :class:`JudgeBackend` subclass. Two are built in: ``anthropic`` speaks
Anthropic's Messages API through the ``anthropic`` SDK, ``openai`` OpenAI's Chat Completions API
through the ``openai`` SDK; without ``backend`` in the settings, the model's name chooses
(:func:`infer_backend`). Others come from plugins: a distribution names its class in the
``atp.judges`` entry-point group::

    [project.entry-points."atp.judges"]
    my-gateway = "my_package.judge:GatewayJudge"

and the config chooses it with ``evaluators.llm_judge.backend: my-gateway`` (a
``module:Class`` path works too, for a class in the project). A back end sends one request
(:class:`JudgeCall`) and returns the model's answer (:class:`JudgeReply`) or raises
:class:`TransientJudgeError` (worth asking again: a rate limit, a server error, a connection
that failed) or :class:`JudgeError` (not worth it: a wrong key, a refused request). Reading the
answer, correcting the model, retrying, sampling, caching and counting cost are ATP's, the same
for every back end (:mod:`atp.evaluators.judge.judge`).
"""

from __future__ import annotations

import importlib
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any, ClassVar, NamedTuple

from atp.core.errors import ConfigError

ENTRY_POINT_GROUP = "atp.judges"

BUILT_IN: dict[str, str] = {
    "anthropic": "atp.evaluators.judge.anthropic_backend:AnthropicJudge",
    "openai": "atp.evaluators.judge.openai_backend:OpenAIJudge",
}
"""The built-in back ends, by name."""
BASE_URL_VARIABLES: dict[str, str] = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}
"""The environment variable each built-in back end's SDK reads its base URL from."""
SERVICES: dict[str, str] = {"anthropic": "Anthropic", "openai": "OpenAI"}

_FAMILIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("openai", re.compile(r"(?:ft:)?(?:gpt-|chatgpt-|o[1-9](?:-|$))")),
    ("anthropic", re.compile(r"claude-")),
)

RETRIED_STATUSES = frozenset({408, 409, 429})
"""HTTP statuses worth asking again after, besides every 5xx (Anthropic's 529, overloaded,
among them)."""


class JudgeCall(NamedTuple):
    """One request to the model."""

    model: str
    system: str
    messages: list[dict[str, Any]]
    """Messages API shaped: ``{"role": "user"|"assistant", "content": str | [blocks]}``."""
    tool: dict[str, Any]
    """The tool the answer is asked for as (``name``, ``description``, ``input_schema``)."""
    temperature: float | None
    max_tokens: int


class JudgeReply(NamedTuple):
    """The model's answer to one :class:`JudgeCall`."""

    tool_input: Any
    """The input of the model's call of the tool, when it called it (else ``None``)."""
    text: str
    """The text it wrote (all text blocks joined)."""
    content: list[dict[str, Any]]
    """The answer's content blocks as sent, to be replayed when the model is corrected."""
    tool_use_id: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    model: str | None = None
    """The model that answered, when the service says."""


class JudgeError(Exception):
    """The judge cannot answer, and asking again would not help (a wrong key, say)."""


class TransientJudgeError(JudgeError):
    """The judge did not answer this time (rate limit, server error, connection); worth asking
    again after ``retry_after`` seconds when the service said how long."""

    def __init__(self, message: str, retry_after: float | None = None, *, unreachable: bool = False) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.unreachable = unreachable
        """The service could not be reached at all (no connection), rather than busy."""


class JudgeBackend(ABC):
    """Sends judge requests to one model service."""

    name: ClassVar[str]
    needs_key: ClassVar[bool] = True
    """Whether the back end needs an API key; without one, ``llm_eval`` checks are skipped."""
    key_variable: ClassVar[str | None] = None
    """The environment variable the key is read from when the settings name none."""
    key_secret: ClassVar[str | None] = None
    """The entry of the config's ``secrets:`` the key is read from next."""
    default_model: ClassVar[str] = "claude-sonnet-4-6"
    """The model asked when the settings name none."""
    base_url_variable: ClassVar[str | None] = None
    """The environment variable the base URL is read from when the settings give none."""

    def __init__(self, settings: Any, api_key: str | None) -> None:
        """``settings`` are the judge's settings (:class:`~atp.evaluators.judge.judge.JudgeSettings`)."""
        self.settings = settings
        self.api_key = api_key

    @abstractmethod
    async def send(self, call: JudgeCall) -> JudgeReply:
        """Send one request; raise :class:`TransientJudgeError` or :class:`JudgeError`."""

    async def aclose(self) -> None:  # noqa: B027 - not every back end holds anything
        """Release what the back end holds (connections); called when the judge is done."""

    @classmethod
    def endpoint(cls, settings: Any, environ: Mapping[str, str] = os.environ) -> str | None:
        """The base URL requests go to: the settings' ``base_url``, else the back end's
        environment variable, else ``None`` (the service's own)."""
        configured: str | None = settings.base_url
        if configured:
            return configured
        return (environ.get(cls.base_url_variable) or None) if cls.base_url_variable else None


def model_family(model: str | None) -> str | None:
    """The built-in back end whose service a model's name belongs to (``gpt-4.1``, ``o3``:
    ``openai``; ``claude-...``: ``anthropic``), or ``None`` when the name does not say."""
    if model:
        for backend, pattern in _FAMILIES:
            if pattern.match(model):
                return backend
    return None


def infer_backend(model: str | None) -> str:
    """The back end used when the settings name none: the model's family, else ``anthropic``."""
    return model_family(model) or "anthropic"


def pairing_problem(
    backend: str | None, model: str | None, base_url: str | None, environ: Mapping[str, str] = os.environ
) -> str | None:
    """What is wrong with a built-in back end asked for a model of the other's service (which
    its service does not serve), or ``None``. A base URL (the settings' or the SDK's variable)
    points elsewhere, a proxy or a compatible server, which may serve any model: then
    nothing is said."""
    family = model_family(model)
    if backend not in BUILT_IN or family is None or family == backend:
        return None
    if base_url or environ.get(BASE_URL_VARIABLES[backend]):
        return None
    return (
        f"model {model!r} is {SERVICES[family]}'s, which the "
        f"{backend} back end's service does not serve: set backend: {family} (or leave backend out: "
        f"the model's name chooses it), or base_url for a server that serves it"
    )


def retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds; an HTTP date is not used)."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue
        if seconds >= 0:
            return seconds
    return None


def find_key(
    backend: type[JudgeBackend],
    configured: str | None,
    secrets: Mapping[str, str],
    environ: Mapping[str, str],
) -> str | None:
    """The API key: the settings' ``api_key``, else the back end's environment variable, else
    its entry in the config's ``secrets:``; an empty value counts as none."""
    for value in (
        configured,
        environ.get(backend.key_variable) if backend.key_variable else None,
        secrets.get(backend.key_secret) if backend.key_secret else None,
    ):
        if value:
            return value
    return None


def load_backend(name: str) -> type[JudgeBackend]:
    """The back end class named ``name``: built in, from the ``atp.judges`` entry points, or a
    ``module:Class`` path."""
    found: Any = None
    if name in BUILT_IN:
        module_name, _, attribute = BUILT_IN[name].partition(":")
        found = getattr(importlib.import_module(module_name), attribute)
    elif ":" in name:
        module_name, _, attribute = name.partition(":")
        try:
            found = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"judge back end {name!r} cannot be loaded: {exc}") from None
    else:
        matches = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if not matches:
            known = sorted({*BUILT_IN, *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))})
            raise ConfigError(
                f"no judge back end named {name!r} (known: {', '.join(known)}; a plugin adds one in the "
                f"{ENTRY_POINT_GROUP!r} entry-point group, or give module:Class)"
            )
        try:
            found = matches[0].load()
        except Exception as exc:
            raise ConfigError(
                f"judge back end {name!r} cannot be loaded: {type(exc).__name__}: {exc}"
            ) from None
    if not (isinstance(found, type) and issubclass(found, JudgeBackend)):
        raise ConfigError(f"judge back end {name!r} is not a JudgeBackend subclass")
    return found


PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-3-5-sonnet": (3.0, 15.0),
    "claude-3-5-haiku": (0.8, 4.0),
    "claude-3-haiku": (0.25, 1.25),
    "claude-3-opus": (15.0, 75.0),
    "gpt-5": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5-nano": (0.05, 0.4),
    "gpt-5-pro": (15.0, 120.0),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-4.1-nano": (0.1, 0.4),
    "gpt-4o": (2.5, 10.0),
    "gpt-4o-mini": (0.15, 0.6),
    "o3": (2.0, 8.0),
    "o3-pro": (20.0, 80.0),
    "o3-mini": (1.1, 4.4),
    "o4-mini": (1.1, 4.4),
}
"""List prices in USD per million input and output tokens, by model name prefix (the longest
prefix that matches wins; it matches the whole name or up to a ``-``: ``gpt-4o`` prices
``gpt-4o-2024-08-06`` but not ``gpt-4o1``, nor ``gpt-5`` ``gpt-5.2``); a model not listed has
no known cost unless the settings give ``price_per_mtok``. Every input token is priced at the
input price (a service's discount for cached input is not known here: the cost is an upper
bound)."""


def price_of(model: str, configured: tuple[float, float] | None = None) -> tuple[float, float] | None:
    """The (input, output) USD price per million tokens of ``model``."""
    if configured is not None:
        return configured
    best = max((p for p in PRICES_PER_MTOK if model == p or model.startswith(p + "-")), key=len, default=None)
    return PRICES_PER_MTOK[best] if best is not None else None


def cost_of(input_tokens: int, output_tokens: int, price: tuple[float, float] | None) -> float | None:
    if price is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000
