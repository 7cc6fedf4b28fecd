"""Manual graph edits as mention rows (pure Python, no Ray): the fields LightRAG lets a
client set, and the rows an entity or relation has after an edit, a rename or a merge.

The graph keeps what each chunk said (core.graph.shard_graph), so an edit rewrites those mentions: a new
description or type is what every chunk now says, a weight is shared out over the chunks,
``source_id`` (``<SEP>``-joined chunk ids) names the chunks. What the client creates is said
by ``manual_creation`` (LightRAG's source id for it) unless it names chunks.
"""

from __future__ import annotations

import math
from typing import Any

from lightrag_ray.core.names import entity_key
from lightrag_ray.core.records import EntityRecord, RelationRecord
from lightrag_ray.core.subgraph import GRAPH_FIELD_SEP

MANUAL_SOURCE = "manual_creation"
ENTITY_FIELDS: dict[str, type] = {"entity_name": str, "entity_type": str, "description": str, "source_id": str,
                                  "file_path": str}
RELATION_FIELDS: dict[str, type] = {"description": str, "keywords": str, "source_id": str, "file_path": str,
                                    "weight": float}
Rows = dict[str, list[dict[str, Any]]]  # "entities" and "relations": rows as ShardGraph.mention_rows gives them


class GraphEditError(ValueError):
    """An edit that cannot be done; ``status`` is LightRAG's HTTP status for it."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def checked_fields(data: dict[str, Any], allowed: dict[str, type], kind: str, reject_unknown: bool) -> dict[str, Any]:
    """The recognised fields of ``data``, strings or (weight) numbers, as LightRAG checks
    them: an unknown field is an error when ``reject_unknown`` (edits), else ignored (creates)."""
    fields: dict[str, Any] = {}
    for name, value in data.items():
        wanted = allowed.get(name)
        if wanted is None:
            if reject_unknown:
                raise GraphEditError(f"Unknown {kind} field '{name}'. Allowed fields: {', '.join(sorted(allowed))}")
            continue
        if wanted is str and not isinstance(value, str):
            raise GraphEditError(f"{kind.capitalize()} field '{name}' must be a string, got {type(value).__name__}")
        if wanted is float:
            value = _number(value)
            if value is None:
                raise GraphEditError(f"{kind.capitalize()} field '{name}' must be a non-negative number, "
                                     f"got {data[name]!r}")
        fields[name] = value
    return fields


def _number(value: Any) -> float | None:
    """A non-negative finite number, or a string of one (the WebUI's editor sends strings); else None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def require_description(fields: dict[str, Any], kind: str, operation: str) -> None:
    """LightRAG's refusal of an empty description."""
    if not str(fields.get("description") or "").strip():
        raise GraphEditError(f"{kind.capitalize()} description cannot be empty for {operation} operation")


def _chunks(fields: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """The chunks that say the item after the edit: ``source_id`` if given, else the current ones."""
    if "source_id" in fields:
        named = [c.strip() for c in fields["source_id"].split(GRAPH_FIELD_SEP) if c.strip()]
    else:
        named = [row["chunk_id"] for row in rows]
    return list(dict.fromkeys(named)) or [MANUAL_SOURCE]


def entity_rows(rows: list[dict[str, Any]], fields: dict[str, Any], template: dict[str, Any]) -> list[dict[str, Any]]:
    """An entity's own mention rows after setting ``fields`` (entity_type, description,
    file_path, source_id); a chunk new to the entity says what ``template`` (a row) says."""
    by_chunk: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_chunk.setdefault(row["chunk_id"], []).append(row)
    first = rows[0] if rows else template
    changes = {"type": fields.get("entity_type"), "description": fields.get("description"),
               "file_path": fields.get("file_path")}
    changes = {k: v for k, v in changes.items() if v is not None}
    return [{**row, **changes, "chunk_id": chunk} for chunk in _chunks(fields, rows)
            for row in by_chunk.get(chunk, [first])]


def relation_rows(rows: list[dict[str, Any]], fields: dict[str, Any], template: dict[str, Any]) -> list[dict[str, Any]]:
    """A relation's mention rows after setting ``fields`` (description, keywords, file_path,
    source_id, weight: shared out so that the relation's weight, summed over chunks, is it)."""
    by_chunk: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_chunk.setdefault(row["chunk_id"], []).append(row)
    first = rows[0] if rows else template
    chunks = _chunks(fields, rows)
    changes: dict[str, Any] = {k: fields[k] for k in ("description", "keywords", "file_path") if k in fields}
    if "weight" in fields:
        changes["weight"] = fields["weight"] / len(chunks)
    return [{**row, **changes, "chunk_id": chunk} for chunk in chunks for row in by_chunk.get(chunk, [first])]


def renamed(rows: Rows, keys: set[str], name: str) -> Rows:
    """The rows with the entities ``keys`` called ``name`` (a rename, or a merge into it);
    relations between two of them would join the entity to itself and are left out."""
    key = entity_key(name)

    def end(row: dict[str, Any], side: str) -> dict[str, Any]:
        return {f"{side}_key": key, side: name} if row[f"{side}_key"] in keys else {}

    entities = [{**row, "key": key, "name": name} if row["key"] in keys else row for row in rows["entities"]]
    relations = [{**row, **end(row, "source"), **end(row, "target")} for row in rows["relations"]]
    return {"entities": entities, "relations": [r for r in relations if r["source_key"] != r["target_key"]]}


def records(rows: Rows) -> tuple[list[EntityRecord], list[RelationRecord]]:
    """The records GraphRouter.apply merges, from mention rows."""
    entities = [EntityRecord(r["name"], r["type"], r["description"], r["chunk_id"], r["file_path"]) for r in rows["entities"]]
    relations = [RelationRecord(r["source"], r["target"], r["keywords"], r["description"], r["chunk_id"],
                                float(r["weight"]), r["file_path"]) for r in rows["relations"]]
    return entities, relations
