"""``atp judge calibrate``: how well the judge agrees with people, before CI trusts it.

A labels file holds examples that people have judged: the task, the artifact (inline, or a
file next to the labels file), the criterion, and the people's score (0-1) or verdict
(``pass``/``fail``). The configured judge judges each; the report gives, overall and per
criterion, Cohen's kappa on pass/fail at the threshold, Spearman's rank correlation on scores
(over the examples with a people's score), the confusion counts, and the examples where the
judge and the people disagree most.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import msgspec

from atp.core import files
from atp.core.errors import SuiteError
from atp.core.results import Usage
from atp.core.yamlfile import YamlDocument
from atp.evaluators.judge import agreement
from atp.evaluators.judge.backend import cost_of
from atp.evaluators.judge.judge import Judge, JudgeFailed
from atp.evaluators.judge.prompt import CRITERIA, CUSTOM, build_prompt, cut, passes

Fraction = Annotated[float, msgspec.Meta(ge=0, le=1)]
MAX_ARTIFACT_BYTES = 4 * 1024 * 1024
NOTABLE_GAP = 0.1
"""A disagreement listed: pass/fail differ, or the scores are this far apart or more."""
FEW_EXAMPLES = 20
"""Below this many examples of a criterion, the report says its figures are rough."""


class LabelsError(SuiteError):
    """An error in a labels file, located like a suite error (file, entry, line)."""


class LabelledExample(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    id: Annotated[str, msgspec.Meta(min_length=1)]
    task: str
    criteria: str
    artifact: str | None = None
    artifact_file: str | None = None
    """A file with the artifact, relative to the labels file."""
    prompt: str | None = None
    human_score: Fraction | None = None
    human: Literal["pass", "fail"] | None = None
    """The people's verdict; without it, ``human_score`` at the threshold decides."""
    note: str | None = None

    def __post_init__(self) -> None:
        if (self.artifact is None) == (self.artifact_file is None):
            raise ValueError("give the artifact as 'artifact' (text) or 'artifact_file', one of them")
        if self.human_score is None and self.human is None:
            raise ValueError("give the people's judgement: 'human_score' (0-1) or 'human' (pass/fail)")
        known = [*CRITERIA, CUSTOM]
        if self.criteria not in known:
            raise ValueError(f"unknown criterion {self.criteria!r} (known: {', '.join(known)})")
        if self.criteria == CUSTOM and not (self.prompt and self.prompt.strip()):
            raise ValueError("criteria: custom needs a 'prompt' saying what to judge")


class LabelsFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    version: str = "1.0"
    threshold: Fraction | None = None
    examples: Annotated[list[LabelledExample], msgspec.Meta(min_length=1)]


class Labels(msgspec.Struct, kw_only=True):
    path: str
    threshold: float | None
    examples: list[LabelledExample]
    artifacts: list[str]
    """Each example's artifact text."""


def load_labels(path: Path) -> Labels:
    """The labels file, checked (errors name the file, the entry and the line)."""
    doc = YamlDocument.load(path, LabelsError)
    spec = doc.convert(doc.data if doc.data is not None else {}, LabelsFile)
    seen: dict[str, int] = {}
    texts: list[str] = []
    for index, example in enumerate(spec.examples):
        if example.id in seen:
            raise doc.error(
                f"example id {example.id!r} is used twice (first as example {seen[example.id]})",
                ("examples", index, "id"),
            )
        seen[example.id] = index
        if example.artifact is not None:
            texts.append(example.artifact)
            continue
        folder = path.parent.resolve()
        file = (folder / str(example.artifact_file)).resolve()
        if not file.is_relative_to(folder):
            raise doc.error(
                f"artifact_file {example.artifact_file!r} is outside the labels file's folder {folder}",
                ("examples", index, "artifact_file"),
            )
        try:
            with files.open_read(file) as handle:  # a regular file only
                data = handle.read(MAX_ARTIFACT_BYTES + 1)
        except OSError as exc:
            raise doc.error(
                f"artifact_file {example.artifact_file!r} cannot be read: {exc.strerror or exc}",
                ("examples", index, "artifact_file"),
            ) from None
        if len(data) > MAX_ARTIFACT_BYTES:
            raise doc.error(
                f"artifact_file {example.artifact_file!r} is larger than 4 MiB",
                ("examples", index, "artifact_file"),
            )
        texts.append(data.decode("utf-8", "replace"))
    return Labels(path=str(path), threshold=spec.threshold, examples=spec.examples, artifacts=texts)


class Rated(msgspec.Struct, kw_only=True, omit_defaults=True):
    id: str
    criterion: str
    human_score: float | None = None
    human_pass: bool
    judge_score: float
    judge_pass: bool
    gap: float
    """How far apart they are: the score difference when people gave a score, else the judge's
    distance from the threshold when they disagree on pass/fail (0 when they agree)."""
    explanation: str = ""


class Agreement(msgspec.Struct, kw_only=True):
    examples: int
    kappa: float | None
    """Cohen's kappa on pass/fail; ``None`` when undefined (one answer throughout)."""
    spearman: float | None
    """Spearman's rho over the ``scored`` examples; ``None`` when undefined."""
    scored: int
    agreement: float | None
    """The share of examples where pass/fail agree."""
    both_pass: int
    judge_only_pass: int
    people_only_pass: int
    both_fail: int


class Failure(msgspec.Struct, kw_only=True):
    id: str
    message: str


class CalibrationReport(msgspec.Struct, kw_only=True):
    labels: str
    backend: str
    model: str
    threshold: float
    samples: int
    examples: int
    judged: int
    overall: Agreement
    criteria: dict[str, Agreement]
    disagreements: list[Rated]
    errors: list[Failure]
    usage: Usage


def measure(rated: list[Rated]) -> Agreement:
    judge = [r.judge_pass for r in rated]
    people = [r.human_pass for r in rated]
    scored = [r for r in rated if r.human_score is not None]
    table = agreement.confusion(judge, people)
    return Agreement(
        examples=len(rated),
        kappa=_round(agreement.cohen_kappa(judge, people)),
        spearman=_round(
            agreement.spearman([r.judge_score for r in scored], [float(r.human_score or 0.0) for r in scored])
        ),
        scored=len(scored),
        agreement=_round(table.agreement),
        both_pass=table.both_pass,
        judge_only_pass=table.judge_only_pass,
        people_only_pass=table.people_only_pass,
        both_fail=table.both_fail,
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def rate(example: LabelledExample, judge_score: float, threshold: float, explanation: str) -> Rated:
    human_pass = (
        example.human == "pass"
        if example.human is not None
        else float(example.human_score or 0.0) >= threshold
    )
    judge_pass = passes(judge_score, threshold)
    if example.human_score is not None:
        gap = abs(judge_score - example.human_score)
    else:
        gap = abs(judge_score - threshold) if judge_pass != human_pass else 0.0
    return Rated(
        id=example.id,
        criterion=example.criteria,
        human_score=example.human_score,
        human_pass=human_pass,
        judge_score=round(judge_score, 4),
        judge_pass=judge_pass,
        gap=round(gap, 4),
        explanation=explanation,
    )


async def calibrate(
    labels: Labels, judge: Judge, *, threshold: float | None = None, samples: int | None = None, show: int = 5
) -> CalibrationReport:
    """Judge every labelled example (as many at once as the judge's ``max_concurrent``) and
    measure the agreement."""
    settings = judge.settings
    mark = (
        threshold
        if threshold is not None
        else labels.threshold
        if labels.threshold is not None
        else settings.threshold
    )
    count = samples or settings.samples
    results: list[Rated | Failure | None] = [None] * len(labels.examples)
    usage = Usage()

    async def one(index: int) -> None:
        example = labels.examples[index]
        artifact, _ = cut(labels.artifacts[index], settings.max_artifact_chars)  # as llm_eval sends it
        prompt = build_prompt(example.task, artifact, example.criteria, example.prompt)
        try:
            judgement = await judge.judge(prompt, count)
        except JudgeFailed as failed:
            spent = failed.spent
            cost = cost_of(spent.input_tokens, spent.output_tokens, judge.price)
            results[index] = Failure(id=example.id, message=str(failed))
        else:
            spent, cost = judgement.spent, judgement.cost_usd
            results[index] = rate(example, judgement.score, mark, judgement.samples[0].verdict.explanation)
        usage.add(
            Usage(
                calls=spent.calls,
                cached=spent.cached,
                input_tokens=spent.input_tokens,
                output_tokens=spent.output_tokens,
                cost_usd=cost,
            )
        )

    try:
        async with anyio.create_task_group() as group:
            for index in range(len(labels.examples)):
                group.start_soon(one, index)
    finally:
        with anyio.CancelScope(shield=True):
            await judge.aclose()
    rated = [r for r in results if isinstance(r, Rated)]
    errors = [r for r in results if isinstance(r, Failure)]
    criteria = sorted({r.criterion for r in rated})
    disagreeing = sorted(
        (r for r in rated if r.judge_pass != r.human_pass or r.gap >= NOTABLE_GAP),
        key=lambda r: (r.judge_pass == r.human_pass, -r.gap, r.id),
    )
    return CalibrationReport(
        labels=labels.path,
        backend=judge.backend_name,
        model=judge.model,
        threshold=mark,
        samples=count,
        examples=len(labels.examples),
        judged=len(rated),
        overall=measure(rated),
        criteria={name: measure([r for r in rated if r.criterion == name]) for name in criteria},
        disagreements=disagreeing[:show],
        errors=errors,
        usage=usage,
    )


def _figure(value: float | None, percent: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value * 100:.0f}%" if percent else f"{value:.2f}"


def render_text(report: CalibrationReport) -> str:
    """The report for a terminal."""
    lines = [
        f"Judge calibration: {report.labels} ({report.examples} examples; {report.backend} {report.model}, "
        f"threshold {report.threshold:.2f}, {report.samples} sample{'s' if report.samples != 1 else ''} each)",
        "",
    ]
    rows = [("criterion", "n", "kappa", "spearman", "agree", "false pass", "false fail")]
    for name, measured in [*report.criteria.items(), ("all", report.overall)]:
        rows.append(
            (
                name,
                str(measured.examples),
                _figure(measured.kappa),
                _figure(measured.spearman)
                + (f" ({measured.scored})" if measured.scored != measured.examples else ""),
                _figure(measured.agreement, percent=True),
                str(measured.judge_only_pass),
                str(measured.people_only_pass),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        lines.append(
            "  ".join(
                cell.ljust(widths[0]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
            ).rstrip()
        )
    lines.append("")
    lines.append(
        "false pass: the judge passed what people failed; false fail: the judge failed what people passed."
    )
    few = [name for name, m in report.criteria.items() if m.examples < FEW_EXAMPLES]
    if few:
        lines.append(
            f"Fewer than {FEW_EXAMPLES} examples of {', '.join(few)}: read those figures as rough "
            "(kappa above 0.6 is commonly taken as substantial agreement)."
        )
    if report.disagreements:
        lines.append("")
        lines.append("Where the judge and people disagree most:")
        for r in report.disagreements:
            people = f"{r.human_score:.2f}" if r.human_score is not None else ""
            people += f" ({'pass' if r.human_pass else 'fail'})"
            judged = f"{r.judge_score:.2f} ({'pass' if r.judge_pass else 'fail'})"
            lines.append(f"  {r.id} [{r.criterion}]: people {people.strip()}, judge {judged}")
            if r.explanation:
                lines.append(f"      judge: {_one_line(r.explanation)}")
    for failure in report.errors:
        lines.append(f"  not judged: {failure.id}: {failure.message}")
    u = report.usage
    cost = f", ${u.cost_usd:.4f}" if u.cost_usd is not None else ""
    lines.append("")
    lines.append(
        f"Judge usage: {u.calls} calls, {u.cached} from the cache, {u.input_tokens + u.output_tokens:,} tokens{cost}"
    )
    return "\n".join(lines)


def _one_line(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def report_json(report: CalibrationReport) -> bytes:
    data: Any = msgspec.to_builtins(report)
    return msgspec.json.format(msgspec.json.encode(data), indent=2) + b"\n"
