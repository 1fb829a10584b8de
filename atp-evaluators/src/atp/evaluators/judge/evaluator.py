"""``llm_eval``: an LLM judges an artifact by a criterion (REQ-042, design 8).

::

    - type: llm_eval
      config:
        criteria: factual_accuracy      # or a list, or custom with prompt:
        artifact: report.md             # a path (glob) or a structured artifact's name
        threshold: 0.8                  # default evaluators.llm_judge.threshold (0.7)
        samples: 3                      # default evaluators.llm_judge.samples (1)

Each criterion is one check: it passes when the mean score of the samples is at least the
threshold. Its details hold the score, each sample's score and their spread, the judge's
explanation, issues and strengths, the model, and what the judging spent (also counted in the
run's ``evaluation_usage``, never in the agent's metrics). The judge is Anthropic's or OpenAI's
model (``evaluators.llm_judge.backend``, else chosen by the model's name). Without an API key the checks are
skipped with the reason (``when_unavailable: fail`` makes that an error instead). A judge that
does not answer, or answers twice with something that is not a judgement, makes the run an
error whose check shows what came back.
"""

from __future__ import annotations

import fnmatch
import json
import os
import posixpath
from typing import Annotated, Any, ClassVar

import msgspec

from atp.core.evaluator import CannotEvaluate, EvalContext, Evaluator, skipped, unmet
from atp.core.protocol import Artifact, StructuredArtifact
from atp.core.results import Check
from atp.core.secrets import Masker
from atp.core.text import mask, shorten
from atp.evaluators.artifact import produced, text_of
from atp.evaluators.judge.judge import JudgeSettings
from atp.evaluators.judge.prompt import CRITERIA, CUSTOM, build_prompt, cut, passes

MASK_MARGIN = 4096
"""Characters read beyond ``max_artifact_chars`` before the text is masked and cut: a secret
that straddles the cut is masked whole (no secret is this long)."""

SETTINGS_KEY = "llm_judge"


class LlmEvalConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    criteria: str | list[str]
    prompt: str | None = None
    """For ``criteria: custom``, what to judge; with a built-in criterion, added guidance."""
    threshold: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    artifact: str | None = None
    """The artifact to judge: a file's path (a glob like ``*.md`` matches several) or a
    structured artifact's name; without it, every artifact the agent produced."""
    samples: Annotated[int, msgspec.Meta(ge=1, le=20)] | None = None

    def __post_init__(self) -> None:
        names = [self.criteria] if isinstance(self.criteria, str) else self.criteria
        if not names:
            raise ValueError("'criteria' names no criterion")
        if len(set(names)) != len(names):
            raise ValueError("'criteria' names a criterion twice")
        known = [*CRITERIA, CUSTOM]
        for name in names:
            if name not in known:
                raise ValueError(f"unknown criterion {name!r} (known: {', '.join(known)})")
        if CUSTOM in names and not (self.prompt and self.prompt.strip()):
            raise ValueError("criteria: custom needs a 'prompt' saying what to judge")

    @property
    def names(self) -> list[str]:
        return [self.criteria] if isinstance(self.criteria, str) else list(self.criteria)


def _matches(artifact: Artifact, pattern: str) -> bool:
    if isinstance(artifact, StructuredArtifact):
        return artifact.name == pattern or fnmatch.fnmatchcase(artifact.name, pattern)
    path = posixpath.normpath(artifact.path.replace(os.sep, "/"))
    return path == posixpath.normpath(pattern) or fnmatch.fnmatchcase(path, pattern)


def _label(artifact: Artifact) -> str:
    return artifact.name if isinstance(artifact, StructuredArtifact) else artifact.path


def task_text(ctx: EvalContext) -> str:
    """The task as the judge sees it: the description, and the input data when there is some."""
    task = ctx.request.task
    text = task.description
    if task.input_data:
        text += "\n\nInput data:\n" + json.dumps(task.input_data, ensure_ascii=False, indent=2)
    return text


class LlmEval(Evaluator):
    name: ClassVar[str] = "llm_eval"
    summary: ClassVar[str] = (
        "an LLM judges an artifact by a criterion (needs atp-evaluators[judge] or [judge-openai] and an API key)"
    )
    category = "quality"
    Config = LlmEvalConfig
    Settings = JudgeSettings
    settings_key: ClassVar[str | None] = SETTINGS_KEY
    default_timeout: ClassVar[float] = 600.0

    def __init__(self, settings: Any = None) -> None:
        super().__init__(settings)
        self._judge: Any = None

    @classmethod
    def secret_values(cls, settings: Any) -> list[str]:
        """The judge's API key, wherever it is read from (an environment variable the config
        does not mention included): an error message echoing it is masked."""
        from atp.core.errors import AtpError
        from atp.evaluators.judge.backend import find_key
        from atp.evaluators.judge.judge import backend_of, read_settings

        try:
            judge_settings = read_settings(settings)
            backend = backend_of(judge_settings)
        except AtpError:
            return []
        key = find_key(backend, judge_settings.api_key, {}, os.environ)
        return [key] if key else []

    def judge(self) -> Any:
        """The judge all this evaluator's runs share (one concurrency limit, one cache)."""
        if self._judge is None:
            from atp.evaluators.judge.backend import find_key
            from atp.evaluators.judge.judge import Judge, backend_of, read_settings

            settings = read_settings(self.settings)
            backend = backend_of(settings)
            key = find_key(backend, settings.api_key, self.secrets, os.environ) if backend.needs_key else None
            self._judge = Judge(settings, backend, key)
        return self._judge

    async def aclose(self) -> None:
        if self._judge is not None:
            await self._judge.aclose()

    async def evaluate(self, ctx: EvalContext, config: LlmEvalConfig) -> list[Check]:
        from atp.evaluators.judge.backend import cost_of
        from atp.evaluators.judge.judge import JudgeFailed

        judge = self.judge()
        settings = judge.settings
        names = config.names
        if judge.backend_cls.needs_key and not judge.api_key:
            backend = judge.backend_cls
            where = " or ".join(
                part
                for part in (
                    backend.key_variable and f"set {backend.key_variable}",
                    backend.key_secret and f"secrets.{backend.key_secret}",
                    f"evaluators.{SETTINGS_KEY}.api_key",
                )
                if part
            )
            reason = f"the LLM judge ({judge.backend_name}) has no API key ({where})"
            if settings.when_unavailable == "fail":
                raise CannotEvaluate(reason)
            return [skipped(f"llm_eval:{name}", reason) for name in names]
        artifacts = [
            a for a in ctx.response.artifacts if config.artifact is None or _matches(a, config.artifact)
        ]
        if not artifacts:
            wanted = "artifact" + (f" matching {config.artifact!r}" if config.artifact else "")
            return [
                unmet(
                    f"llm_eval:{name}",
                    f"nothing to judge: the agent produced no {wanted}",
                    produced=produced(ctx),
                )
                for name in names
            ]
        content, notes = await self._content(ctx, artifacts, settings.max_artifact_chars)
        if content is None:
            return [unmet(f"llm_eval:{name}", f"nothing to judge: {'; '.join(notes)}") for name in names]
        threshold = config.threshold if config.threshold is not None else settings.threshold
        samples = config.samples or settings.samples
        task = task_text(ctx)
        checks: list[Check] = []
        for name in names:
            prompt = build_prompt(task, content, name, config.prompt)
            label = f"llm_eval:{name}"
            try:
                judgement = await judge.judge(prompt, samples, masker=ctx.masker)
            except JudgeFailed as failed:
                self._count(
                    ctx,
                    judge,
                    failed.spent,
                    cost_of(failed.spent.input_tokens, failed.spent.output_tokens, judge.price),
                )
                raise CannotEvaluate(
                    f"{label}: {failed}", criterion=name, model=judge.model, **failed.details
                ) from None
            self._count(ctx, judge, judgement.spent, judgement.cost_usd)
            checks.append(
                self._check(
                    label,
                    name,
                    judgement,
                    threshold,
                    [_label(a) for a in artifacts],
                    notes,
                    judge.model,
                    ctx.masker,
                )
            )
        return checks

    @staticmethod
    def _count(ctx: EvalContext, judge: Any, spent: Any, cost: float | None) -> None:
        ctx.add_usage(
            f"llm_eval/{judge.model}",
            calls=spent.calls,
            cached=spent.cached,
            input_tokens=spent.input_tokens,
            output_tokens=spent.output_tokens,
            cost_usd=cost,
        )

    @staticmethod
    async def _content(
        ctx: EvalContext, artifacts: list[Artifact], limit: int
    ) -> tuple[str | None, list[str]]:
        """The text judged: one artifact's, or several one after the other, each under a line
        naming it; masked (the judge is another party: ATP's secrets stay here) and cut at
        ``limit`` characters (the cut is said in the text and the notes). Artifacts are read
        one at a time and no further than the limit needs."""
        parts: list[str] = []
        notes: list[str] = []
        budget = limit + MASK_MARGIN
        size = 0
        for index, artifact in enumerate(artifacts):
            if size >= budget:
                notes.append(
                    f"{len(artifacts) - index} more artifacts not read: the judge's limit was reached"
                )
                break
            found = await text_of(artifact, ctx)
            if found.note:
                notes.append(found.note)
            if found.text is None:
                continue
            part = found.text if len(artifacts) == 1 else f"=== {_label(artifact)} ===\n{found.text}"
            part = part[: budget - size]
            parts.append(part)
            size += len(part) + 2
        if not parts:
            return None, notes
        text, note = cut(mask("\n\n".join(parts), ctx.masker), limit)
        if note:
            notes.append(note)
        return text, notes

    @staticmethod
    def _check(
        label: str,
        criterion: str,
        judgement: Any,
        threshold: float,
        judged: list[str],
        notes: list[str],
        model: str,
        masker: Masker | None = None,
    ) -> Check:
        """The check of one criterion; the judge's explanation quoted with the secrets of
        ``masker`` (the run's) masked before it is cut."""
        first = judgement.samples[0].verdict
        count = len(judgement.samples)
        score = round(judgement.score, 4)
        passed = passes(judgement.score, threshold)
        relation = "≥" if passed else "<"
        spread = judgement.spread
        about = f" (mean of {count} samples, sd {spread['stdev']:.2f}); first sample" if count > 1 else ""
        message = f"{criterion} scored {score:.2f} {relation} {threshold:.2f}{about}: {shorten(mask(first.explanation, masker), 300)}"
        details: dict[str, Any] = {
            "criterion": criterion,
            "score": score,
            "threshold": threshold,
            "explanation": first.explanation,
            "issues": first.issues,
            "strengths": first.strengths,
            "model": judgement.samples[0].model or model,
            "judged": judged,
            "cached": judgement.spent.cached,
        }
        if count > 1:
            details["scores"] = judgement.scores
            details["spread"] = spread
            details["samples"] = [s.verdict.as_dict() for s in judgement.samples]
        if judgement.spent.retries:
            details["retries"] = judgement.spent.retries
        if judgement.spent.corrections:
            details["corrections"] = judgement.spent.corrections
        if notes:
            details["notes"] = notes
        return Check(name=label, passed=passed, score=score, message=message, details=details)
