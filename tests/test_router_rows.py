"""Shard rows built by the router carry every record field plus the identity keys."""

from __future__ import annotations

from lightrag_ray.core.names import entity_key
from lightrag_ray.core.records import EntityRecord, RelationRecord
from lightrag_ray.core.graph.routing import entity_rows, relation_rows


def test_rows_equal_the_records_fields_plus_keys_and_are_new_dicts():
    entity = EntityRecord("bob  cratchit", "person", "A clerk.", "chunk-1", "carol.txt")
    relation = RelationRecord("Bob Cratchit", "EBENEZER SCROOGE", "work", "Bob works for Scrooge.", "chunk-1", 2.0)
    [e_row] = entity_rows([entity])
    [r_row] = relation_rows([relation])
    assert e_row == {**entity.to_dict(), "key": entity_key(entity.name)} and e_row["key"] == "bob cratchit"
    assert r_row == {**relation.to_dict(), "source_key": "bob cratchit", "target_key": "ebenezer scrooge"}
    e_row["description"] = "changed"
    assert entity.description == "A clerk." and "key" not in vars(entity)  # a copy, not the record's own dict
