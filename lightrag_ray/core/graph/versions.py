"""A shard's graph as columnar tables plus layers of recent writes, and its two versions: the
live one the writer changes and the published one readers see (pure Python, no Ray).

The bulk of the graph sits in immutable BaseTables (core.graph.tables). Writes go to a
``Layer`` above them: an item written is copied there whole (its mentions by chunk) and
changed in place; a removed item is recorded as None. A read asks the layers, newest first,
then the tables. The writer folds a large layer into new tables (``GraphState.fold``), so the
Python objects stay proportional to recent writes, not to the graph.

While no write job is open, live and published are one GraphState. ``begin`` opens a job: the
live state gets a layer of its own above the shared one, so readers keep the published graph
at no copying cost; ``publish`` pours the job's layer into the shared one, ``rollback``
drops it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pyarrow as pa

from lightrag_ray.core.graph.mentions import Mentions, Pair, edge_weight, entity_table, pair, relation_table
from lightrag_ray.core.graph.tables import BaseTables
from lightrag_ray.core.ids import shard_of

Links = dict[str, str]  # an entity's aliases: other entity key -> reason (core.alias_rules)


class Node(NamedTuple):
    """An entity as a shard holds it: what each chunk said, and whether this shard owns it."""

    mentions: Mentions
    owned: bool


class Edge(NamedTuple):
    """A relation as a shard holds it: what each chunk said, and its merged weight."""

    mentions: Mentions
    weight: float


@dataclass
class Layer:
    """Writes above the tables: whole items (None: removed) and, per key, the relations whose
    presence changed (other end -> present)."""

    nodes: dict[str, Mentions | None] = field(default_factory=dict)
    edges: dict[Pair, Edge | None] = field(default_factory=dict)
    adjacency: dict[str, dict[str, bool]] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)  # keys whose node or one of whose relations was written

    def __len__(self) -> int:
        return len(self.nodes) + len(self.edges)

    def absorb(self, later: Layer) -> None:
        """Take ``later``'s writes on top of this layer's."""
        self.nodes.update(later.nodes)
        self.edges.update(later.edges)
        self.touched |= later.touched
        for key, changes in later.adjacency.items():
            self.adjacency.setdefault(key, {}).update(changes)


class GraphState:
    """One version of a shard's graph: tables, layers (oldest first), summaries and alias links."""

    def __init__(self, tables: BaseTables, layers: list[Layer], summaries: dict[str, str],
                 alias_links: dict[str, Links], shard: int, num_shards: int,
                 hidden_summaries: set[str] | None = None, alias_before: dict[str, Links | None] | None = None) -> None:
        self.tables = tables
        self.layers = layers
        self.summaries = summaries
        self.alias_links = alias_links
        self.shard = shard
        self.num_shards = num_shards
        self.hidden_summaries = hidden_summaries if hidden_summaries is not None else set()  # a job's new summaries
        self.alias_before = alias_before  # pre-job links of the keys a job touched (the published version)
        self._layered_chunks: tuple[set[str], dict[str, list[str]]] | None = None  # layered keys; chunk -> keys

    def invalidate(self) -> None:
        """The layers changed under this state (a write, a publish): drop what was derived from them."""
        self._layered_chunks = None

    @property
    def top(self) -> Layer:
        return self.layers[-1]

    def owns(self, key: str) -> bool:
        return shard_of(key, self.num_shards) == self.shard

    # ---- items ------------------------------------------------------------------------------
    def _layered_node(self, key: str) -> tuple[bool, Mentions | None]:
        for layer in reversed(self.layers):
            if key in layer.nodes:
                return True, layer.nodes[key]
        return False, None

    def node(self, key: str) -> Node | None:
        found, mentions = self._layered_node(key)
        if not found:
            if not self.tables.has_node(key):
                return None
            mentions = self.tables.entity_mentions(key)
        return None if mentions is None else Node(mentions, self.owns(key))

    def held_node(self, key: str) -> Node:
        """The node of an entity the shard holds (KeyError if it holds none)."""
        node = self.node(key)
        if node is None:
            raise KeyError(key)
        return node

    def entity_chunks(self, key: str) -> list[str]:
        """The chunks that said something about entity ``key``, sorted (it must be held)."""
        found, mentions = self._layered_node(key)
        return sorted(mentions or ()) if found else self.tables.entity_chunk_ids(key)

    def written(self, key: str) -> bool:
        """Whether the layers hold a write to ``key`` or to one of its relations."""
        return any(key in layer.touched for layer in self.layers)

    def has_node(self, key: str) -> bool:
        found, mentions = self._layered_node(key)
        return mentions is not None if found else self.tables.has_node(key)

    def edge(self, a: str, b: str) -> Edge | None:
        edge = pair(a, b)
        for layer in reversed(self.layers):
            if edge in layer.edges:
                return layer.edges[edge]
        number = self.tables.pair_number(*edge)
        if number is None:
            return None
        return Edge(self.tables.relation_mentions(number), float(self.tables.p_weight[number]))

    def held_edge(self, a: str, b: str) -> Edge:
        """The edge of a relation the shard holds (KeyError if it holds none)."""
        edge = self.edge(a, b)
        if edge is None:
            raise KeyError((a, b))
        return edge

    def has_edge(self, a: str, b: str) -> bool:
        edge = pair(a, b)
        for layer in reversed(self.layers):
            if edge in layer.edges:
                return layer.edges[edge] is not None
        return self.tables.pair_number(*edge) is not None

    def edge_weight(self, a: str, b: str) -> float:
        edge = pair(a, b)
        for layer in reversed(self.layers):
            if edge in layer.edges:
                return layer.edges[edge].weight  # type: ignore[union-attr]  # asked of present edges only
        return float(self.tables.p_weight[self.tables.pair_number(*edge)])

    def neighbors(self, key: str) -> list[str]:
        """The other ends of ``key``'s relations."""
        changes = [layer.adjacency[key] for layer in self.layers if key in layer.adjacency]
        if not changes:
            return self.tables.neighbors(key)
        present = dict.fromkeys(self.tables.neighbors(key), True)
        for change in changes:
            present.update(change)
        return [other for other, here in present.items() if here]

    def degree(self, key: str) -> int:
        return len(self.neighbors(key))

    def keys(self) -> Iterator[str]:
        """Every key held (entities and relation ends)."""
        layered: dict[str, bool] = {}
        for layer in self.layers:
            layered.update((k, v is not None) for k, v in layer.nodes.items())
        yield from (k for k in self.tables.keys.strings if k not in layered)
        yield from (k for k, here in layered.items() if here)

    def pairs(self) -> Iterator[Pair]:
        """Every relation held, as (smaller key, larger key)."""
        layered: dict[Pair, bool] = {}
        for layer in self.layers:
            layered.update((e, v is not None) for e, v in layer.edges.items())
        yield from (e for e in self.tables.pairs() if e not in layered)
        yield from (e for e, here in layered.items() if here)

    def entity_keys_of_chunks(self, chunk_ids: list[str]) -> dict[str, list[str]]:
        """Per chunk id, the keys of the entities it mentions, in key order."""
        if self._layered_chunks is None:
            nodes: dict[str, Mentions | None] = {}
            for layer in self.layers:
                nodes.update(layer.nodes)
            by_chunk: dict[str, list[str]] = {}
            for key, mentions in nodes.items():
                for chunk in mentions or ():
                    by_chunk.setdefault(chunk, []).append(key)
            self._layered_chunks = set(nodes), by_chunk
        layered, by_chunk = self._layered_chunks
        found = {chunk: [k for k in keys if k not in layered]
                 for chunk, keys in self.tables.entity_keys_of_chunks(chunk_ids).items()}
        for chunk in chunk_ids:
            if chunk in by_chunk:
                found.setdefault(chunk, []).extend(by_chunk[chunk])
        return {chunk: sorted(keys) for chunk, keys in found.items() if keys}

    def items_of_chunks(self, chunk_ids: set[str]) -> tuple[list[str], list[Pair]]:
        """The keys and pairs that hold a mention from one of ``chunk_ids``."""
        keys, pairs = self.tables.rows_of_chunks(chunk_ids)
        found_keys = {k: None for k in keys if not any(k in layer.nodes for layer in self.layers)}
        found_pairs = {p: None for p in pairs if not any(p in layer.edges for layer in self.layers)}
        for layer in self.layers:
            found_keys.update((k, None) for k, m in layer.nodes.items() if m and m.keys() & chunk_ids)
            found_pairs.update((p, None) for p, e in layer.edges.items() if e and e.mentions.keys() & chunk_ids)
        return [k for k in found_keys if self.has_node(k)], [p for p in found_pairs if self.has_edge(*p)]

    def count_owned(self) -> dict[str, int]:
        """Owned entities and relations (a relation is owned by the shard of its smaller key)."""
        counts = self.tables.owned_counts()
        nodes: dict[str, bool] = {}
        edges: dict[Pair, bool] = {}
        for layer in self.layers:
            nodes.update((k, v is not None) for k, v in layer.nodes.items())
            edges.update((e, v is not None) for e, v in layer.edges.items())
        counts["entities"] += sum(int(here) - int(self.tables.has_node(k)) for k, here in nodes.items() if self.owns(k))
        counts["relations"] += sum(int(here) - int(self.tables.pair_number(*e) is not None)
                                   for e, here in edges.items() if self.owns(e[0]))
        return counts

    def summary(self, digest: str) -> str | None:
        return None if digest in self.hidden_summaries else self.summaries.get(digest)

    def aliases(self, key: str) -> Links:
        if self.alias_before is not None and key in self.alias_before:
            return self.alias_before[key] or {}
        return self.alias_links.get(key, {})

    # ---- writes (the live version only) -----------------------------------------------------
    def node_for_write(self, key: str) -> Mentions:
        """The top layer's copy of ``key``'s mentions (created, empty, when it is new)."""
        top = self.top
        self._layered_chunks = None
        top.touched.add(key)
        if key not in top.nodes or top.nodes[key] is None:
            current = self.node(key)
            top.nodes[key] = dict(current.mentions) if current is not None else {}
        return top.nodes[key]  # type: ignore[return-value]

    def edge_for_write(self, a: str, b: str) -> Mentions:
        """The top layer's copy of the relation's mentions (created, empty, when it is new)."""
        edge, top = pair(a, b), self.top
        top.touched.update(edge)
        if edge not in top.edges or top.edges[edge] is None:
            current = self.edge(*edge)
            if current is None:
                self._link(edge, True)
            top.edges[edge] = Edge(dict(current.mentions) if current else {}, current.weight if current else 0.0)
        return top.edges[edge].mentions  # type: ignore[union-attr]

    def reweigh(self, a: str, b: str) -> None:
        """Recompute a written relation's weight from its mentions."""
        edge = pair(a, b)
        mentions = self.top.edges[edge].mentions  # type: ignore[union-attr]
        self.top.edges[edge] = Edge(mentions, edge_weight(mentions))

    def remove_node(self, key: str) -> None:
        self._layered_chunks = None
        self.top.touched.add(key)
        self.top.nodes[key] = None

    def remove_edge(self, a: str, b: str) -> None:
        edge = pair(a, b)
        self.top.touched.update(edge)
        self.top.edges[edge] = None
        self._link(edge, False)

    def _link(self, edge: Pair, present: bool) -> None:
        a, b = edge
        self.top.adjacency.setdefault(a, {})[b] = present
        self.top.adjacency.setdefault(b, {})[a] = present

    # ---- folding the layers into tables -------------------------------------------------------
    def folded_tables(self, layers: list[Layer] | None = None) -> tuple[pa.Table, pa.Table]:
        """(entities, relations) Arrow rows of the tables with ``layers`` (default: all) written over them."""
        merged = Layer()
        for layer in layers if layers is not None else self.layers:
            merged.absorb(layer)
        entities = pa.concat_tables([self.tables.entity_arrow(without=merged.nodes), entity_table(
            [(key, chunk, m) for key, mentions in merged.nodes.items() if mentions
             for chunk, said in mentions.items() for m in said])])
        relations = pa.concat_tables([self.tables.relation_arrow(without=merged.edges), relation_table(
            [(a, b, chunk, m) for (a, b), edge in merged.edges.items() if edge
             for chunk, said in edge.mentions.items() for m in said])])
        return entities, relations

    def fold(self) -> None:
        """Write every layer into new tables (the writer's, while no job is open)."""
        entities, relations = self.folded_tables()
        self.tables = BaseTables(entities, relations, self.shard, self.num_shards)
        self.layers = [Layer()]
        self.invalidate()


def open_state(tables: BaseTables, summaries: dict[str, str], alias_links: dict[str, Links], shard: int,
               num_shards: int) -> GraphState:
    """The live (and, while no job is open, published) state of a shard."""
    return GraphState(tables, [Layer()], summaries, alias_links, shard, num_shards)


@dataclass
class JobRecord:
    """What an open write job changed outside its layer, to hide from readers or undo."""

    new_summaries: set[str] = field(default_factory=set)  # summaries it added
    bases: dict[str, Any] = field(default_factory=dict)  # item id -> pre-job SummaryBase (None: it had none)
    alias_links: dict[str, Links | None] = field(default_factory=dict)  # pre-job links of touched keys

    def remember_base(self, item: str, base: Any) -> None:
        self.bases.setdefault(item, base)

    def remember_aliases(self, key: str, links: Links | None) -> None:
        if key not in self.alias_links:
            self.alias_links[key] = None if links is None else dict(links)


def job_states(live: GraphState) -> tuple[GraphState, GraphState, JobRecord]:
    """(live, published, record) once a job opens on ``live``: the job writes a layer of its
    own above the shared ones, and readers do not see the summaries it adds nor the alias links
    it changes."""
    record = JobRecord()
    job = GraphState(live.tables, [*live.layers, Layer()], live.summaries, live.alias_links, live.shard, live.num_shards)
    published = GraphState(live.tables, live.layers, live.summaries, live.alias_links, live.shard, live.num_shards,
                           record.new_summaries, record.alias_links)
    return job, published, record
