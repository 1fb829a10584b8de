"""The parts the ``console`` reporter (:mod:`atp.reporters.console`) is made of.

Each module renders one part of the terminal report: :mod:`.style` (colour and symbols for a
stream), :mod:`.words` (figures, times and counts in words), :mod:`.status` (the live status
line), :mod:`.entry` (a test's line and what follows it), :mod:`.failures`, :mod:`.run_details`,
:mod:`.statistics`, :mod:`.baseline` and :mod:`.summary`. Most are pure functions from a result
Struct to lines.
"""
