"""Ranking and merging of retrieved items (pure functions, no Ray)."""

from __future__ import annotations

import math
from collections import Counter
from itertools import chain
from typing import Any, Callable

# Similarity to the question given up per step of log(1 + place in the graph order): chosen on
# HotpotQA and CMRC 2018 (docs/benchmarks.md).
RELEVANCE_WEIGHT = 0.05


def interleave(*lists: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any] = lambda x: x["id"]) -> list[dict[str, Any]]:
    """Round-robin merge of ranked lists, first occurrence wins."""
    merged: dict[Any, dict[str, Any]] = {}
    for position in range(max((len(items) for items in lists), default=0)):
        for items in lists:
            if position < len(items):
                merged.setdefault(key(items[position]), items[position])
    return list(merged.values())


LocalOrder = Callable[[str, str, float], tuple]


def local_relation_order(entity_keys: list[str]) -> LocalOrder:
    """Sort key of a one-hop relation (endpoint keys a < b, weight) for a query whose
    retrieved entities are ``entity_keys`` (best first): relations joining two retrieved
    entities first, then by their best-ranked endpoint, then by weight. Shards rank their
    incident relations with it before building views, so only the best travel."""
    rank = {key: i for i, key in enumerate(entity_keys)}
    far = len(entity_keys)

    def order(a: str, b: str, weight: float) -> tuple:
        ends = (rank.get(a, far), rank.get(b, far))
        return (-((ends[0] < far) + (ends[1] < far)), min(ends), -weight, a, b)

    return order


def rank_local_relations(relations: list[dict[str, Any]], entity_keys: list[str]) -> list[dict[str, Any]]:
    """One-hop relations in ``local_relation_order``."""
    order = local_relation_order(entity_keys)
    return sorted(relations, key=lambda rel: order(rel["source_key"], rel["target_key"], rel["weight"]))


def graph_chunk_ranking(entities: list[dict[str, Any]], relations: list[dict[str, Any]]) -> list[str]:
    """Source chunks of ranked graph items: those of the best-ranked item first, then by citations.

    (A hub's items cite thousands of chunks, so the work is left to C-level dict and sort
    calls: first-seen order groups the chunks by their best item; each group is sorted by
    citations, stable.)"""
    cited = [item.get("source_ids", []) for item in interleave(entities, relations)]
    citations = Counter(chain.from_iterable(cited))
    seen: dict[str, None] = {}
    ends = []
    for ids in cited:
        seen.update(dict.fromkeys(ids))
        ends.append(len(seen))
    order = list(seen)
    ranked: list[str] = []
    for start, end in zip([0, *ends], ends):
        ranked += sorted(order[start:end], key=citations.__getitem__, reverse=True)  # stable under reverse
    return ranked


def relevance_ranking(ids: list[str], similarity: dict[str, float], floor: float,
                      weight: float = RELEVANCE_WEIGHT) -> list[str]:
    """``ids`` (distinct, in graph order) by their similarity to the question less ``weight``
    x log(1 + their place); ids without a known similarity get ``floor`` (ties: graph order)."""
    scores = [similarity.get(item, floor) - weight * math.log1p(place) for place, item in enumerate(ids)]
    return [ids[i] for i in sorted(range(len(ids)), key=scores.__getitem__, reverse=True)]  # stable under reverse
