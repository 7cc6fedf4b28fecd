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

from collections.abc import Iterator
from itertools import repeat
from typing import Any, NamedTuple

import networkx as nx

from lightrag_ray.core.alias_rules import NameRow
from lightrag_ray.core.graph_versions import LiveState, PublishedState, pair
from lightrag_ray.core.ids import entity_id, relation_id
from lightrag_ray.core.shard_aliases import ShardAliases
from lightrag_ray.core.shard_views import DESCRIPTION_SEP, ShardView, fragments_hash
from lightrag_ray.core.summary_bases import SummaryBase, base_of, summary_input


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


ENTITY_COLUMNS = ("key", "chunk_id", *EntityMention._fields)
RELATION_COLUMNS = ("key_a", "key_b", "chunk_id", *RelationMention._fields)
Columns = dict[str, list[Any]]


class GraphRows(NamedTuple):
    """A shard's state, or what changed in it, as columns of mention rows (ENTITY_COLUMNS,
    RELATION_COLUMNS) plus summaries and summary bases. In a change set, a row whose
    ``description`` is None says its (item, chunk) entry is gone, and a base of None that
    the item has none any more."""

    entities: Columns
    relations: Columns
    summaries: dict[str, str]
    bases: dict[str, SummaryBase | None]
    aliases: Columns  # core.shard_aliases.ALIAS_COLUMNS (in a change set, reason None: unlinked)


class ShardGraph:
    """One shard of the knowledge graph with LightRAG's merge rules.

    Two versions (core.graph_versions): ``live``, which writes change, and ``published``,
    what readers get from ``fetch``, ``neighborhood``, ``export`` and ``labels``. They are
    the same object until ``begin`` opens a write job; from then on readers see the graph
    as it was, until ``publish`` (they see all of the job's writes) or ``rollback`` (the
    job's writes are undone). The writer's own reads (``entity``, ``relation``, ``counts``,
    summaries, change feed) are of the live graph.

    Persistence is incremental: every write marks the (item, chunk) entries it touched as
    unsaved, ``changed_rows`` gives their current content (storage writes it as a delta), and
    ``mark_saved`` starts a new change set once the delta is committed.
    """

    def __init__(self, shard: int, num_shards: int, max_source_ids: int = 300) -> None:
        self.shard = shard
        self.num_shards = num_shards
        self.max_source_ids = max_source_ids
        self.graph = nx.Graph()
        self.summaries: dict[str, str] = {}
        self.summary_bases: dict[str, SummaryBase] = {}  # item id -> its latest summary (core.summary_bases)
        self.dirty_nodes: set[str] = set()
        self.dirty_edges: set[tuple[str, str]] = set()
        self.unsaved_nodes: dict[str, set[str]] = {}  # key -> chunk ids changed since the last save
        self.unsaved_edges: dict[tuple[str, str], set[str]] = {}
        self.unsaved_summaries: set[str] = set()
        self.unsaved_bases: set[str] = set()
        self._counts = {"entities": 0, "relations": 0}  # owned nodes and edges, kept as they change
        self.aliases = ShardAliases()
        self._state = LiveState(self.graph, self.summaries, self.aliases.links)
        self.live = ShardView(self._state, shard, num_shards, max_source_ids)
        self.published = self.live
        self._job: PublishedState | None = None

    # ---- versions -----------------------------------------------------------------
    def begin(self) -> None:
        """Open a write job: readers keep the graph as it is now (no-op if one is open)."""
        if self._job is None:
            self._job = PublishedState(self._state)
            self.published.state = self._job  # its cached views are of this version
            self.live = ShardView(self._state, self.shard, self.num_shards, self.max_source_ids)

    def publish(self) -> None:
        """End the open job: readers see everything it wrote."""
        if self._job is not None:
            self.published, self._job = self.live, None

    def rollback(self) -> None:
        """End the open job by undoing its writes (back to the published graph). What it
        touched is marked changed, so the next change feed re-embeds or drops any vectors
        the job stored."""
        job = self._job
        if job is None:
            return
        for a, b in job.edges:
            if self.graph.has_edge(a, b):
                self.graph.remove_edge(a, b)
        for key, data in job.nodes.items():
            if data is not None:
                self.graph.add_node(key, **data)
            elif key in self.graph:
                self.graph.remove_node(key)
        for (a, b), data in job.edges.items():
            if data is not None:
                self.graph.add_edge(a, b, **data)
        for digest in job.new_summaries:
            del self.summaries[digest]
        for item, base in job.bases.items():
            self._set_base(item, base)
        self.aliases.restore(job.alias_links)
        self.dirty_nodes.update(job.nodes)
        self.dirty_edges.update(job.edges)
        self._recount()
        self.published.state = self._state
        self.live, self._job = self.published, None

    # ---- writes -------------------------------------------------------------------
    def owns(self, key: str) -> bool:
        """Whether this shard owns the entity ``key``."""
        return self.live.owns(key)

    def owns_edge(self, a: str, b: str) -> bool:
        """Whether this shard is the owner of edge (a, b): the shard of the smaller key."""
        return self.live.owns_edge(a, b)

    def _ensure_node(self, key: str) -> None:
        if self._job is not None:
            self._job.remember_node(key)
        if key not in self.graph:
            owned = self.owns(key)
            self.graph.add_node(key, mentions={}, owned=owned)
            self._counts["entities"] += owned
            if owned:
                self.aliases.created(key)

    def _ensure_edge(self, a: str, b: str) -> None:
        if self._job is not None:
            self._job.remember_edge(a, b)
        if not self.graph.has_edge(a, b):
            self.graph.add_edge(a, b, mentions={})
            self._counts["relations"] += self.owns_edge(a, b)

    def _remove_node(self, key: str) -> None:
        """Remove a node that has no edges left."""
        self._counts["entities"] -= self.graph.nodes[key]["owned"]
        self.graph.remove_node(key)
        self.aliases.removed(key, self._remember_aliases)

    def _remove_edge(self, a: str, b: str) -> None:
        self._counts["relations"] -= self.owns_edge(a, b)
        self.graph.remove_edge(a, b)

    def _recount(self) -> None:
        self._counts = {"entities": sum(1 for _, owned in self.graph.nodes(data="owned") if owned),
                        "relations": sum(1 for a, b in self.graph.edges if self.owns_edge(a, b))}

    def _mark_node(self, key: str, chunks: Any) -> None:
        self.unsaved_nodes.setdefault(key, set()).update(chunks)

    def _mark_edge(self, a: str, b: str, chunks: Any) -> None:
        self.unsaved_edges.setdefault(pair(a, b), set()).update(chunks)

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
            self._mark_node(key, (chunk,))
            self.dirty_nodes.add(key)
            self.live.forget(key)

        fresh_edges: dict[tuple[str, str, str], list[RelationMention]] = {}
        for row in relations:
            a, b = sorted((row["source_key"], row["target_key"]))
            names = {row["source_key"]: row["source"], row["target_key"]: row["target"]}
            self._ensure_node(a)
            self._ensure_node(b)
            self._ensure_edge(a, b)
            weight = float(row["weight"])
            entry = RelationMention(row["keywords"], row["description"], weight, row.get("file_path", ""), names[a], names[b])
            fresh_edges.setdefault((a, b, row["chunk_id"]), []).append(entry)
        for (a, b, chunk), mentions in fresh_edges.items():
            self.graph.edges[a, b]["mentions"][chunk] = sorted(mentions)
            self._mark_edge(a, b, (chunk,))
            self._edge_changed(a, b)

    def _edge_changed(self, a: str, b: str) -> None:
        data = self.graph.edges[a, b]
        data["weight"] = sum(max(m.weight for m in mentions) for mentions in data["mentions"].values())
        self.dirty_edges.add((a, b))
        self.dirty_nodes.update(k for k in (a, b) if self.owns(k))
        self.live.forget_edge(a, b)

    def remove_chunks(self, chunk_ids: set[str]) -> None:
        """Drop everything the given chunks said; items left with no mention vanish."""
        for a, b, data in list(self.graph.edges(data=True)):
            a, b = sorted((a, b))
            dropped = chunk_ids & data["mentions"].keys()
            if dropped:
                self._ensure_edge(a, b)
                self._mark_edge(a, b, dropped)
                for chunk in dropped:
                    del data["mentions"][chunk]
                self._edge_changed(a, b)
                if not data["mentions"]:
                    self._remove_edge(a, b)
        for key, data in list(self.graph.nodes(data=True)):
            dropped = chunk_ids & data["mentions"].keys()
            if dropped or (not data["mentions"] and self.graph.degree(key) == 0):
                self._ensure_node(key)
            self._mark_node(key, dropped)
            for chunk in dropped:
                del data["mentions"][chunk]
                self.dirty_nodes.add(key)
                self.live.forget(key)
            if not data["mentions"] and self.graph.degree(key) == 0:
                self._remove_node(key)

    def drop(self, keys: list[str], pairs: list[tuple[str, str]]) -> None:
        """Remove the entities ``keys`` with all their relations, and the relations ``pairs``
        (manual edits); an endpoint left with no mention and no relation goes too."""
        gone = {k for k in keys if k in self.graph}
        edges = {pair(a, b) for a, b in pairs if self.graph.has_edge(a, b)}
        edges |= {pair(k, other) for k in gone for other in self.graph.adj[k]}
        for a, b in sorted(edges):
            self._ensure_edge(a, b)
            self._mark_edge(a, b, self.graph.edges[a, b]["mentions"])
            self._remove_edge(a, b)
            self.dirty_edges.add((a, b))
            self.live.forget_edge(a, b)
        for key in sorted(gone | {k for edge in edges for k in edge}):
            if key in gone or (not self.graph.nodes[key]["mentions"] and self.graph.degree(key) == 0):
                self._ensure_node(key)
                self._mark_node(key, self.graph.nodes[key]["mentions"])
                self._remove_node(key)
            self.dirty_nodes.add(key)
            self.live.forget(key)

    # ---- aliases (index.aliases runs the pass) ----------------------------------------
    def _remember_aliases(self, key: str) -> None:
        if self._job is not None:
            self._job.remember_aliases(key)

    def _exists(self, key: str) -> bool:
        return key in self.graph and self.graph.nodes[key]["owned"]

    def _alias_name(self, key: str) -> NameRow:
        return key, self.live.display_name(key), sorted(self.graph.nodes[key]["mentions"])

    def new_names(self) -> list[NameRow]:
        """(key, display name, passages) of the owned entities created since the last call."""
        return [self._alias_name(key) for key in self.aliases.take_unlinked(self._exists)]

    def block_members(self, blocks: list[str], limit: int) -> dict[str, list[NameRow]]:
        """Per block key (core.alias_rules), the owned entities in it as (key, display name,
        passages), at most ``limit + 1``."""
        found = self.aliases.block_members(blocks, limit, lambda: (k for k in self.graph if self._exists(k)), self._exists)
        return {block: [self._alias_name(key) for key in keys] for block, keys in found.items()}

    def relink_all(self) -> None:
        """Every owned entity counts as new for the next alias pass (a workspace built before
        aliases existed)."""
        self.aliases.relink(key for key in self.graph if self._exists(key))

    def set_aliases(self, verdicts: list[tuple[str, str, str | None]]) -> int:
        """Link (reason) or unlink (None) pairs of entity keys at their owned ends; returns how
        many links changed."""
        return self.aliases.set(verdicts, self.owns, self._remember_aliases)

    # ---- reads --------------------------------------------------------------------
    # Readers' (the published graph):
    def export(self) -> dict[str, list[dict[str, Any]]]:
        """Every owned entity and owned relation, merged, in key order."""
        return self.published.export()

    def labels(self) -> list[str]:
        """Display names of the owned entities."""
        return self.published.labels()

    def fetch(self, keys: list[str], pairs: list[tuple[str, str]]) -> dict[str, list[dict[str, Any]]]:
        """Merged views of the owned entities ``keys`` and owned relations ``pairs``."""
        return self.published.fetch(keys, pairs)

    def neighborhood(self, keys: list[str], max_relations: int | None = None) -> dict[str, list[dict[str, Any]]]:
        """The owned entities among ``keys`` and their incident relations (see ShardView.neighborhood)."""
        return self.published.neighborhood(keys, max_relations)

    def passage_entities(self, chunk_ids: list[str], keys: list[str], max_chunks: int) -> list[dict[str, Any]]:
        """Owned entities of ``keys`` or of the passages ``chunk_ids``, with their passages
        (see ShardView.passage_entities)."""
        return self.published.passage_entities(chunk_ids, keys, max_chunks)

    # The writer's (the live graph):
    def entity(self, key: str) -> dict[str, Any]:
        """The merged view of an entity this shard owns."""
        return self.live.entity(key)

    def relation(self, a: str, b: str) -> dict[str, Any]:
        """The merged view of the relation between entity keys ``a`` and ``b``."""
        return self.live.relation(a, b)

    def entity_fragments(self, key: str) -> list[str]:
        """Distinct description fragments of an entity, in chunk order."""
        return self.live.entity_fragments(key)

    def relation_fragments(self, a: str, b: str) -> list[str]:
        """Distinct description fragments of a relation, in chunk order."""
        return self.live.relation_fragments(a, b)

    def counts(self) -> dict[str, int]:
        """Owned entities and owned relations (kept up to date by every write)."""
        return dict(self._counts)

    def mention_rows(self, keys: list[str]) -> dict[str, list[Any]]:
        """What the chunks said about the owned entities ``keys`` (``found``: those held) and
        about all their relations, as ``apply`` rows, from the live graph."""
        found = [k for k in dict.fromkeys(keys) if k in self.graph and self.owns(k)]
        entities = [{"key": key, "chunk_id": chunk, **m._asdict()} for key in found
                    for chunk, mentions in self.graph.nodes[key]["mentions"].items() for m in mentions]
        relations = [
            {"source_key": a, "target_key": b, "source": m.name_a, "target": m.name_b, "chunk_id": chunk,
             "keywords": m.keywords, "description": m.description, "weight": m.weight, "file_path": m.file_path}
            for a, b in sorted({pair(k, other) for k in found for other in self.graph.adj[k]})
            for chunk, mentions in self.graph.edges[a, b]["mentions"].items() for m in mentions
        ]
        return {"found": found, "entities": entities, "relations": relations}

    # ---- summaries --------------------------------------------------------------
    def _dirty_owned(self) -> Iterator[tuple[str, tuple[str, ...], str, list[str]]]:
        """(kind, keys, item id, fragments) of the changed items this shard owns, in key order."""
        for key in sorted(self.dirty_nodes):
            if key in self.graph and self.owns(key):
                yield "entity", (key,), entity_id(key), self.entity_fragments(key)
        for a, b in sorted(self.dirty_edges):
            if self.graph.has_edge(a, b) and self.owns_edge(a, b):
                yield "relation", (a, b), relation_id(a, b), self.relation_fragments(a, b)

    def _set_base(self, item: str, base: SummaryBase | None) -> None:
        if self._job is not None:
            self._job.remember_base(item, self.summary_bases.get(item))
        self.unsaved_bases.add(item)
        if base is None:
            self.summary_bases.pop(item, None)
        else:
            self.summary_bases[item] = base

    def pending_summaries(self, max_fragments: int, max_tokens: int, count_tokens) -> list[dict[str, Any]]:
        """Dirty owned items whose description is too long and has no cached summary: what to
        summarise is the item's last summary (``base``) plus the fragments added since, or
        all its fragments (``base`` "") when it has none or lost fragments since."""
        todo = []
        for kind, item, item_id, fragments in self._dirty_owned():
            digest = fragments_hash(fragments)
            too_long = len(fragments) > max_fragments or count_tokens(DESCRIPTION_SEP.join(fragments)) > max_tokens
            if too_long and digest not in self.summaries:
                if kind == "entity":
                    name = self.live.display_name(item[0])
                else:
                    view = self.relation(*item)
                    name = f"{view['source']} - {view['target']}"
                base, parts = summary_input(fragments, self.summary_bases.get(item_id), self.summaries)
                todo.append({"kind": kind, "name": name, "hash": digest, "base": base, "fragments": parts})
        return todo

    def add_summaries(self, summaries: dict[str, str]) -> None:
        """Cache summaries by fragments hash; they replace joined descriptions and become
        the base of the next summary of the dirty owned items they describe."""
        if self._job is not None:
            self._job.new_summaries.update(h for h in summaries if h not in self.summaries)
        self.unsaved_summaries.update(summaries)
        self.summaries.update(summaries)
        for _, _, item_id, fragments in self._dirty_owned():
            if fragments_hash(fragments) in summaries:
                self._set_base(item_id, base_of(fragments))
        self.live.forget_descriptions()

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
                self._set_base(removed[-1], None)
        for a, b in sorted(self.dirty_edges):
            if not self.owns_edge(a, b):
                continue
            if self.graph.has_edge(a, b):
                upserts_r.append(self.relation(a, b))
            else:
                removed.append(relation_id(a, b))
                self._set_base(removed[-1], None)
        self.dirty_nodes.clear()
        self.dirty_edges.clear()
        return {"entities": upserts_e, "relations": upserts_r, "removed": removed}

    # ---- persistence (storage/graph_snapshot.py) --------------------------------------------
    def unsaved_share(self) -> float:
        """Changed items since the last save, as a share of the items held (1.0 when empty)."""
        held = self.graph.number_of_nodes() + self.graph.number_of_edges()
        return (len(self.unsaved_nodes) + len(self.unsaved_edges)) / held if held else 1.0

    def changed_rows(self) -> GraphRows:
        """The current content of every (item, chunk) entry, summary and base changed since
        the last ``mark_saved`` (a removed entry: one row with description None)."""
        entities = _entity_rows((key, chunk, self._node_mentions(key, chunk))
                                for key, chunks in self.unsaved_nodes.items() for chunk in sorted(chunks))
        relations = _relation_rows((a, b, chunk, self._edge_mentions(a, b, chunk))
                                   for (a, b), chunks in self.unsaved_edges.items() for chunk in sorted(chunks))
        summaries = {h: self.summaries[h] for h in self.unsaved_summaries if h in self.summaries}
        return GraphRows(entities, relations, summaries, {i: self.summary_bases.get(i) for i in self.unsaved_bases},
                         self.aliases.changed_columns())

    def all_rows(self) -> GraphRows:
        """Everything the shard holds, as rows (a full snapshot)."""
        entities = _entity_rows((key, chunk, mentions) for key, data in self.graph.nodes(data=True)
                                for chunk, mentions in data["mentions"].items())
        relations = _relation_rows((a, b, chunk, mentions) for a, b in (pair(*e) for e in self.graph.edges)
                                   for chunk, mentions in self.graph.edges[a, b]["mentions"].items())
        return GraphRows(entities, relations, dict(self.summaries), dict(self.summary_bases), self.aliases.all_columns())

    def mark_saved(self) -> None:
        """Start a new change set: what was changed so far is stored."""
        self.unsaved_nodes, self.unsaved_edges = {}, {}
        self.unsaved_summaries, self.unsaved_bases = set(), set()
        self.aliases.unsaved = set()

    def load_rows(self, rows: GraphRows) -> None:
        """Fill an empty shard from a full set of rows in one pass per column set (no
        per-row ``apply``); nothing counts as changed or unsaved afterwards."""
        e, r = rows.entities, rows.relations
        nodes: dict[str, dict[str, list[EntityMention]]] = {}
        # tuple.__new__ over zipped columns builds the mentions without a Python call per row
        entity_mentions = map(tuple.__new__, repeat(EntityMention), zip(e["type"], e["description"], e["file_path"], e["name"]))
        for key, chunk, mention in zip(e["key"], e["chunk_id"], entity_mentions):
            chunks = nodes.get(key)
            if chunks is None:
                nodes[key] = {chunk: [mention]}
            elif chunk in chunks:
                chunks[chunk].append(mention)
            else:
                chunks[chunk] = [mention]
        edges: dict[tuple[str, str], dict[str, list[RelationMention]]] = {}
        relation_mentions = map(tuple.__new__, repeat(RelationMention), zip(
            r["keywords"], r["description"], r["weight"], r["file_path"], r["name_a"], r["name_b"]))
        for a, b, chunk, mention in zip(r["key_a"], r["key_b"], r["chunk_id"], relation_mentions):
            chunks = edges.get((a, b))
            if chunks is None:
                edges[a, b] = {chunk: [mention]}
            elif chunk in chunks:
                chunks[chunk].append(mention)
            else:
                chunks[chunk] = [mention]
        owned = {"entities": 0, "relations": 0}
        for a, b in edges:
            nodes.setdefault(a, {})
            nodes.setdefault(b, {})
            owned["relations"] += self.owns_edge(a, b)
        node_data = []
        for key, chunks in nodes.items():
            for mentions in chunks.values():
                if len(mentions) > 1:
                    mentions.sort()
            mine = self.owns(key)
            owned["entities"] += mine
            node_data.append((key, {"mentions": chunks, "owned": mine}))
        edge_data = []
        for (a, b), chunks in edges.items():
            weight = 0.0
            for mentions in chunks.values():
                if len(mentions) > 1:
                    mentions.sort()
                    weight += max(m.weight for m in mentions)
                else:
                    weight += mentions[0].weight
            edge_data.append((a, b, {"mentions": chunks, "weight": weight}))
        self.graph.add_nodes_from(node_data)
        self.graph.add_edges_from(edge_data)
        self.summaries.update(rows.summaries)
        self.summary_bases.update((item, base) for item, base in rows.bases.items() if base is not None)
        self.aliases.load(rows.aliases)
        self._counts = owned

    def _node_mentions(self, key: str, chunk: str) -> list[EntityMention]:
        data = self.graph.nodes.get(key)
        return data["mentions"].get(chunk, []) if data else []

    def _edge_mentions(self, a: str, b: str, chunk: str) -> list[RelationMention]:
        data = self.graph.get_edge_data(a, b)
        return data["mentions"].get(chunk, []) if data else []


def _entity_rows(entries: Iterator[tuple[str, str, list[EntityMention]]]) -> Columns:
    """ENTITY_COLUMNS of (key, chunk, mentions) entries; no mentions: one row, description None."""
    columns: Columns = {name: [] for name in ENTITY_COLUMNS}
    for key, chunk, mentions in entries:
        for mention in mentions or [EntityMention(None, None, None, None)]:  # type: ignore[arg-type]
            for name, value in zip(ENTITY_COLUMNS, (key, chunk, *mention)):
                columns[name].append(value)
    return columns


def _relation_rows(entries: Iterator[tuple[str, str, str, list[RelationMention]]]) -> Columns:
    """RELATION_COLUMNS of (a, b, chunk, mentions) entries; no mentions: one row, description None."""
    columns: Columns = {name: [] for name in RELATION_COLUMNS}
    for a, b, chunk, mentions in entries:
        for mention in mentions or [RelationMention(None, None, None, None, None, None)]:  # type: ignore[arg-type]
            for name, value in zip(RELATION_COLUMNS, (a, b, chunk, *mention)):
                columns[name].append(value)
    return columns
