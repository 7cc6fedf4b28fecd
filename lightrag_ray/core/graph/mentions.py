"""What the chunks said about an item: the mention records a shard stores, and their column
layout in Arrow tables (pure Python, no Ray)."""

from __future__ import annotations

from typing import Any, NamedTuple

import pyarrow as pa


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
ENTITY_SCHEMA = pa.schema([(name, pa.string()) for name in ENTITY_COLUMNS])
RELATION_SCHEMA = pa.schema([(name, pa.float64() if name == "weight" else pa.string()) for name in RELATION_COLUMNS])

Pair = tuple[str, str]
Mentions = dict[str, list[Any]]  # chunk id -> what that chunk said (EntityMention or RelationMention), sorted
Columns = dict[str, list[Any]]


def pair(a: str, b: str) -> Pair:
    """An undirected edge as (smaller key, larger key)."""
    return (a, b) if a < b else (b, a)


def edge_weight(mentions: Mentions) -> float:
    """A relation's weight: per source chunk the largest weight it gave, summed over chunks."""
    return sum(max(m.weight for m in said) for said in mentions.values())


def entity_table(entries: list[tuple[str, str, EntityMention | None]]) -> pa.Table:
    """ENTITY_SCHEMA rows of (key, chunk, mention) entries (a mention of None: a row whose
    fields are null, which a change set reads as "this entry is gone")."""
    columns: Columns = {name: [] for name in ENTITY_COLUMNS}
    for key, chunk, mention in entries:
        for name, value in zip(ENTITY_COLUMNS, (key, chunk, *(mention or (None,) * 4))):
            columns[name].append(value)
    return pa.table(columns, schema=ENTITY_SCHEMA)


def relation_table(entries: list[tuple[str, str, str, RelationMention | None]]) -> pa.Table:
    """RELATION_SCHEMA rows of (a, b, chunk, mention) entries (None: null fields, as above)."""
    columns: Columns = {name: [] for name in RELATION_COLUMNS}
    for a, b, chunk, mention in entries:
        for name, value in zip(RELATION_COLUMNS, (a, b, chunk, *(mention or (None,) * 6))):
            columns[name].append(value)
    return pa.table(columns, schema=RELATION_SCHEMA)
