"""Finding the entry points of one group without importing ``importlib.metadata``.

Every ``atp`` command looks up the ``atp`` entry-point group, so it is on the start-up path of
``atp --help``; importing ``importlib.metadata`` alone costs more than the whole look-up below.
This reads what ``importlib.metadata`` would: the ``entry_points.txt`` of each ``*.dist-info``
and ``*.egg-info`` folder on ``sys.path``, the first distribution of a name winning. Where
``sys.path`` holds something this does not read (a zip archive), it falls back to
``importlib.metadata``.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

_SUFFIXES = (".dist-info", ".egg-info")
_NORMALIZE = re.compile(r"[-_.]+")


class EntryPoint(NamedTuple):
    name: str
    value: str
    distribution: str | None = None
    version: str | None = None

    def load(self) -> Any:
        """Import the module and get the attribute the entry point names (``module:attr``)."""
        target = self.value.split("[", 1)[0].strip()
        module_name, _, attribute = target.partition(":")
        obj: Any = importlib.import_module(module_name.strip())
        for part in attribute.strip().split("."):
            if part:
                obj = getattr(obj, part)
        return obj


def entry_points(group: str, path: Sequence[str] | None = None) -> list[EntryPoint]:
    """The entry points of ``group`` of every distribution found on ``path`` (``sys.path``)."""
    entries = list(sys.path if path is None else path)
    if any(os.path.isfile(entry) for entry in entries if entry):
        return _from_importlib_metadata(group)
    found: list[EntryPoint] = []
    seen: set[str] = set()
    for entry in entries:
        folder = entry or "."
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if not name.endswith(_SUFFIXES):
                continue
            key = _NORMALIZE.sub("_", name.rsplit(".", 1)[0].split("-", 1)[0]).lower()
            if key in seen:
                continue
            meta_dir = os.path.join(folder, name)
            if not os.path.isdir(meta_dir):
                continue
            seen.add(key)
            points = _read_group(os.path.join(meta_dir, "entry_points.txt"), group)
            if points:
                dist, version = _name_and_version(meta_dir)
                found.extend(EntryPoint(n, v, dist, version) for n, v in points)
    return found


def _read_group(path: str, group: str) -> list[tuple[str, str]]:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return []
    points: list[tuple[str, str]] = []
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
        elif current == group and "=" in line:
            name, _, value = line.partition("=")
            points.append((name.strip(), value.strip()))
    return points


def _name_and_version(meta_dir: str) -> tuple[str | None, str | None]:
    """The ``Name`` and ``Version`` headers of the distribution's metadata."""
    for filename in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(meta_dir, filename), encoding="utf-8") as handle:
                headers = _headers(handle)
        except OSError:
            continue
        return headers.get("name"), headers.get("version")
    return None, None


def _headers(lines: Iterable[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in lines:
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if sep and key.lower() in ("name", "version"):
            headers[key.lower()] = value.strip()
            if len(headers) == 2:
                break
    return headers


def _from_importlib_metadata(group: str) -> list[EntryPoint]:  # pragma: no cover - zip on sys.path
    from importlib import metadata

    points = []
    for ep in metadata.entry_points(group=group):
        dist = ep.dist
        points.append(
            EntryPoint(
                ep.name,
                ep.value,
                dist.name if dist is not None else None,
                dist.version if dist is not None else None,
            )
        )
    return points
