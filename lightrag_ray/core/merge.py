"""LightRAG's merge rules over one shard's networkx graph (pure Python, no Ray).

The graph stores *mentions*, keyed by source chunk: ``node["mentions"][chunk_id]`` is the
list of EntityMention that chunk said about the entity, and ``edge["mentions"][chunk_id]``
the list of RelationMention.
Applying a chunk's records again replaces that chunk's entry, so re-delivery never
double-counts. Everything users see (type, description, weight, keywords, sources) is
derived from the mentions sorted by chunk id, so the result does not depend on the order
records arrived in or on how many shards there are.

Nodes are keyed by entity key (see core.names.entity_key); a shard holds the nodes it
owns plus "ghost" endpoints of its edges owned elsewhere (``owned=False``). An edge is
stored on both endpoints' shards; the shard of the smaller key is its owner.
"""

from __future__ import annotations

import hashlib
import heapq
from collections import Counter
from typing import Any, Iterable, NamedTuple

import networkx as nx

from lightrag_ray.core.ids import entity_id, relation_id, shard_of
from lightrag_ray.core.ranking import local_relation_order

DESCRIPTION_SEP = "\n"


class EntityMention(NamedTuple):
    """What one chunk said about an entity."""

    type: str
    description: str
    file_path: str
    name: str  # the spelling used in the chunk


class RelationMention(NamedTuple):
    """What one chunk said about the relation between entity keys a < b."""

    keywords: str
    description: str
    weight: float
    file_path: str
    name_a: str  # spelling of the entity with the smaller key
    name_b: str


def _fragments(descriptions: Iterable[str]) -> list[str]:
    """Distinct non-empty descriptions, first occurrence first."""
    return list(dict.fromkeys(d.strip() for d in descriptions if d and d.strip()))


def fragments_hash(fragments: list[str]) -> str:
    """Key of a summary in the summary cache."""
    return hashlib.md5("\x1e".join(fragments).encode("utf-8")).hexdigest()


def _ordered(mentions: dict[str, list[Any]]) -> list[Any]:
    return [m for chunk in sorted(mentions) for m in mentions[chunk]]


def _majority(values: list[str]) -> str:
    counts = Counter(values)
    best = max(counts.values())
    return min(v for v, c in counts.items() if c == best)


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


def _keywords(values: list[str]) -> str:
    words = (w.strip() for value in values for w in value.split(","))
    return ", ".join(dict.fromkeys(w for w in words if w))


class ShardGraph:
    """One shard of the knowledge graph with LightRAG's merge rules."""

    def __init__(self, shard: int, num_shards: int, max_source_ids: int = 300) -> None:
        self.shard = shard
        self.num_shards = num_shards
        self.max_source_ids = max_source_ids
        self.graph = nx.Graph()
        self.summaries: dict[str, str] = {}
        self.dirty_nodes: set[str] = set()
        self.dirty_edges: set[tuple[str, str]] = set()
        # Derived from mentions, kept per item so reads of popular entities stay cheap: an
        # edge's weight (edge attribute "weight"), display names by key, and the merged views
        # read since the item last changed (("e", key) or ("r", a, b)).
        self._names: dict[str, str] = {}
        self._views: dict[tuple[str, ...], dict[str, Any]] = {}
        self._by_weight: dict[str, list[tuple[str, str]]] = {}  # incident edges, heaviest first

    def _forget(self, key: str) -> None:
        self._names.pop(key, None)
        self._views.pop(("e", key), None)
        self._by_weight.pop(key, None)

    # ---- writes -------------------------------------------------------------------
    def owns(self, key: str) -> bool:
        """Whether this shard owns the entity ``key``."""
        return shard_of(key, self.num_shards) == self.shard

    def _ensure_node(self, key: str) -> None:
        if key not in self.graph:
            self.graph.add_node(key, mentions={}, owned=self.owns(key))

    def apply(self, entities: list[dict[str, Any]], relations: list[dict[str, Any]]) -> None:
        """Merge entity and relation mention rows (each with key(s), chunk_id, fields).

        Per (item, chunk) the rows given here replace what that chunk said before.
        """
        fresh: dict[tuple[str, str], list[EntityMention]] = {}
        for row in entities:
            self._ensure_node(row["key"])
            entry = EntityMention(row["type"], row["description"], row.get("file_path", ""), row["name"])
            fresh.setdefault((row["key"], row["chunk_id"]), []).append(entry)
        for (key, chunk), mentions in fresh.items():
            self.graph.nodes[key]["mentions"][chunk] = sorted(mentions)
            self.dirty_nodes.add(key)
            self._forget(key)

        fresh_edges: dict[tuple[str, str, str], list[RelationMention]] = {}
        for row in relations:
            a, b = sorted((row["source_key"], row["target_key"]))
            names = {row["source_key"]: row["source"], row["target_key"]: row["target"]}
            self._ensure_node(a)
            self._ensure_node(b)
            if not self.graph.has_edge(a, b):
                self.graph.add_edge(a, b, mentions={})
            weight = float(row["weight"])
            entry = RelationMention(row["keywords"], row["description"], weight, row.get("file_path", ""), names[a], names[b])
            fresh_edges.setdefault((a, b, row["chunk_id"]), []).append(entry)
        for (a, b, chunk), mentions in fresh_edges.items():
            self.graph.edges[a, b]["mentions"][chunk] = sorted(mentions)
            self._edge_changed(a, b)

    def _edge_changed(self, a: str, b: str) -> None:
        data = self.graph.edges[a, b]
        data["weight"] = sum(max(m.weight for m in mentions) for mentions in data["mentions"].values())
        self.dirty_edges.add((a, b))
        self.dirty_nodes.update(k for k in (a, b) if self.owns(k))
        self._views.pop(("r", a, b), None)
        self._forget(a)
        self._forget(b)

    def remove_chunks(self, chunk_ids: set[str]) -> None:
        """Drop everything the given chunks said; items left with no mention vanish."""
        for a, b, data in list(self.graph.edges(data=True)):
            a, b = sorted((a, b))
            if chunk_ids & data["mentions"].keys():
                for chunk in chunk_ids & data["mentions"].keys():
                    del data["mentions"][chunk]
                self._edge_changed(a, b)
                if not data["mentions"]:
                    self.graph.remove_edge(a, b)
        for key, data in list(self.graph.nodes(data=True)):
            for chunk in chunk_ids & data["mentions"].keys():
                del data["mentions"][chunk]
                self.dirty_nodes.add(key)
                self._forget(key)
            if not data["mentions"] and self.graph.degree(key) == 0:
                self.graph.remove_node(key)

    # ---- derived views ----------------------------------------------------------
    def entity_fragments(self, key: str) -> list[str]:
        """Distinct description fragments of an entity, in chunk order."""
        return _fragments(m.description for m in _ordered(self.graph.nodes[key]["mentions"]))

    def relation_fragments(self, a: str, b: str) -> list[str]:
        """Distinct description fragments of a relation, in chunk order."""
        return _fragments(m.description for m in _ordered(self.graph.edges[a, b]["mentions"]))

    def _description(self, fragments: list[str]) -> str:
        return self.summaries.get(fragments_hash(fragments), DESCRIPTION_SEP.join(fragments))

    def _sources(self, chunks: Iterable[str]) -> list[str]:
        return sorted(chunks)[: self.max_source_ids]

    def display_name(self, key: str) -> str:
        """Most frequent spelling of an entity across its own and its edges' mentions."""
        if key not in self._names:
            names = [m.name for m in _ordered(self.graph.nodes[key]["mentions"])]
            for a, b, data in self.graph.edges(key, data=True):
                smaller = min(a, b) == key
                names += [m.name_a if smaller else m.name_b for m in _ordered(data["mentions"])]
            self._names[key] = _majority(names)
        return self._names[key]

    def entity(self, key: str) -> dict[str, Any]:
        """The merged view of an entity this shard owns."""
        view = self._views.get(("e", key))
        if view is None:
            view = self._views[("e", key)] = self._entity_view(key)
        return dict(view)

    def _entity_view(self, key: str) -> dict[str, Any]:
        node = self.graph.nodes[key]
        mentions = _ordered(node["mentions"])
        chunks = set(node["mentions"])
        if not mentions:  # only named as a relation endpoint
            chunks = {c for _, _, d in self.graph.edges(key, data=True) for c in d["mentions"]}
        return {
            "id": entity_id(key),
            "key": key,
            "name": self.display_name(key),
            "type": _majority([m.type for m in mentions]) if mentions else "unknown",
            "description": self._description(self.entity_fragments(key)),
            "source_ids": self._sources(chunks),
            "file_paths": sorted({m.file_path for m in mentions if m.file_path}),
            "degree": self.graph.degree(key),
        }

    def relation(self, a: str, b: str) -> dict[str, Any]:
        """The merged view of the relation between entity keys ``a`` and ``b``."""
        a, b = sorted((a, b))
        view = self._views.get(("r", a, b))
        if view is None:
            view = self._views[("r", a, b)] = self._relation_view(a, b)
        return dict(view)

    def _relation_view(self, a: str, b: str) -> dict[str, Any]:
        data = self.graph.edges[a, b]["mentions"]
        mentions = _ordered(data)
        return {
            "id": relation_id(a, b),
            "source_key": a,
            "target_key": b,
            "source": _majority([m.name_a for m in mentions]),
            "target": _majority([m.name_b for m in mentions]),
            "keywords": _keywords([m.keywords for m in mentions]),
            "description": self._description(self.relation_fragments(a, b)),
            "weight": self.graph.edges[a, b]["weight"],
            "source_ids": self._sources(data),
            "file_paths": sorted({m.file_path for m in mentions if m.file_path}),
        }

    def owns_edge(self, a: str, b: str) -> bool:
        """Whether this shard is the owner of edge (a, b): the shard of the smaller key."""
        return self.owns(min(a, b))

    def export(self) -> dict[str, list[dict[str, Any]]]:
        """Every owned entity and owned relation, merged, in key order."""
        keys = sorted(k for k, owned in self.graph.nodes(data="owned") if owned)
        edges = sorted(tuple(sorted(e)) for e in self.graph.edges if self.owns_edge(*e))
        return {"entities": [self.entity(k) for k in keys], "relations": [self.relation(a, b) for a, b in edges]}

    def fetch(self, keys: list[str], pairs: list[tuple[str, str]]) -> dict[str, list[dict[str, Any]]]:
        """Merged views of the owned entities ``keys`` and owned relations ``pairs``."""
        g = self.graph
        return {
            "entities": [self.entity(k) for k in keys if k in g and self.owns(k)],
            "relations": [self.relation(a, b) for a, b in pairs if g.has_edge(a, b) and self.owns_edge(a, b)],
        }

    def neighborhood(self, keys: list[str], max_relations: int | None = None) -> dict[str, list[dict[str, Any]]]:
        """The owned entities among ``keys`` (the query's entities, best first) and their
        incident relations: all of them, or the ``max_relations`` first in
        ``local_relation_order(keys)``, chosen before any view is built, so an entity with
        thousands of relations costs about what a rare one costs."""
        found = [k for k in keys if k in self.graph and self.owns(k)]
        if max_relations is None:
            edges = sorted({_pair(a, b) for k in found for a, b in self.graph.edges(k)})
        else:
            edges = self._best_incident(found, keys, max_relations)
        return {"entities": [self.entity(k) for k in found], "relations": [self.relation(a, b) for a, b in edges]}

    def _best_incident(self, found: list[str], keys: list[str], limit: int) -> list[tuple[str, str]]:
        """The first ``limit`` edges incident to ``found`` in ``local_relation_order(keys)``:
        those joining two of ``keys`` first, then, key by key in rank order, the other
        edges heaviest first (each key's edges are kept sorted by weight)."""
        order = local_relation_order(keys)
        joined = {_pair(k, other) for k in found for other in keys if other != k and self.graph.has_edge(k, other)}
        chosen = heapq.nsmallest(limit, joined, key=lambda e: order(e[0], e[1], self.graph.edges[e]["weight"]))
        for key in found:
            for edge in self._heaviest_edges(key):
                if len(chosen) >= limit:
                    return chosen
                if edge not in joined:
                    chosen.append(edge)
        return chosen

    def _heaviest_edges(self, key: str) -> list[tuple[str, str]]:
        if key not in self._by_weight:
            edges = (_pair(a, b) for a, b in self.graph.edges(key))
            self._by_weight[key] = sorted(edges, key=lambda e: (-self.graph.edges[e]["weight"], e))
        return self._by_weight[key]

    def counts(self) -> dict[str, int]:
        """Owned entities and owned relations."""
        entities = sum(1 for _, owned in self.graph.nodes(data="owned") if owned)
        relations = sum(1 for a, b in self.graph.edges if self.owns_edge(a, b))
        return {"entities": entities, "relations": relations}

    # ---- summaries --------------------------------------------------------------
    def pending_summaries(self, max_fragments: int, max_tokens: int, count_tokens) -> list[dict[str, Any]]:
        """Dirty owned items whose description is too long and has no cached summary."""
        todo = []
        items = [("entity", (k,)) for k in self.dirty_nodes if k in self.graph and self.owns(k)]
        items += [("relation", e) for e in self.dirty_edges if self.graph.has_edge(*e) and self.owns_edge(*e)]
        for kind, item in items:
            fragments = self.entity_fragments(*item) if kind == "entity" else self.relation_fragments(*item)
            digest = fragments_hash(fragments)
            too_long = len(fragments) > max_fragments or count_tokens(DESCRIPTION_SEP.join(fragments)) > max_tokens
            if too_long and digest not in self.summaries:
                if kind == "entity":
                    name = self.display_name(item[0])
                else:
                    view = self.relation(*item)
                    name = f"{view['source']} - {view['target']}"
                todo.append({"kind": kind, "name": name, "hash": digest, "fragments": fragments})
        return todo

    def add_summaries(self, summaries: dict[str, str]) -> None:
        """Cache summaries by fragments hash; they replace joined descriptions."""
        self.summaries.update(summaries)
        self._views.clear()  # any description may have changed

    # ---- change feed ------------------------------------------------------------
    def take_changes(self) -> dict[str, list[Any]]:
        """Owned entities/relations changed since the last call (views, or ids of removed ones)."""
        upserts_e, upserts_r, removed = [], [], []
        for key in sorted(self.dirty_nodes):
            if not self.owns(key):
                continue
            if key in self.graph:
                upserts_e.append(self.entity(key))
            else:
                removed.append(entity_id(key))
        for a, b in sorted(self.dirty_edges):
            if not self.owns_edge(a, b):
                continue
            if self.graph.has_edge(a, b):
                upserts_r.append(self.relation(a, b))
            else:
                removed.append(relation_id(a, b))
        self.dirty_nodes.clear()
        self.dirty_edges.clear()
        return {"entities": upserts_e, "relations": upserts_r, "removed": removed}
