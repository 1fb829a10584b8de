"""The plugin of the atp-executors distribution (entry point ``executors`` in the ``atp`` group).

Light on purpose: the executor modules are imported only when ATP asks for the registry, and
they import their cluster library (``distributed``) only when an executor is made to work.
"""

from typing import Any

from atp.core.hookspecs import hookimpl


@hookimpl
def atp_register_executors(register: Any) -> None:
    from atp.executors.dask import DaskExecutor

    register(DaskExecutor)
