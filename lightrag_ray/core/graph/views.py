"""What users see of one shard: merged entity and relation views derived from mentions
(pure Python, no Ray).

A ShardView reads one version of the shard's graph (core.graph.versions: the live one or
the published one) and caches, per item, what it derived (display names, merged views,
incident edges by weight) until the writer tells it the item changed. The caches are
bounded (least recently used go first), so a shard's memory follows its tables, not what
was read of it.
"""

from __future__ import annotations

import hashlib
import heapq
from collections import Counter, OrderedDict
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from lightrag_ray.core.graph.mentions import Pair, pair
from lightrag_ray.core.graph.versions import GraphState
from lightrag_ray.core.ids import entity_id, relation_id, shard_of
from lightrag_ray.core.ranking import local_relation_order

DESCRIPTION_SEP = "\n"
CACHED_ITEMS = 20_000  # derived views kept per kind of cache
K = TypeVar("K")
V = TypeVar("V")


class Cache(Generic[K, V]):
    """A bounded mapping that forgets the least recently used entries."""

    def __init__(self, size: int = CACHED_ITEMS) -> None:
        self.size = size
        self.entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self.entries.get(key)
        if value is not None:
            self.entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> V:
        self.entries[key] = value
        if len(self.entries) > self.size:
            self.entries.popitem(last=False)
        return value

    def pop(self, key: K) -> None:
        self.entries.pop(key, None)

    def clear(self) -> None:
        self.entries.clear()


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

    def __init__(self, state: GraphState, shard: int, num_shards: int, max_source_ids: int) -> None:
        self.state = state
        self.shard = shard
        self.num_shards = num_shards
        self.max_source_ids = max_source_ids
        # Derived from mentions, kept per item so reads of popular entities stay cheap: display
        # names by key, the merged views read since the item last changed (("e", key) or
        # ("r", a, b)) and each key's incident edges, heaviest first.
        self._names: Cache[str, str] = Cache()
        self._views: Cache[tuple[str, ...], dict[str, Any]] = Cache()
        self._by_weight: Cache[str, list[Pair]] = Cache()

    # ---- invalidation (the writer's) ----------------------------------------------------
    def forget(self, key: str) -> None:
        self._names.pop(key)
        self._views.pop(("e", key))
        self._by_weight.pop(key)

    def forget_edge(self, a: str, b: str) -> None:
        self._views.pop(("r", *pair(a, b)))
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
        return [k for k in self.state.keys() if self.owns(k)]

    # ---- derived views ------------------------------------------------------------------
    def entity_fragments(self, key: str) -> list[str]:
        """Distinct description fragments of an entity, in chunk order."""
        return fragments(m.description for m in ordered(self.state.held_node(key).mentions))

    def relation_fragments(self, a: str, b: str) -> list[str]:
        """Distinct description fragments of a relation, in chunk order."""
        return fragments(m.description for m in ordered(self.state.held_edge(a, b).mentions))

    def _description(self, parts: list[str]) -> str:
        summary = self.state.summary(fragments_hash(parts))
        return DESCRIPTION_SEP.join(parts) if summary is None else summary

    def _sources(self, chunks: Iterable[str]) -> list[str]:
        return sorted(chunks)[: self.max_source_ids]

    def display_name(self, key: str) -> str:
        """Most frequent spelling of an entity across its own and its edges' mentions."""
        name = self._names.get(key)
        if name is None and not self.state.written(key):
            name = self.state.tables.display_name(key)
        if name is None:
            names = [m.name for m in ordered(self.state.held_node(key).mentions)]
            for other in self.state.neighbors(key):
                mentions = ordered(self.state.held_edge(key, other).mentions)
                names += [m.name_a if key < other else m.name_b for m in mentions]
            name = self._names.put(key, _majority(names))
        return name

    def entity(self, key: str) -> dict[str, Any]:
        """The merged view of an entity this shard owns."""
        view = self._views.get(("e", key))
        if view is None:
            view = self._views.put(("e", key), self._entity_view(key))
        return dict(view)

    def _entity_view(self, key: str) -> dict[str, Any]:
        node = self.state.held_node(key)
        mentions = ordered(node.mentions)
        neighbors = self.state.neighbors(key)
        chunks = set(node.mentions)
        if not mentions:  # only named as a relation endpoint
            chunks = {c for other in neighbors for c in self.state.held_edge(key, other).mentions}
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
            view = self._views.put(("r", a, b), self._relation_view(a, b))
        return dict(view)

    def _relation_view(self, a: str, b: str) -> dict[str, Any]:
        data = self.state.held_edge(a, b)
        mentions = ordered(data.mentions)
        return {
            "id": relation_id(a, b),
            "source_key": a,
            "target_key": b,
            "source": _majority([m.name_a for m in mentions]),
            "target": _majority([m.name_b for m in mentions]),
            "keywords": _keywords([m.keywords for m in mentions]),
            "description": self._description(self.relation_fragments(a, b)),
            "weight": data.weight,
            "source_ids": self._sources(data.mentions),
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
            "entities": [self.entity(k) for k in keys if self.owns(k) and self.state.has_node(k)],
            "relations": [self.relation(a, b) for a, b in pairs if self.owns_edge(a, b) and self.state.has_edge(a, b)],
        }

    def neighborhood(self, keys: list[str], max_relations: int | None = None) -> dict[str, list[dict[str, Any]]]:
        """The owned entities among ``keys`` (the query's entities, best first) and their
        incident relations: all of them, or the ``max_relations`` first in
        ``local_relation_order(keys)``, chosen before any view is built, so an entity with
        thousands of relations costs about what a rare one costs."""
        found = [k for k in keys if self.owns(k) and self.state.has_node(k)]
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
        index = self.state.entity_keys_of_chunks(chunk_ids)
        found = [k for k in keys if self.owns(k) and self.state.has_node(k)]
        rows = []
        mentioned = (k for c in chunk_ids for k in index.get(c, ()) if self.owns(k))
        for key in dict.fromkeys(found + list(mentioned)):
            chunks = self.state.entity_chunks(key)
            rows.append({"key": key, "n_chunks": len(chunks), "chunks": chunks if len(chunks) <= max_chunks else [],
                         "aliases": sorted(self.state.aliases(key))})
        return rows

    def _best_incident(self, found: list[str], keys: list[str], limit: int) -> list[Pair]:
        """The first ``limit`` edges incident to ``found`` in ``local_relation_order(keys)``:
        those joining two of ``keys`` first, then, key by key in rank order, the other
        edges heaviest first (each key's edges are kept sorted by weight)."""
        order = local_relation_order(keys)
        joined = {pair(k, other) for k in found for other in keys
                  if other != k and self.state.has_edge(k, other)}
        chosen = heapq.nsmallest(limit, joined, key=lambda e: order(e[0], e[1], self.state.edge_weight(*e)))
        for key in found:
            for edge in self._heaviest_edges(key):
                if len(chosen) >= limit:
                    return chosen
                if edge not in joined:
                    chosen.append(edge)
        return chosen

    def _heaviest_edges(self, key: str) -> list[Pair]:
        edges = self._by_weight.get(key)
        if edges is None:
            weighted = ((pair(key, other), self.state.edge_weight(key, other)) for other in self.state.neighbors(key))
            edges = self._by_weight.put(key, [e for e, _ in sorted(weighted, key=lambda ew: (-ew[1], ew[0]))])
        return edges
