"""The headings of a markdown text, found in time linear in its length however the agent wrote
its lines (what the ``sections`` evaluator looks for)."""


def headings(text: str) -> list[str]:
    """The ATX headings of markdown ``text``, CommonMark-like: up to 3 spaces of indentation,
    1 to 6 ``#``, then a space, a tab or the end of the line; a closing run of ``#`` after a
    space or tab is not part of the heading. Linear in the length of the text (a few
    ``str`` scans per line), however the agent wrote its lines."""
    found = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        body = line.lstrip(" ")
        if len(line) - len(body) > 3 or not body.startswith("#"):
            continue
        rest = body.lstrip("#")
        if len(body) - len(rest) > 6 or (rest and rest[0] not in " \t"):
            continue
        content = rest.strip(" \t")
        unclosed = content.rstrip("#")
        if not unclosed:
            content = ""
        elif unclosed != content and unclosed[-1] in " \t":
            content = unclosed
        found.append(content.strip())
    return found
