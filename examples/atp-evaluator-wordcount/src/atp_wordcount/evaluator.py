"""The ``word_count`` assertion: an artifact's text has between ``min`` and ``max`` words."""

from __future__ import annotations

import json

import msgspec

from atp.core.evaluator import EvalContext, Evaluator, check
from atp.core.protocol import FileArtifact, StructuredArtifact
from atp.core.results import Check


class WordCountConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    path: str | None = None
    """A file artifact's path; or"""
    name: str | None = None
    """a structured artifact's name (its data, as JSON text, is counted)."""
    min: int = 0
    max: int | None = None

    def __post_init__(self) -> None:
        if (self.path is None) == (self.name is None):
            raise ValueError("give exactly one of 'path' and 'name'")
        if self.max is not None and self.max < self.min:
            raise ValueError("'max' is below 'min'")


class WordCount(Evaluator):
    name = "word_count"
    summary = "an artifact has between 'min' and 'max' words"
    Config = WordCountConfig

    async def evaluate(self, ctx: EvalContext, config: WordCountConfig) -> list[Check]:
        label = f"word_count:{config.path or config.name}"
        text = None
        for artifact in ctx.response.artifacts:
            if isinstance(artifact, FileArtifact) and artifact.path == config.path:
                text = artifact.content or ""
            elif isinstance(artifact, StructuredArtifact) and artifact.name == config.name:
                text = json.dumps(artifact.data)
        if text is None:
            return [check(label, False, f"no artifact {config.path or config.name!r}")]
        words = len(text.split())
        upper = "" if config.max is None else f" and at most {config.max}"
        expected = f"at least {config.min}{upper} words"
        ok = words >= config.min and (config.max is None or words <= config.max)
        return [check(label, ok, f"expected {expected}; found {words}")]
