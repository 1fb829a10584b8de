"""Judgements kept on disk, so that judging an unchanged artifact again costs nothing.

An entry is keyed by a hash of everything that decides the answer: the back end, the model,
the temperature, the token limit, the system prompt, the messages, the tool's schema and the
sample's number (each of ``samples: N`` is a judgement of its own). It holds the judgement and
the tokens it cost. Entries are written whole (a temporary file renamed into place) and checked
when read: an entry that does not read back as a judgement is a miss, never an error.

The cache is ``$XDG_CACHE_HOME/atp/judge`` (``~/.cache/atp/judge``) unless the settings'
``cache_dir`` says otherwise; ``atp test --no-judge-cache`` (settings ``cache: false``) neither
reads nor writes it. Deleting the folder is always safe.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, NamedTuple

from atp.core import files
from atp.evaluators.judge.prompt import AnswerProblem, Verdict, read_fields

CACHE_FORMAT = 1
MAX_ENTRY_BYTES = 1024 * 1024
"""An entry larger than this is not read (a judgement is a few kilobytes)."""

logger = logging.getLogger("atp.judge")


def default_cache_dir(environ: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "atp" / "judge"


def cache_key(parts: dict[str, Any]) -> str:
    """The hash of what decides a judgement."""
    text = json.dumps(
        {"format": CACHE_FORMAT, **parts}, sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Cached(NamedTuple):
    verdict: Verdict
    model: str | None


class JudgeCache:
    """A folder of judgements, one JSON file each, by key."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._warned = False

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> Cached | None:
        try:
            with files.open_read(self._path(key)) as handle:  # a regular file only: never a FIFO
                raw = handle.read(MAX_ENTRY_BYTES + 1)
            if len(raw) > MAX_ENTRY_BYTES:
                return None
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
                return None
            model = data.get("model")
            return Cached(read_fields(data.get("verdict")), model if isinstance(model, str) else None)
        except (OSError, ValueError, RecursionError, AnswerProblem):
            return None

    def put(self, key: str, verdict: Verdict, model: str | None) -> None:
        """Store a judgement; a cache that cannot be written is warned about once and left
        alone (the judgement stands, only the next run pays again)."""
        path = self._path(key)
        data = json.dumps(
            {"format": CACHE_FORMAT, "model": model, "verdict": verdict.as_dict()}, ensure_ascii=False
        )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            files.write_atomic(path, data.encode("utf-8"))  # (a lone surrogate: UnicodeEncodeError)
        except (OSError, ValueError) as exc:
            if not self._warned:
                self._warned = True
                logger.warning(
                    "the judge's cache %s cannot be written (%s): judgements are not kept",
                    self.directory,
                    exc,
                )
