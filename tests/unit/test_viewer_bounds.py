"""``atp view`` bounded per request (issue 26): a report asked for again is not read again, and
no more than MAX_RENDERS are made at once, however many requests come."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from atp.cli import viewer
from atp.cli.viewer import MAX_RENDERS, ReportCache, Run
from atp.core.results import HEADER_FILE, RESULTS_FILE


def run_in(folder: Path) -> Run:
    folder.mkdir()
    (folder / HEADER_FILE).write_text("{}")
    (folder / RESULTS_FILE).write_text("")
    return Run(folder.name, folder, "s", "a", datetime.now(timezone.utc), results=None)  # type: ignore[arg-type]


class Renderer:
    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self.calls = 0
        self.now = 0
        self.most = 0
        self.lock = threading.Lock()

    def __call__(self, store: Any, results: Any) -> bytes:
        with self.lock:
            self.calls += 1
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(self.seconds)
        with self.lock:
            self.now -= 1
        return b"<html>report</html>"


def test_a_report_is_rendered_again_only_once_its_run_changed(tmp_path: Path) -> None:
    render = Renderer()
    cache = ReportCache(render)
    run = run_in(tmp_path / "r1")
    for _ in range(5):
        assert cache.get(run, None) == b"<html>report</html>"
    assert render.calls == 1
    (run.directory / RESULTS_FILE).write_text('{"more": 1}\n')
    cache.get(run, None)
    assert render.calls == 2


def test_no_more_than_max_renders_at_once_and_a_busy_viewer_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    render = Renderer(seconds=0.3)
    cache = ReportCache(render)
    runs = [run_in(tmp_path / f"r{i}") for i in range(6)]
    threads = [threading.Thread(target=cache.get, args=(run, None)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert render.calls == 6 and render.most == MAX_RENDERS

    monkeypatch.setattr(viewer, "RENDER_WAIT_SECONDS", 0.05)
    slow = ReportCache(Renderer(seconds=0.5))
    busy = [threading.Thread(target=slow.get, args=(run, None)) for run in runs[:MAX_RENDERS]]
    for thread in busy:
        thread.start()
    time.sleep(0.1)
    with pytest.raises(TimeoutError):
        slow.get(runs[-1], None)
    for thread in busy:
        thread.join()
