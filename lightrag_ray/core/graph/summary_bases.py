"""Incremental summaries: what an item's next summary starts from (pure Python, no Ray).

An item's *base* is its latest summary's cache key and the fragments that summary covers
(as fragment keys). A new summary is made from scratch, or from the base summary plus the
fragments added since, but only while every covered fragment is still there. So each
summary is derived from the fragments of its own key alone: once a document is deleted,
the bases it fed no longer fit and a deleted text never reaches a summary prompt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from lightrag_ray.core.graph.views import fragments_hash


class SummaryBase(NamedTuple):
    """The latest summary of an item: its cache key and the fragments it covers."""

    digest: str
    covered: tuple[str, ...]  # fragment_key of each covered fragment


def fragment_key(fragment: str) -> str:
    """Short stable key of one description fragment."""
    return fragments_hash([fragment])


def base_of(fragments: list[str]) -> SummaryBase:
    """The base recorded once ``fragments`` have a summary."""
    return SummaryBase(fragments_hash(fragments), tuple(fragment_key(f) for f in fragments))


def summary_input(
    fragments: list[str], base: SummaryBase | None, summaries: Mapping[str, str]
) -> tuple[str, list[str]]:
    """What to summarise: (base summary, fragments added since) when the base still fits
    ``fragments`` (none of its fragments removed), else ("", all fragments)."""
    summary = summaries.get(base.digest, "") if base is not None else ""
    if base is None or not summary:
        return "", fragments
    keys = [fragment_key(f) for f in fragments]
    covered = set(base.covered)
    new = [f for f, key in zip(fragments, keys) if key not in covered]
    if not new or not covered <= set(keys):
        return "", fragments
    return summary, new
