"""One shard's alias links (pure Python, no Ray): for each entity it owns, the other entities
(on any shard) whose names are variants of its name, with the rule that linked them.

A link is stored on the shard of each end, so a reader finds an entity's aliases where it
finds the entity. Links are kept apart from the mentions: indexing a document never merges
two entities, and one that later proves different is unlinked, not split. The shard also
answers the alias pass (index.stages.aliases): which of its entities are new since the last pass,
and which entities share a block key (core.alias_rules) with given names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from lightrag_ray.core.alias_rules import block_keys
from lightrag_ray.core.graph.versions import Links

ALIAS_COLUMNS = ("key", "other", "reason")


class ShardAliases:
    """Alias links of the owned entities, with their unsaved changes and a block index."""

    def __init__(self) -> None:
        self.links: dict[str, Links] = {}
        self.unsaved: set[tuple[str, str]] = set()  # (owned key, other key) changed since the last save
        self.unlinked: set[str] = set()  # owned keys created since the last alias pass
        self._blocks: dict[str, set[str]] | None = None  # block key -> owned keys (built on first use)

    # ---- writes --------------------------------------------------------------------------
    def created(self, key: str) -> None:
        """An owned entity appeared: the next alias pass links it."""
        self.unlinked.add(key)
        if self._blocks is not None:
            for block in block_keys(key):
                self._blocks.setdefault(block, set()).add(key)

    def removed(self, key: str, remember: Callable[[str], None]) -> None:
        """An owned entity is gone: so are its links (those of the other end stay, and are
        skipped by readers while it is gone; a pass links it again if it comes back)."""
        if key in self.links:
            remember(key)
            self.unsaved.update((key, other) for other in self.links.pop(key))

    def set(self, verdicts: Iterable[tuple[str, str, str | None]], owns: Callable[[str], bool],
            remember: Callable[[str], None]) -> int:
        """Apply (key, key, reason) links, a reason of None unlinking, to the owned ends;
        returns how many links changed."""
        changed = 0
        for a, b, reason in verdicts:
            for key, other in ((a, b), (b, a)):
                if not owns(key) or self.links.get(key, {}).get(other) == reason:
                    continue
                remember(key)
                links = self.links.setdefault(key, {})
                if reason is None:
                    links.pop(other, None)
                    if not links:
                        del self.links[key]
                else:
                    links[other] = reason
                self.unsaved.add((key, other))
                changed += 1
        return changed

    def restore(self, before: dict[str, Links | None]) -> None:
        """Undo a job: put back the links the keys had before it."""
        for key, links in before.items():
            self.unsaved.update((key, other) for other in {*self.links.get(key, {}), *(links or {})})
            if links is None:
                self.links.pop(key, None)
            else:
                self.links[key] = dict(links)

    # ---- the alias pass ----------------------------------------------------------------
    def relink(self, keys: Iterable[str]) -> None:
        """``keys`` count as new for the next pass (a workspace built before aliases existed)."""
        self.unlinked = set(keys)

    def take_unlinked(self, exists: Callable[[str], bool]) -> list[str]:
        """The owned keys created since the last call that still exist."""
        keys, self.unlinked = sorted(k for k in self.unlinked if exists(k)), set()
        return keys

    def block_members(self, blocks: list[str], limit: int, owned_keys: Callable[[], Iterable[str]],
                      exists: Callable[[str], bool]) -> dict[str, list[str]]:
        """Owned keys per block key, at most ``limit + 1`` each (one more than a caller that
        skips blocks of over ``limit`` needs to tell)."""
        if self._blocks is None:
            self._blocks = {}
            for key in owned_keys():
                for block in block_keys(key):
                    self._blocks.setdefault(block, set()).add(key)
        found = {}
        for block in blocks:
            members = sorted(k for k in self._blocks.get(block, ()) if exists(k))
            if members:
                found[block] = members[: limit + 1]
        return found

    # ---- persistence ---------------------------------------------------------------------
    def changed_columns(self) -> dict[str, list[Any]]:
        """ALIAS_COLUMNS of the unsaved links (an unlinked one: reason None)."""
        entries = sorted(self.unsaved)
        return {"key": [k for k, _ in entries], "other": [o for _, o in entries],
                "reason": [self.links.get(k, {}).get(o) for k, o in entries]}

    def all_columns(self) -> dict[str, list[Any]]:
        """ALIAS_COLUMNS of every link."""
        entries = sorted((k, o, r) for k, links in self.links.items() for o, r in links.items())
        return {name: [entry[i] for entry in entries] for i, name in enumerate(ALIAS_COLUMNS)}

    def load(self, columns: dict[str, list[Any]]) -> None:
        """Fill from ALIAS_COLUMNS (a snapshot); nothing counts as unsaved afterwards."""
        for key, other, reason in zip(columns["key"], columns["other"], columns["reason"]):
            self.links.setdefault(key, {})[other] = reason
