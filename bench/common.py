"""Shared helpers for the benchmarks (scripts that print figures; run them from the repository root)."""

from __future__ import annotations

import importlib
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BUILTINS = {
    "adapters": "atp.adapters.plugin",
    "evaluators": "atp.evaluators.plugin",
    "reporters": "atp.reporters.plugin",
}


def plugins():  # type: ignore[no-untyped-def]
    from atp.core.plugins import Plugins
    from atp.core.testing import FunctionAdapterPlugin

    loaded = Plugins(entry_points=False)
    for name, module in BUILTINS.items():
        loaded.register(importlib.import_module(module), name=name)
    loaded.register(FunctionAdapterPlugin(), name="function-adapter")
    return loaded


def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Timer:
    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start
