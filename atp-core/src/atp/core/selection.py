"""Which tests of a suite run: ``--tags`` expressions (:class:`TagFilter`) and test ids
(:func:`select_tests`)."""

from collections.abc import Iterable, Sequence

import msgspec

from atp.core.errors import ConfigError
from atp.core.suite import Test


class TagGroup(msgspec.Struct, frozen=True):
    """``smoke+fast`` (or ``smoke+!slow``): a test having every ``required`` tag and none of the
    ``forbidden`` ones."""

    required: frozenset[str]
    forbidden: frozenset[str] = frozenset()

    def matches(self, tags: frozenset[str]) -> bool:
        return self.required <= tags and not self.forbidden & tags


class TagFilter(msgspec.Struct, frozen=True):
    """Which tests ``--tags`` selects.

    Each value is a comma-separated list of alternatives: ``smoke,core`` keeps tests having any
    of those tags; ``smoke+fast`` keeps tests having both (``+`` binds tighter than ``,``, so
    ``smoke+fast,core`` is (smoke and fast) or core; ``smoke+!slow`` is smoke and not slow).
    ``!slow`` on its own drops every test tagged slow, whatever else is selected. Several values
    (``--tags`` given twice) add their alternatives and exclusions together.
    """

    include: frozenset[str] = frozenset()
    """Single tags, any of which selects a test."""
    exclude: frozenset[str] = frozenset()
    """Tags that leave a test out, whatever else matches."""
    groups: tuple[TagGroup, ...] = ()
    """``+`` groups, each an alternative like the tags of :attr:`include`."""

    @classmethod
    def parse(cls, expressions: Iterable[str]) -> "TagFilter":
        include: set[str] = set()
        exclude: set[str] = set()
        groups: dict[TagGroup, None] = {}
        for expression in expressions:
            if not any(raw.strip() for raw in expression.split(",")):
                raise ConfigError(f"--tags: {expression!r} names no tag")
            for raw in expression.split(","):
                term = raw.strip()
                if not term:
                    continue
                if "+" in term:
                    group = _tag_group(term)
                    if len(group.required) == 1 and not group.forbidden:
                        include.update(group.required)
                    else:
                        groups[group] = None
                elif term.startswith("!"):
                    if not term[1:].strip():
                        raise ConfigError(f"--tags: {raw!r} names no tag to exclude")
                    exclude.add(term[1:].strip())
                else:
                    include.add(term)
        return cls(frozenset(include), frozenset(exclude), tuple(groups))

    def accepts(self, tags: Sequence[str]) -> bool:
        have = frozenset(tags)
        if self.exclude & have:
            return False
        if not self.include and not self.groups:
            return True
        return bool(self.include & have) or any(group.matches(have) for group in self.groups)


def _tag_group(term: str) -> TagGroup:
    """``smoke+fast+!slow`` as a :class:`TagGroup`."""
    required: set[str] = set()
    forbidden: set[str] = set()
    for raw in term.split("+"):
        part = raw.strip()
        if not part:
            raise ConfigError(
                f"--tags: {term!r} has no tag on one side of a '+' (smoke+fast selects tests "
                f"tagged both smoke and fast)"
            )
        if part.startswith("!"):
            name = part[1:].strip()
            if not name:
                raise ConfigError(f"--tags: {term!r}: {part!r} names no tag to exclude")
            forbidden.add(name)
        else:
            required.add(part)
    if not required:
        alternatives = ",".join(f"!{name}" for name in sorted(forbidden))
        raise ConfigError(
            f"--tags: {term!r} requires no tag; to leave out tests having any of these tags, "
            f"write {alternatives}"
        )
    both = required & forbidden
    if both:
        raise ConfigError(f"--tags: {term!r} both requires and excludes {', '.join(map(repr, sorted(both)))}")
    return TagGroup(frozenset(required), frozenset(forbidden))


def select_tests(
    tests: Sequence[Test], tags: TagFilter | None = None, ids: Sequence[str] = ()
) -> tuple[list[Test], int]:
    """The tests to run, in suite order, and how many were left out."""
    if ids:
        known = {t.id for t in tests}
        missing = [i for i in ids if i not in known]
        if missing:
            raise ConfigError(f"no test with id {', '.join(map(repr, missing))} in the suite")
    selected = [t for t in tests if (not ids or t.id in ids) and (tags is None or tags.accepts(t.tags))]
    return selected, len(tests) - len(selected)
