"""Judge back ends: what sends a prompt to a model and brings its answer back.

A back end is a :class:`JudgeBackend` subclass. The built-in one, ``anthropic``, speaks the
Anthropic Messages API through the ``anthropic`` SDK. Others come from plugins: a distribution
names its class in the ``atp.judges`` entry-point group::

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
from abc import ABC, abstractmethod
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any, ClassVar, NamedTuple

from atp.core.errors import ConfigError

ENTRY_POINT_GROUP = "atp.judges"


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

    def __init__(self, settings: Any, api_key: str | None) -> None:
        """``settings`` are the judge's settings (:class:`~atp.evaluators.judge.judge.JudgeSettings`)."""
        self.settings = settings
        self.api_key = api_key

    @abstractmethod
    async def send(self, call: JudgeCall) -> JudgeReply:
        """Send one request; raise :class:`TransientJudgeError` or :class:`JudgeError`."""

    async def aclose(self) -> None:  # noqa: B027 - not every back end holds anything
        """Release what the back end holds (connections); called when the judge is done."""


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
    if name == "anthropic":
        from atp.evaluators.judge.anthropic_backend import AnthropicJudge

        return AnthropicJudge
    found: Any = None
    if ":" in name:
        module_name, _, attribute = name.partition(":")
        try:
            found = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"judge back end {name!r} cannot be loaded: {exc}") from None
    else:
        matches = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if not matches:
            known = sorted({"anthropic", *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))})
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
}
"""List prices in USD per million input and output tokens, by model name prefix (the longest
prefix that matches wins); a model not listed has no known cost unless the settings give
``price_per_mtok``."""


def price_of(model: str, configured: tuple[float, float] | None = None) -> tuple[float, float] | None:
    """The (input, output) USD price per million tokens of ``model``."""
    if configured is not None:
        return configured
    best = max((prefix for prefix in PRICES_PER_MTOK if model.startswith(prefix)), key=len, default=None)
    return PRICES_PER_MTOK[best] if best is not None else None


def cost_of(input_tokens: int, output_tokens: int, price: tuple[float, float] | None) -> float | None:
    if price is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000
