"""What users see of one shard: merged entity and relation views derived from mentions
(pure Python, no Ray).

A ShardView reads one version of the shard's graph (core.graph_versions: the live one or
the published one) and caches, per item, what it derived (display names, merged views,
incident edges by weight) until the writer tells it the item changed.
"""

from __future__ import annotations

import hashlib
import heapq
from collections import Counter
from collections.abc import Iterable
from typing import Any

from lightrag_ray.core.graph_versions import LiveState, Pair, PublishedState, pair
from lightrag_ray.core.ids import entity_id, relation_id, shard_of
from lightrag_ray.core.ranking import local_relation_order

DESCRIPTION_SEP = "\n"


def fragments(descriptions: Iterable[str]) -> list[str]:
    """Distinct non-empty descriptions, first occurrence first."""
    return list(dict.fromkeys(d.strip() for d in descriptions if d and d.strip()))


def fragments_hash(parts: list[str]) -> str:
    """Key of a summary in the summary cache."""
    return hashlib.md5("\x1e".join(parts).encode("utf-8")).hexdigest()


def ordered(mentions: dict[str, list[Any]]) -> list[Any]:
    """Mentions in chunk order."""
    return [m for chunk in sorted(mentions) for m in mentions[chunk]]


def _majority(values: list[str]) -> str:
    counts = Counter(values)
    best = max(counts.values())
    return min(v for v, c in counts.items() if c == best)


def _keywords(values: list[str]) -> str:
    words = (w.strip() for value in values for w in value.split(","))
    return ", ".join(dict.fromkeys(w for w in words if w))


class ShardView:
    """Merged views of the items shard ``shard`` of ``num_shards`` holds in ``state``."""

    def __init__(self, state: LiveState | PublishedState, shard: int, num_shards: int, max_source_ids: int) -> None:
        self.state = state
        self.shard = shard
        self.num_shards = num_shards
        self.max_source_ids = max_source_ids
        # Derived from mentions, kept per item so reads of popular entities stay cheap: display
        # names by key, the merged views read since the item last changed (("e", key) or
        # ("r", a, b)) and each key's incident edges, heaviest first.
        self._names: dict[str, str] = {}
        self._views: dict[tuple[str, ...], dict[str, Any]] = {}
        self._by_weight: dict[str, list[Pair]] = {}
        self._by_chunk: dict[str, list[str]] | None = None  # passage -> owned entities it mentions

    # ---- invalidation (the writer's) ----------------------------------------------------
    def forget(self, key: str) -> None:
        self._names.pop(key, None)
        self._views.pop(("e", key), None)
        self._by_weight.pop(key, None)
        self._by_chunk = None

    def forget_edge(self, a: str, b: str) -> None:
        self._views.pop(("r", *pair(a, b)), None)
        self.forget(a)
        self.forget(b)

    def forget_descriptions(self) -> None:
        """Any description may have changed (new summaries)."""
        self._views.clear()

    # ---- ownership ------------------------------------------------------------------------
    def owns(self, key: str) -> bool:
        """Whether this shard owns the entity ``key``."""
        return shard_of(key, self.num_shards) == self.shard

    def owns_edge(self, a: str, b: str) -> bool:
        """Whether this shard is the owner of edge (a, b): the shard of the smaller key."""
        return self.owns(min(a, b))

    def _owned_keys(self) -> list[str]:
        return [k for k in self.state.keys() if self.state.node(k)["owned"]]

    # ---- derived views ------------------------------------------------------------------
    def entity_fragments(self, key: str) -> list[str]:
        """Distinct description fragments of an entity, in chunk order."""
        return fragments(m.description for m in ordered(self.state.node(key)["mentions"]))

    def relation_fragments(self, a: str, b: str) -> list[str]:
        """Distinct description fragments of a relation, in chunk order."""
        return fragments(m.description for m in ordered(self.state.edge(a, b)["mentions"]))

    def _description(self, parts: list[str]) -> str:
        summary = self.state.summary(fragments_hash(parts))
        return DESCRIPTION_SEP.join(parts) if summary is None else summary

    def _sources(self, chunks: Iterable[str]) -> list[str]:
        return sorted(chunks)[: self.max_source_ids]

    def display_name(self, key: str) -> str:
        """Most frequent spelling of an entity across its own and its edges' mentions."""
        if key not in self._names:
            names = [m.name for m in ordered(self.state.node(key)["mentions"])]
            for other in self.state.neighbors(key):
                mentions = ordered(self.state.edge(key, other)["mentions"])
                names += [m.name_a if key < other else m.name_b for m in mentions]
            self._names[key] = _majority(names)
        return self._names[key]

    def entity(self, key: str) -> dict[str, Any]:
        """The merged view of an entity this shard owns."""
        view = self._views.get(("e", key))
        if view is None:
            view = self._views[("e", key)] = self._entity_view(key)
        return dict(view)

    def _entity_view(self, key: str) -> dict[str, Any]:
        node = self.state.node(key)
        mentions = ordered(node["mentions"])
        neighbors = self.state.neighbors(key)
        chunks = set(node["mentions"])
        if not mentions:  # only named as a relation endpoint
            chunks = {c for other in neighbors for c in self.state.edge(key, other)["mentions"]}
        return {
            "id": entity_id(key),
            "key": key,
            "name": self.display_name(key),
            "type": _majority([m.type for m in mentions]) if mentions else "unknown",
            "description": self._description(self.entity_fragments(key)),
            "source_ids": self._sources(chunks),
            "file_paths": sorted({m.file_path for m in mentions if m.file_path}),
            "degree": len(neighbors),
        }

    def relation(self, a: str, b: str) -> dict[str, Any]:
        """The merged view of the relation between entity keys ``a`` and ``b``."""
        a, b = pair(a, b)
        view = self._views.get(("r", a, b))
        if view is None:
            view = self._views[("r", a, b)] = self._relation_view(a, b)
        return dict(view)

    def _relation_view(self, a: str, b: str) -> dict[str, Any]:
        data = self.state.edge(a, b)
        mentions = ordered(data["mentions"])
        return {
            "id": relation_id(a, b),
            "source_key": a,
            "target_key": b,
            "source": _majority([m.name_a for m in mentions]),
            "target": _majority([m.name_b for m in mentions]),
            "keywords": _keywords([m.keywords for m in mentions]),
            "description": self._description(self.relation_fragments(a, b)),
            "weight": data["weight"],
            "source_ids": self._sources(data["mentions"]),
            "file_paths": sorted({m.file_path for m in mentions if m.file_path}),
        }

    # ---- reads ----------------------------------------------------------------------------
    def export(self) -> dict[str, list[dict[str, Any]]]:
        """Every owned entity and owned relation, merged, in key order."""
        edges = sorted(e for e in self.state.pairs() if self.owns_edge(*e))
        return {"entities": [self.entity(k) for k in sorted(self._owned_keys())],
                "relations": [self.relation(a, b) for a, b in edges]}

    def labels(self) -> list[str]:
        """Display names of the owned entities."""
        return [self.display_name(k) for k in self._owned_keys()]

    def fetch(self, keys: list[str], pairs: list[Pair]) -> dict[str, list[dict[str, Any]]]:
        """Merged views of the owned entities ``keys`` and owned relations ``pairs``."""
        return {
            "entities": [self.entity(k) for k in keys if self.state.node(k) is not None and self.owns(k)],
            "relations": [self.relation(a, b) for a, b in pairs
                          if self.state.edge(a, b) is not None and self.owns_edge(a, b)],
        }

    def neighborhood(self, keys: list[str], max_relations: int | None = None) -> dict[str, list[dict[str, Any]]]:
        """The owned entities among ``keys`` (the query's entities, best first) and their
        incident relations: all of them, or the ``max_relations`` first in
        ``local_relation_order(keys)``, chosen before any view is built, so an entity with
        thousands of relations costs about what a rare one costs."""
        found = [k for k in keys if self.state.node(k) is not None and self.owns(k)]
        if max_relations is None:
            edges = sorted({pair(k, other) for k in found for other in self.state.neighbors(k)})
        else:
            edges = self._best_incident(found, keys, max_relations)
        return {"entities": [self.entity(k) for k in found], "relations": [self.relation(a, b) for a, b in edges]}

    def passage_entities(self, chunk_ids: list[str], keys: list[str], max_chunks: int) -> list[dict[str, Any]]:
        """One hop between passages and entities: the owned entities among ``keys`` or
        mentioned by the passages ``chunk_ids``, each with ``n_chunks``, the number of
        passages mentioning it, ``chunks``, those passages (none past ``max_chunks``:
        a hub such as a country leads everywhere, so it is not expanded), and ``aliases``,
        the keys of its name variants (core.alias_rules)."""
        index = self._chunk_index()
        found = [k for k in keys if self.state.node(k) is not None and self.owns(k)]
        rows = []
        for key in dict.fromkeys(found + [k for c in chunk_ids for k in index.get(c, ())]):
            chunks = sorted(self.state.node(key)["mentions"])
            rows.append({"key": key, "n_chunks": len(chunks), "chunks": chunks if len(chunks) <= max_chunks else [],
                         "aliases": sorted(self.state.aliases(key))})
        return rows

    def _chunk_index(self) -> dict[str, list[str]]:
        if self._by_chunk is None:
            self._by_chunk = {}
            for key in self._owned_keys():
                for chunk in self.state.node(key)["mentions"]:
                    self._by_chunk.setdefault(chunk, []).append(key)
        return self._by_chunk

    def _best_incident(self, found: list[str], keys: list[str], limit: int) -> list[Pair]:
        """The first ``limit`` edges incident to ``found`` in ``local_relation_order(keys)``:
        those joining two of ``keys`` first, then, key by key in rank order, the other
        edges heaviest first (each key's edges are kept sorted by weight)."""
        order = local_relation_order(keys)
        joined = {pair(k, other) for k in found for other in keys
                  if other != k and self.state.edge(k, other) is not None}
        chosen = heapq.nsmallest(limit, joined, key=lambda e: order(e[0], e[1], self.state.edge(*e)["weight"]))
        for key in found:
            for edge in self._heaviest_edges(key):
                if len(chosen) >= limit:
                    return chosen
                if edge not in joined:
                    chosen.append(edge)
        return chosen

    def _heaviest_edges(self, key: str) -> list[Pair]:
        if key not in self._by_weight:
            edges = (pair(key, other) for other in self.state.neighbors(key))
            self._by_weight[key] = sorted(edges, key=lambda e: (-self.state.edge(*e)["weight"], e))
        return self._by_weight[key]
