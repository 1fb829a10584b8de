"""An example third-party ATP plugin: the ``word_count`` assertion.

This module is what the ``atp`` entry point names. It stays light: the evaluator's module is
imported only when ATP asks for the evaluators, so ``atp --help`` does not pay for it.
"""

from typing import Any

from atp.core.hookspecs import hookimpl


@hookimpl
def atp_register_evaluators(register: Any) -> None:
    from atp_wordcount.evaluator import WordCount

    register(WordCount)
