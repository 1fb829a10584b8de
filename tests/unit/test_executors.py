"""The built-in executors' plugin (atp-executors): registered without importing the cluster
library, with settings that say what is missing."""

from __future__ import annotations

import subprocess
import sys

import msgspec
import pytest

from atp.core.errors import ConfigError
from atp.executors.dask import DaskExecutor, DaskSettings
from tests.conftest import builtin_plugins


def test_the_dask_executor_is_registered_without_importing_distributed() -> None:
    code = (
        "import sys\n"
        "from atp.core.plugins import Plugins\n"
        "plugins = Plugins()\n"
        "print(plugins.executor('dask').__name__, plugins.owner_name('executor', 'dask'))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'distributed', 'dask', 'tornado', 'cloudpickle'}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines() == ["DaskExecutor executors", "[]"], result.stdout + result.stderr


def test_the_built_in_plugins_list_the_executor() -> None:
    plugins = builtin_plugins()
    assert plugins.executors["dask"] is DaskExecutor
    (info,) = [i for i in plugins.infos() if i.name == "executors"]
    assert info.executors == ["dask"] and info.errors == []


def test_the_dask_executor_needs_an_address() -> None:
    with pytest.raises(ConfigError, match=r"needs the scheduler's address: --address=tcp://HOST:8786"):
        DaskExecutor(DaskSettings())
    executor = DaskExecutor(
        msgspec.convert({"address": "tcp://10.0.0.5:8786", "connect_timeout": 3}, DaskSettings)
    )
    assert (executor.address, executor.connect_timeout) == ("tcp://10.0.0.5:8786", 3.0)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"address": "tcp://h:1", "adress": "x"}, "unknown field `adress`"),
        ({"address": "tcp://h:1", "connect_timeout": 0}, "Expected `float` > 0.0"),
    ],
)
def test_wrong_settings_are_refused(raw: dict[str, object], message: str) -> None:
    with pytest.raises(msgspec.ValidationError, match=message):
        msgspec.convert(raw, DaskSettings)
