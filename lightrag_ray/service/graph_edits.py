"""Manual graph edits (LightRAG Server's graph-editing routes) on the shards and the vectors.

Each edit reads the mention rows of what it touches from the live graph, rewrites them
(core.manual_edits) and, in one write job, drops the old items and merges the new rows, so
an entity renamed or merged moves to the shard of its new key with its relations. The job's
change feed re-embeds what changed and deletes the vectors of what went; readers see the
edit once it is published, and the graph version advances as after an insert or a delete.
The caller serialises writes (WorkspaceService).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from lightrag_ray.config import Settings
from lightrag_ray.core.manual_edits import (
    ENTITY_FIELDS,
    MANUAL_SOURCE,
    RELATION_FIELDS,
    GraphEditError,
    Rows,
    checked_fields,
    entity_rows,
    records,
    relation_rows,
    renamed,
    require_description,
)
from lightrag_ray.core.names import entity_key, normalize_name
from lightrag_ray.core.subgraph import entity_properties, relation_properties
from lightrag_ray.index.stages.summarise import summarise_changed
from lightrag_ray.models.embedding import Embedder
from lightrag_ray.storage.graph.writer import GraphRouter
from lightrag_ray.storage.vector_contract import VectorStore
from lightrag_ray.storage.vectors import delete_graph_vectors, write_graph_changes
from lightrag_ray.storage.workspace import Workspace


def _name(name: str, what: str = "Entity") -> str:
    shown = normalize_name(name)
    if not shown:
        raise GraphEditError(f"{what} name cannot be empty after normalization")
    return shown


class GraphEditor:
    """Edit, create, delete and merge entities and relations of one workspace."""

    def __init__(self, workspace: Workspace, router: GraphRouter, vectors: VectorStore, embedder: Embedder,
                 settings: Settings | None = None) -> None:
        """``settings``: whose LLM summarises descriptions an edit took over the limits (a
        merge of two entities); None: they stay joined until an insert touches them."""
        self.workspace = workspace
        self.router = router
        self.vectors = vectors
        self.embedder = embedder
        self.settings = settings

    # ---- plumbing -----------------------------------------------------------------------
    @contextlib.contextmanager
    def _write(self) -> Iterator[None]:
        """One write job: the block's graph writes, then the vectors, the shards' deltas and
        the graph version follow."""
        with self.router.job() as job:
            yield
            if self.settings is not None:
                summarise_changed(self.settings, self.router)
            changes = self.router.take_changes()
            write_graph_changes(self.vectors, self.embedder.embed, changes)
            self.vectors.flush()
            self.router.commit(self.workspace)
            job.after_publish(lambda: delete_graph_vectors(self.vectors, changes["removed"]))

    def _replace(self, drop: list[str], rows: Rows) -> None:
        """Drop the entities ``drop`` with their relations and merge ``rows`` instead."""
        with self._write():
            self.router.drop(drop, [])
            self.router.apply(*records(rows))

    def _entity(self, key: str) -> dict[str, Any] | None:
        found = self.router.fetch([key], [])["entities"]
        return found[0] if found else None

    def _relation(self, a: str, b: str) -> dict[str, Any] | None:
        found = self.router.fetch([], [(a, b)])["relations"]
        return found[0] if found else None

    def _entity_info(self, key: str) -> dict[str, Any]:
        """LightRAG's entity info: name, source ids and the graph's properties."""
        props = entity_properties(_found(self._entity(key), key))
        return {"entity_name": props["entity_id"], "source_id": props["source_id"], "graph_data": props}

    def _relation_info(self, source: str, target: str) -> dict[str, Any]:
        props = relation_properties(_found(self._relation(entity_key(source), entity_key(target)), f"{source} -> {target}"))
        return {"src_entity": source, "tgt_entity": target, "source_id": props["source_id"], "graph_data": props}

    # ---- entities ---------------------------------------------------------------------
    def edit_entity(self, name: str, updated: dict[str, Any], allow_rename: bool, allow_merge: bool) -> dict[str, Any]:
        """Set an entity's fields and/or rename it (into an existing entity: a merge, if
        allowed); returns its info and LightRAG's ``operation_summary``."""
        fields = checked_fields(updated, ENTITY_FIELDS, "entity", reject_unknown=True)
        if "description" in fields:
            require_description(fields, "entity", "edit")
        key = entity_key(name)
        current = self._entity(key)
        if current is None:
            raise GraphEditError(f"Entity '{name}' does not exist")
        new_name = _name(fields.pop("entity_name")) if "entity_name" in fields else current["name"]
        is_rename = new_name != current["name"]
        if is_rename and not allow_rename:
            raise GraphEditError("Entity renaming is not allowed. Set allow_rename=True to enable this feature")
        new_key = entity_key(new_name)
        target = self._entity(new_key) if new_key != key else None
        if target is not None and not allow_merge:
            raise GraphEditError(f"Entity name '{new_name}' already exists, cannot rename")
        new_name = target["name"] if target is not None else new_name
        rows = self.router.mention_rows([key] + ([new_key] if target else []))
        if fields:
            own = [row for row in rows["entities"] if row["key"] == key]
            template = {"key": key, "name": current["name"], "type": current["type"],
                        "description": current["description"], "file_path": MANUAL_SOURCE}
            rows["entities"] = [row for row in rows["entities"] if row["key"] != key] + entity_rows(own, fields, template)
        if is_rename or "source_id" in fields:
            self._replace([key, new_key], renamed(rows, {key}, new_name))
        elif fields:  # the same chunks say new things: only the entity's own rows change
            with self._write():
                self.router.apply(*records({"entities": rows["entities"], "relations": []}))
        summary = {"merged": target is not None, "merge_status": "success" if target is not None else "not_attempted",
                   "merge_error": None, "operation_status": "success",
                   "target_entity": new_name if target is not None else None, "final_entity": new_name,
                   "renamed": is_rename}
        return {**self._entity_info(new_key), "operation_summary": summary}

    def create_entity(self, name: str, data: dict[str, Any]) -> dict[str, Any]:
        """A new entity said by ``manual_creation`` (or the chunks of ``source_id``); an
        existing one is refused, as LightRAG does."""
        require_description(data, "entity", "create")
        fields = checked_fields(data, ENTITY_FIELDS, "entity", reject_unknown=False)
        fields.pop("entity_name", None)
        name = _name(name)
        key = entity_key(name)
        if self._entity(key) is not None:
            raise GraphEditError(f"Entity '{name}' already exists")
        template = {"key": key, "name": name, "type": "UNKNOWN", "description": "", "file_path": MANUAL_SOURCE}
        self._replace([], {"entities": entity_rows([], fields, template), "relations": []})
        return self._entity_info(key)

    def delete_entity(self, name: str) -> str:
        """Remove an entity, its relations and their vectors; returns LightRAG's message."""
        entity = self._entity(entity_key(name))
        if entity is None:
            raise GraphEditError(f"Entity '{name}' not found.", 404)
        with self._write():
            self.router.drop([entity["key"]], [])
        return f"Entity Delete: remove '{name}' and its {entity['degree']} relations"

    def merge_entities(self, sources: list[str], target: str) -> dict[str, Any]:
        """Merge entities into ``target`` (created if missing): their mentions and relations
        become the target's, relations between them disappear; returns the target's info."""
        keys = list(dict.fromkeys(entity_key(name) for name in sources))
        for name in sources:
            if self._entity(entity_key(name)) is None:
                raise GraphEditError(f"Source entity '{name}' does not exist")
        target_key = entity_key(_name(target, "Target entity"))
        existing = self._entity(target_key)
        target_name = existing["name"] if existing is not None else _name(target)
        rows = self.router.mention_rows(keys + [target_key])
        self._replace(keys + [target_key], renamed(rows, set(keys), target_name))
        return self._entity_info(target_key)

    # ---- relations ----------------------------------------------------------------------
    def _pair_rows(self, source: str, target: str) -> tuple[str, str, list[dict[str, Any]]]:
        """The endpoint keys of a relation and its mention rows ([]: no such relation)."""
        a, b = sorted((entity_key(source), entity_key(target)))
        rows = [r for r in self.router.mention_rows([a])["relations"] if (r["source_key"], r["target_key"]) == (a, b)]
        return a, b, rows

    def _replace_relation(self, a: str, b: str, rows: list[dict[str, Any]]) -> None:
        with self._write():
            self.router.drop([], [(a, b)])
            self.router.apply([], records({"entities": [], "relations": rows})[1])

    def edit_relation(self, source: str, target: str, updated: dict[str, Any]) -> dict[str, Any]:
        """Set a relation's fields; returns LightRAG's relation info."""
        fields = checked_fields(updated, RELATION_FIELDS, "relation", reject_unknown=True)
        if "description" in fields:
            require_description(fields, "relation", "edit")
        a, b, rows = self._pair_rows(source, target)
        if not rows:
            raise GraphEditError(f"Relation from '{source}' to '{target}' does not exist")
        self._replace_relation(a, b, relation_rows(rows, fields, rows[0]))
        return self._relation_info(source, target)

    def create_relation(self, source: str, target: str, data: dict[str, Any]) -> dict[str, Any]:
        """A new relation between two existing entities (weight 1 unless given)."""
        require_description(data, "relation", "create")
        if entity_key(source) == entity_key(target):
            raise GraphEditError(f"Cannot create a self-loop relation on '{source}': "
                                 "source and target must be different entities")
        fields = checked_fields(data, RELATION_FIELDS, "relation", reject_unknown=False)
        ends = []
        for role, name in (("Source", source), ("Target", target)):
            entity = self._entity(entity_key(name))
            if entity is None:
                raise GraphEditError(f"{role} entity '{name}' does not exist")
            ends.append(entity)
        a, b, rows = self._pair_rows(source, target)
        if rows:
            raise GraphEditError(f"Relation from '{source}' to '{target}' already exists")
        template = {"source_key": ends[0]["key"], "target_key": ends[1]["key"], "source": ends[0]["name"],
                    "target": ends[1]["name"], "keywords": "", "description": "", "weight": 1.0,
                    "file_path": MANUAL_SOURCE}
        self._replace_relation(a, b, relation_rows([], {"weight": 1.0, **fields}, template))
        return self._relation_info(ends[0]["name"], ends[1]["name"])

    def delete_relation(self, source: str, target: str) -> str:
        """Remove a relation and its vector; returns LightRAG's message."""
        first, second = sorted((source, target))
        a, b, rows = self._pair_rows(source, target)
        if not rows:
            raise GraphEditError(f"Relation from '{first}' to '{second}' does not exist", 404)
        with self._write():
            self.router.drop([], [(a, b)])
        return f"Relation Delete: `{first}`~`{second}` deleted successfully"


def _found(view: dict[str, Any] | None, name: str) -> dict[str, Any]:
    """The view of an item the edit just wrote (it is there: the job published it)."""
    if view is None:
        raise KeyError(f"{name} is not in the graph after the edit")
    return view
