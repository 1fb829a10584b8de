"""The plugin of the atp-reporters distribution (entry point ``reporters`` in the ``atp`` group).

Light on purpose: the reporter modules are imported only when ATP asks for the registry.
"""

from typing import Any

from atp.core.hookspecs import hookimpl


@hookimpl
def atp_register_reporters(register: Any) -> None:
    from atp.reporters.console import ConsoleReporter
    from atp.reporters.html import HtmlReporter
    from atp.reporters.json_results import JsonReporter
    from atp.reporters.junit import JunitReporter

    register(ConsoleReporter)
    register(HtmlReporter)
    register(JsonReporter)
    register(JunitReporter)
