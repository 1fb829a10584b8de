"""The fast entry-point scan finds what importlib.metadata finds."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

from atp.core.entrypoints import EntryPoint, entry_points
from tests.conftest import write


def test_same_as_importlib_metadata_for_this_environment() -> None:
    fast = sorted((e.name, e.value, e.distribution, e.version) for e in entry_points("atp"))
    slow = sorted((e.name, e.value, e.dist.name, e.dist.version) for e in metadata.entry_points(group="atp"))  # type: ignore[union-attr]
    assert fast == slow and fast
    console = sorted((e.name, e.value) for e in entry_points("console_scripts"))
    assert console == sorted((e.name, e.value) for e in metadata.entry_points(group="console_scripts"))


def test_dist_info_egg_info_first_distribution_wins(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write(
        first / "my_plugin-1.2.dist-info" / "METADATA",
        "Metadata-Version: 2.1\nName: my-plugin\nVersion: 1.2\n\nbody\n",
    )
    write(
        first / "my_plugin-1.2.dist-info" / "entry_points.txt",
        "# comment\n[console_scripts]\nx = y:z\n\n[atp]\nmine = my_plugin.hooks\nother = my_plugin:obj.attr [extra]\n",
    )
    write(second / "my_plugin-0.9.dist-info" / "entry_points.txt", "[atp]\nold = old_module\n")
    write(second / "legacy.egg-info" / "PKG-INFO", "Name: legacy\nVersion: 3\n")
    write(second / "legacy.egg-info" / "entry_points.txt", "[atp]\nlegacy = legacy_module\n")
    write(second / "not_a_dir.dist-info", "")
    found = entry_points("atp", [str(first), str(second), str(tmp_path / "missing")])
    assert found == [
        EntryPoint("mine", "my_plugin.hooks", "my-plugin", "1.2"),
        EntryPoint("other", "my_plugin:obj.attr [extra]", "my-plugin", "1.2"),
        EntryPoint("legacy", "legacy_module", "legacy", "3"),
    ]


def test_load_resolves_module_and_attribute() -> None:
    assert EntryPoint("x", "os.path").load() is sys.modules["os.path"]
    assert EntryPoint("x", "os:path.join [extra]").load() is sys.modules["os.path"].join
