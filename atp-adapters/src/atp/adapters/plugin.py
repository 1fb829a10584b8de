"""The plugin of the atp-adapters distribution (entry point ``adapters`` in the ``atp`` group).

Light on purpose: the adapter modules are imported only when ATP asks for the registry.
"""

from typing import Any

from atp.core.hookspecs import hookimpl


@hookimpl
def atp_register_adapters(register: Any) -> None:
    from atp.adapters.cli import CliAdapter
    from atp.adapters.python import PythonAdapter

    register(CliAdapter)
    register(PythonAdapter)  # an agent that is a Python callable in the ATP process: type: python


@hookimpl
def atp_register_services(register: Any) -> None:
    from atp.adapters.tools import ToolServer

    register(ToolServer)  # the mock tool server: tools: [...] on a test or the suite's defaults
