"""One shard of the knowledge graph: LightRAG's merge rules over mentions keyed by source
chunk, with versions, summaries, alias links, a change feed and persistence rows (pure
Python, no Ray).

The shard stores *mentions*: what each chunk said about an entity (EntityMention) or about
the relation between two entities (RelationMention). Applying a chunk's records again
replaces that chunk's entry, so re-delivery never double-counts. Everything users see (type,
description, weight, keywords, sources) is derived from the mentions sorted by chunk id, so
the result does not depend on the order records arrived in or on how many shards there are.

A shard holds the entities it owns plus "ghost" endpoints of its relations owned elsewhere;
a relation is stored on both endpoints' shards, owned by the shard of the smaller key.
The mentions sit in columnar tables with the recent writes in layers above them
(core.graph.tables, core.graph.versions).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import pyarrow as pa

from lightrag_ray.core.alias_rules import NameRow
from lightrag_ray.core.graph.aliases import ShardAliases
from lightrag_ray.core.graph.mentions import (
    EntityMention,
    Pair,
    RelationMention,
    entity_table,
    pair,
    relation_table,
)
from lightrag_ray.core.graph.summary_bases import SummaryBase, base_of, summary_input
from lightrag_ray.core.graph.tables import BaseTables
from lightrag_ray.core.graph.versions import JobRecord, job_states, open_state
from lightrag_ray.core.graph.views import DESCRIPTION_SEP, ShardView, fragments_hash
from lightrag_ray.core.ids import entity_id, relation_id

# The layer of recent writes is folded into new tables once it holds this many items and
# this share of the tables' items (a fold rebuilds the tables: ~1 s per million mention rows).
FOLD_MIN_ITEMS = 20_000
FOLD_SHARE = 0.25

__all__ = ["DESCRIPTION_SEP", "GraphRows", "ShardGraph", "fragments_hash"]


class GraphRows(NamedTuple):
    """A shard's state, or what changed in it: mention rows as Arrow tables
    (core.graph.mentions' ENTITY_SCHEMA, RELATION_SCHEMA), summaries, summary bases and alias
    links. In a change set, a row with a null ``description`` says its (item, chunk) entry is
    gone, and a base of None that the item has none any more."""

    entities: pa.Table
    relations: pa.Table
    summaries: dict[str, str]
    bases: dict[str, SummaryBase | None]
    aliases: dict[str, list[Any]]  # core.graph.aliases.ALIAS_COLUMNS (in a change set, reason None: unlinked)


class ShardGraph:
    """One shard of the knowledge graph with LightRAG's merge rules.

    Two versions (core.graph.versions): ``live``, which writes change, and ``published``,
    what readers get from ``fetch``, ``neighborhood``, ``export``, ``labels`` and
    ``passage_entities``. They are the same until ``begin`` opens a write job; from then on
    readers see the graph as it was, until ``publish`` (they see all of the job's writes) or
    ``rollback`` (the job's writes are undone). The writer's own reads (``entity``,
    ``relation``, ``counts``, summaries, change feed) are of the live graph.

    Persistence is incremental: every write marks the (item, chunk) entries it touched as
    unsaved, ``changed_rows`` gives their current content (storage writes it as a delta), and
    ``mark_saved`` starts a new change set once the delta is committed.
    """

    def __init__(self, shard: int, num_shards: int, max_source_ids: int = 300) -> None:
        self.shard = shard
        self.num_shards = num_shards
        self.max_source_ids = max_source_ids
        self.summaries: dict[str, str] = {}
        self.summary_bases: dict[str, SummaryBase] = {}  # item id -> its latest summary (core.graph.summary_bases)
        self.dirty_nodes: set[str] = set()
        self.dirty_edges: set[Pair] = set()
        self.unsaved_nodes: dict[str, set[str]] = {}  # key -> chunk ids changed since the last save
        self.unsaved_edges: dict[Pair, set[str]] = {}
        self.unsaved_summaries: set[str] = set()
        self.unsaved_bases: set[str] = set()
        self.aliases = ShardAliases()
        self.folds = 0  # how often the recent writes were folded into new tables
        # Graph versions (the manifest's): of the live graph's last commit, of what readers see,
        # and the last one whose vectors readers may search unfiltered (``read_version``).
        self.committed_version = self.published_version = self.settled_version = 0
        self._open(BaseTables.empty(shard, num_shards))

    def _open(self, tables: BaseTables) -> None:
        self._state = open_state(tables, self.summaries, self.aliases.links, self.shard, self.num_shards)
        self._counts = tables.owned_counts()  # owned nodes and edges, kept as they change
        self.live = ShardView(self._state, self.shard, self.num_shards, self.max_source_ids)
        self.published = self.live
        self._job: JobRecord | None = None

    # ---- versions -----------------------------------------------------------------
    def begin(self) -> None:
        """Open a write job: readers keep the graph as it is now (no-op if one is open)."""
        if self._job is None:
            self._state, published, self._job = job_states(self._state)
            self.published.state = published  # its cached views are of this version
            self.live = ShardView(self._state, self.shard, self.num_shards, self.max_source_ids)

    def publish(self) -> None:
        """End the open job: readers see everything it wrote."""
        if self._job is None:
            return
        *shared, job_layer = self._state.layers
        shared[-1].absorb(job_layer)
        self._state.layers = self.published.state.layers  # the shared list: [..., the layer that took the job's]
        self._state.invalidate()
        self.published, self._job = self.live, None
        self.published_version = self.committed_version
        self._fold_if_grown()

    def rollback(self) -> None:
        """End the open job by undoing its writes (back to the published graph). What it
        touched is marked changed, so the next change feed re-embeds or drops any vectors
        the job stored."""
        job = self._job
        if job is None:
            return
        self._job = None
        self.settled_version = -1  # vectors it stored may stay: readers filter until a job settles
        job_layer = self._state.layers[-1]
        for digest in job.new_summaries:
            del self.summaries[digest]
        for item, base in job.bases.items():
            self._set_base(item, base)
        self.aliases.restore(job.alias_links)
        self.dirty_nodes.update(job_layer.nodes)
        self.dirty_edges.update(job_layer.edges)
        self._state = self.published.state
        self._state.hidden_summaries, self._state.alias_before = set(), None
        self._counts = self._state.count_owned()
        self.live = self.published

    # ---- writes -------------------------------------------------------------------
    def _ensure_node(self, key: str) -> None:
        if not self._state.has_node(key):
            self._state.node_for_write(key)
            owned = self.live.owns(key)
            self._counts["entities"] += owned
            if owned:
                self.aliases.created(key)

    def _ensure_edge(self, a: str, b: str) -> None:
        if not self._state.has_edge(a, b):
            self._state.edge_for_write(a, b)
            self._counts["relations"] += self.live.owns_edge(a, b)

    def _remove_node(self, key: str) -> None:
        """Remove a node that has no edges left."""
        self._counts["entities"] -= self.live.owns(key)
        self._state.remove_node(key)
        self.aliases.removed(key, self._remember_aliases)

    def _remove_edge(self, a: str, b: str) -> None:
        self._counts["relations"] -= self.live.owns_edge(a, b)
        self._state.remove_edge(a, b)

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
            self._state.node_for_write(key)[chunk] = sorted(mentions)
            self._mark_node(key, (chunk,))
            self.dirty_nodes.add(key)
            self.live.forget(key)

        fresh_edges: dict[tuple[str, str, str], list[RelationMention]] = {}
        for row in relations:
            a, b = pair(row["source_key"], row["target_key"])
            names = {row["source_key"]: row["source"], row["target_key"]: row["target"]}
            self._ensure_node(a)
            self._ensure_node(b)
            self._ensure_edge(a, b)
            said = RelationMention(row["keywords"], row["description"], float(row["weight"]),
                                   row.get("file_path", ""), names[a], names[b])
            fresh_edges.setdefault((a, b, row["chunk_id"]), []).append(said)
        for (a, b, chunk), edge_mentions in fresh_edges.items():
            self._state.edge_for_write(a, b)[chunk] = sorted(edge_mentions)
            self._mark_edge(a, b, (chunk,))
            self._edge_changed(a, b)
        self._fold_if_grown()

    def _edge_changed(self, a: str, b: str) -> None:
        self._state.reweigh(a, b)
        self.dirty_edges.add(pair(a, b))
        self.dirty_nodes.update(k for k in (a, b) if self.live.owns(k))
        self.live.forget_edge(a, b)

    def remove_chunks(self, chunk_ids: set[str]) -> None:
        """Drop everything the given chunks said; items left with no mention vanish."""
        keys, edges = self._state.items_of_chunks(chunk_ids)
        for a, b in sorted(edges):
            mentions = self._state.edge_for_write(a, b)
            dropped = chunk_ids & mentions.keys()
            self._mark_edge(a, b, dropped)
            for chunk in dropped:
                del mentions[chunk]
            self._edge_changed(a, b)
            if not mentions:
                self._remove_edge(a, b)
        for key in sorted({*keys, *(k for edge in edges for k in edge)}):
            node = self._state.node(key)
            if node is None:
                continue
            dropped = chunk_ids & node.mentions.keys()
            if dropped:
                mentions = self._state.node_for_write(key)
                self._mark_node(key, dropped)
                for chunk in dropped:
                    del mentions[chunk]
                self.dirty_nodes.add(key)
                self.live.forget(key)
            if not self._state.held_node(key).mentions and self._state.degree(key) == 0:
                self._remove_node(key)
        self._fold_if_grown()

    def drop(self, keys: list[str], pairs: list[tuple[str, str]]) -> None:
        """Remove the entities ``keys`` with all their relations, and the relations ``pairs``
        (manual edits); an endpoint left with no mention and no relation goes too."""
        gone = {k for k in keys if self._state.has_node(k)}
        edges = {pair(a, b) for a, b in pairs if self._state.has_edge(a, b)}
        edges |= {pair(k, other) for k in gone for other in self._state.neighbors(k)}
        for a, b in sorted(edges):
            self._mark_edge(a, b, self._state.held_edge(a, b).mentions)
            self._remove_edge(a, b)
            self.dirty_edges.add((a, b))
            self.live.forget_edge(a, b)
        for key in sorted(gone | {k for edge in edges for k in edge}):
            node = self._state.held_node(key)
            if key in gone or (not node.mentions and self._state.degree(key) == 0):
                self._mark_node(key, node.mentions)
                self._remove_node(key)
            self.dirty_nodes.add(key)
            self.live.forget(key)
        self._fold_if_grown()

    def _fold_if_grown(self) -> None:
        """Fold the layer of recent writes into new tables once it has grown (no job open)."""
        state = self._state
        if self._job is None and len(state.top) >= max(FOLD_MIN_ITEMS, FOLD_SHARE * state.tables.item_count()):
            state.fold()
            self.folds += 1

    # ---- aliases (index.stages.aliases runs the pass) ----------------------------------------
    def _remember_aliases(self, key: str) -> None:
        if self._job is not None:
            self._job.remember_aliases(key, self.aliases.links.get(key))

    def _exists(self, key: str) -> bool:
        return self.live.owns(key) and self._state.has_node(key)

    def _alias_name(self, key: str) -> NameRow:
        return key, self.live.display_name(key), self._state.entity_chunks(key)

    def new_names(self) -> list[NameRow]:
        """(key, display name, passages) of the owned entities created since the last call."""
        return [self._alias_name(key) for key in self.aliases.take_unlinked(self._exists)]

    def block_members(self, blocks: list[str], limit: int) -> dict[str, list[NameRow]]:
        """Per block key (core.alias_rules), the owned entities in it as (key, display name,
        passages), at most ``limit + 1``."""
        found = self.aliases.block_members(blocks, limit, lambda: (k for k in self._state.keys() if self.live.owns(k)),
                                           self._exists)
        return {block: [self._alias_name(key) for key in keys] for block, keys in found.items()}

    def relink_all(self) -> None:
        """Every owned entity counts as new for the next alias pass (a workspace built before
        aliases existed)."""
        self.aliases.relink(key for key in self._state.keys() if self.live.owns(key))

    def set_aliases(self, verdicts: list[tuple[str, str, str | None]]) -> int:
        """Link (reason) or unlink (None) pairs of entity keys at their owned ends; returns how
        many links changed."""
        return self.aliases.set(verdicts, self.live.owns, self._remember_aliases)

    # ---- reads --------------------------------------------------------------------
    # Readers read ``published`` (a ShardView), the writer ``live``: the graph contract picks
    # the view by an operation's access. The writer's reads that need more than a view:
    def counts(self) -> dict[str, int]:
        """Owned entities and owned relations (kept up to date by every write)."""
        return dict(self._counts)

    def held_keys(self) -> list[str]:
        """Every key this shard holds in the live graph (owned entities and relation ends), sorted."""
        return sorted(self._state.keys())

    def held_pairs(self) -> list[Pair]:
        """Every relation this shard holds in the live graph, as sorted pairs, sorted."""
        return sorted(self._state.pairs())

    def mention_rows(self, keys: list[str]) -> dict[str, list[Any]]:
        """What the chunks said about the owned entities ``keys`` (``found``: those held) and
        about all their relations, as ``apply`` rows, from the live graph."""
        found = [k for k in dict.fromkeys(keys) if self._exists(k)]
        entities = [{"key": key, "chunk_id": chunk, **m._asdict()} for key in found
                    for chunk, mentions in self._state.held_node(key).mentions.items() for m in mentions]
        relations = [
            {"source_key": a, "target_key": b, "source": m.name_a, "target": m.name_b, "chunk_id": chunk,
             "keywords": m.keywords, "description": m.description, "weight": m.weight, "file_path": m.file_path}
            for a, b in sorted({pair(k, other) for k in found for other in self._state.neighbors(k)})
            for chunk, mentions in self._state.held_edge(a, b).mentions.items() for m in mentions
        ]
        return {"found": found, "entities": entities, "relations": relations}

    # ---- summaries --------------------------------------------------------------
    def _dirty_owned(self) -> Iterator[tuple[str, tuple[str, ...], str, list[str]]]:
        """(kind, keys, item id, fragments) of the changed items this shard owns, in key order."""
        for key in sorted(self.dirty_nodes):
            if self._exists(key):
                yield "entity", (key,), entity_id(key), self.live.entity_fragments(key)
        for a, b in sorted(self.dirty_edges):
            if self.live.owns_edge(a, b) and self._state.has_edge(a, b):
                yield "relation", (a, b), relation_id(a, b), self.live.relation_fragments(a, b)

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
                    view = self.live.relation(*item)
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
    def take_changes(self, limit: int | None = None) -> dict[str, list[Any]]:
        """Owned entities/relations changed since the last call (views, or ids of removed ones),
        in key order; with ``limit``, at most that many (in no set order), the others left for
        the next call."""
        nodes = _take(self.dirty_nodes, self.live.owns, limit)
        edges = _take(self.dirty_edges, lambda e: self.live.owns_edge(*e), None if limit is None else limit - len(nodes))
        upserts_e, upserts_r, removed = [], [], []
        for key in nodes:
            if self._state.has_node(key):
                upserts_e.append(self.live.entity(key))
            else:
                removed.append(entity_id(key))
                self._set_base(removed[-1], None)
        for a, b in edges:
            if self._state.has_edge(a, b):
                upserts_r.append(self.live.relation(a, b))
            else:
                removed.append(relation_id(a, b))
                self._set_base(removed[-1], None)
        return {"entities": upserts_e, "relations": upserts_r, "removed": removed}

    def change_count(self) -> int:
        """Owned items in the change feed."""
        return sum(1 for key in self.dirty_nodes if self.live.owns(key)) + sum(1 for e in self.dirty_edges if self.live.owns_edge(*e))

    # ---- persistence (storage/graph/snapshot.py) --------------------------------------------
    def unsaved_share(self) -> float:
        """Changed items since the last save, as a share of the items held (1.0 when empty)."""
        held = self._state.tables.item_count() + sum(len(layer) for layer in self._state.layers)
        return (len(self.unsaved_nodes) + len(self.unsaved_edges)) / held if held else 1.0

    def changed_rows(self) -> GraphRows:
        """The current content of every (item, chunk) entry, summary and base changed since
        the last ``mark_saved`` (a removed entry: one row with null fields)."""
        entities = entity_table([(key, chunk, mention) for key, chunks in self.unsaved_nodes.items()
                                 for chunk in sorted(chunks) for mention in self._said(key, chunk)])
        relations = relation_table([(a, b, chunk, mention) for (a, b), chunks in self.unsaved_edges.items()
                                    for chunk in sorted(chunks) for mention in self._said_of_edge(a, b, chunk)])
        summaries = {h: self.summaries[h] for h in self.unsaved_summaries if h in self.summaries}
        return GraphRows(entities, relations, summaries, {i: self.summary_bases.get(i) for i in self.unsaved_bases},
                         self.aliases.changed_columns())

    def _said(self, key: str, chunk: str) -> list[EntityMention | None]:
        node = self._state.node(key)
        return (node.mentions.get(chunk) if node else None) or [None]

    def _said_of_edge(self, a: str, b: str, chunk: str) -> list[RelationMention | None]:
        edge = self._state.edge(a, b)
        return (edge.mentions.get(chunk) if edge else None) or [None]

    def all_rows(self) -> GraphRows:
        """Everything the shard holds (the live graph), as rows (a full snapshot)."""
        entities, relations = self._state.folded_tables()
        return GraphRows(entities, relations, dict(self.summaries), dict(self.summary_bases), self.aliases.all_columns())

    def mark_saved(self, version: int | None = None) -> None:
        """Start a new change set: what was changed so far is stored (as graph ``version``;
        outside a write job readers see it at once, and it has no readers to settle)."""
        self.unsaved_nodes, self.unsaved_edges = {}, {}
        self.unsaved_summaries, self.unsaved_bases = set(), set()
        self.aliases.unsaved = set()
        if version is not None:
            self.committed_version = version
            if self._job is None:
                self.published_version = self.settled_version = version

    def read_version(self) -> dict[str, Any]:
        """What readers see: the published graph ``version``, and whether the vector store holds
        only rows of it (``settled``); otherwise a reader keeps to the chunk vectors visible at
        ``version`` (storage.vectors.visible_at): a write job is open, or its old rows are not
        deleted yet."""
        settled = self._job is None and self.settled_version == self.published_version
        return {"version": self.published_version, "settled": settled}

    def settle(self) -> None:
        """The vector store holds only rows of the published version (the writer deleted the
        rows it retired, after publishing)."""
        if self._job is None:
            self.settled_version = self.published_version

    def load_rows(self, rows: GraphRows) -> None:
        """Fill an empty shard from a full set of rows (a snapshot); nothing counts as changed
        or unsaved afterwards."""
        self.summaries.update(rows.summaries)
        self.summary_bases.update((item, base) for item, base in rows.bases.items() if base is not None)
        self.aliases.load(rows.aliases)
        self._open(BaseTables(rows.entities, rows.relations, self.shard, self.num_shards))


def _take(dirty: set[Any], owned: Any, limit: int | None) -> list[Any]:
    """Owned items taken out of a change set: all of them sorted, or at most ``limit`` (items
    this shard does not own are dropped on the way)."""
    if limit is None:
        taken = sorted(item for item in dirty if owned(item))
        dirty.clear()
        return taken
    taken = []
    while dirty and len(taken) < limit:
        item = dirty.pop()
        if owned(item):
            taken.append(item)
    return taken
