"""What a CrewAI crew produced, as ATP data (for the ``crewai`` adapter,
:mod:`atp.adapters.crewai`): the final output as ``output.md`` and, when it has JSON, a
structured ``output`` artifact; each task's output a structured artifact; and any of CrewAI's
values as plain JSON data (:func:`jsonable`)."""

from __future__ import annotations

from typing import Any

import msgspec

from atp.core.protocol import Artifact, FileArtifact, StructuredArtifact

OUTPUT_FILE = "output.md"
"""The file artifact holding the crew's final output as text."""
OUTPUT_NAME = "output"
"""The structured artifact holding the crew's final output as JSON, when it has one."""


def crew_artifacts(crew: Any, output: Any) -> list[Artifact]:
    """The artifacts of a crew's ``output`` (a ``CrewOutput``): the final output, and each task's."""
    raw = output.raw if isinstance(output.raw, str) else str(output.raw)
    artifacts: list[Artifact] = [
        FileArtifact(
            path=OUTPUT_FILE,
            content=raw,
            content_type="text/markdown",
            size_bytes=len(raw.encode("utf-8")),
        )
    ]
    data = output_json(output)
    if data is not None:
        artifacts.append(StructuredArtifact(name=OUTPUT_NAME, data=data))
    tasks = list(getattr(crew, "tasks", None) or [])
    outputs = list(getattr(output, "tasks_output", None) or [])
    taken = {OUTPUT_FILE, OUTPUT_NAME}
    for index, task_output in enumerate(outputs, 1):
        task = tasks[index - 1] if len(tasks) == len(outputs) else None
        own_name = getattr(task, "name", None) if task is not None else None
        name = (
            own_name if isinstance(own_name, str) and own_name and own_name not in taken else f"task_{index}"
        )
        while name in taken:  # (a task named like another artifact)
            name = f"{name}_{index}"
        taken.add(name)
        artifacts.append(StructuredArtifact(name=name, data=task_data(index, task_output)))
    return artifacts


def output_json(output: Any) -> dict[str, Any] | None:
    """An output's JSON (``json_dict``, or its pydantic model as JSON), or ``None``."""
    data = getattr(output, "json_dict", None)
    if not data:
        model = getattr(output, "pydantic", None)
        if model is not None and hasattr(model, "model_dump"):
            try:
                data = model.model_dump(mode="json")
            except Exception:
                data = None
    data = jsonable(data) if data else None
    return data if isinstance(data, dict) else None


def task_data(index: int, output: Any) -> dict[str, Any]:
    """A task's output as the data of its structured artifact."""
    raw = getattr(output, "raw", "")
    data: dict[str, Any] = {
        "index": index,
        "name": getattr(output, "name", None),
        "description": getattr(output, "description", None),
        "expected_output": getattr(output, "expected_output", None),
        "agent": getattr(output, "agent", None),
        "raw": raw if isinstance(raw, str) else str(raw),
        "output_format": enum_value(getattr(output, "output_format", None)),
    }
    structured = output_json(output)
    if structured is not None:
        data["json"] = structured
    result = jsonable(data)
    return result if isinstance(result, dict) else {"raw": str(raw)}


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: a pydantic model as its JSON, what JSON cannot hold as text."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value

    def fallback(item: Any) -> Any:
        if hasattr(item, "model_dump"):
            try:
                return item.model_dump(mode="json")
            except Exception:
                pass
        return str(item)

    try:
        return msgspec.json.decode(msgspec.json.encode(value, enc_hook=fallback))
    except Exception:
        return str(value)


def enum_value(item: Any) -> Any:
    """An enum's value (CrewAI's call types and output formats), or the item."""
    return getattr(item, "value", item)
