"""The judge's prompt, exactly (snapshots in tests/fixtures/judge/prompts), and how its answers
are read."""

from __future__ import annotations

import os

import pytest

from atp.evaluators.judge.prompt import CRITERIA, AnswerProblem, build_prompt, read_fields, read_text
from tests.conftest import ROOT

SNAPSHOTS = ROOT / "tests" / "fixtures" / "judge" / "prompts"
TASK = "Summarise the attached incident report in five bullet points."
ARTIFACT = "- The database failed over at 02:14.\n- Writes were lost for 40 s."


def snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("ATP_UPDATE_SNAPSHOTS"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), (
        f"the prompt changed: ATP_UPDATE_SNAPSHOTS=1 rewrites {path}"
    )


@pytest.mark.parametrize("criterion", sorted(CRITERIA))
def test_the_prompt_of_each_built_in_criterion(criterion: str) -> None:
    prompt = build_prompt(TASK, ARTIFACT, criterion)
    snapshot(criterion, f"SYSTEM:\n{prompt.system}\n\nUSER:\n{prompt.user}\n")


def test_the_prompt_of_a_custom_criterion() -> None:
    prompt = build_prompt(TASK, ARTIFACT, "custom", "Does every bullet name a time?")
    snapshot("custom", f"SYSTEM:\n{prompt.system}\n\nUSER:\n{prompt.user}\n")


def test_the_markers_change_with_the_text_they_enclose() -> None:
    one = build_prompt(TASK, ARTIFACT, "clarity").user
    other = build_prompt(TASK, ARTIFACT + " ", "clarity").user
    assert one.split("<task-")[1][:16] != other.split("<task-")[1][:16]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"score": 1.5, "explanation": "", "issues": [], "strengths": []}, "'score' is 1.5, outside 0-1"),
        ({"score": -0.1, "explanation": "", "issues": [], "strengths": []}, "outside 0-1"),
        ({"score": True, "explanation": "", "issues": [], "strengths": []}, "'score' is true, not a number"),
        ({"score": "0.9", "explanation": "", "issues": [], "strengths": []}, "not a number"),
        ({"score": 0.5, "explanation": 3, "issues": [], "strengths": []}, "'explanation' is not a string"),
        (
            {"score": 0.5, "explanation": "", "issues": "none", "strengths": []},
            "'issues' is not a list of strings",
        ),
        (
            {"score": 0.5, "explanation": "", "issues": [], "strengths": [1]},
            "'strengths' is not a list of strings",
        ),
        ({"score": 0.5}, "the answer lacks 'explanation', 'issues', 'strengths'"),
        (
            {"score": 0.5, "explanation": "", "issues": [], "strengths": [], "confidence": 1},
            "not asked for: 'confidence'",
        ),
        ([0.5], "a JSON list, not an object"),
    ],
)
def test_answers_that_are_not_judgements_are_refused(data: object, problem: str) -> None:
    with pytest.raises(AnswerProblem, match=problem.replace("(", r"\(").replace(")", r"\)")):
        read_fields(data)


def test_a_text_answer_is_the_json_alone() -> None:
    assert read_text('\n{"score": 1, "explanation": "e", "issues": [], "strengths": []}\n').score == 1.0
    for answer in ('```json\n{"score": 1}\n```', 'Score: {"score": 1}', "no json here"):
        with pytest.raises(AnswerProblem, match="not the JSON object alone"):
            read_text(answer)
    with pytest.raises(AnswerProblem, match="not valid JSON"):
        read_text('{"score": 1,}')
