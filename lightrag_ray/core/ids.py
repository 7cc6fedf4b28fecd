"""Deterministic ids: every write is an idempotent upsert keyed by content."""

from __future__ import annotations

import hashlib
import zlib


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def doc_id(content: str) -> str:
    """Id of a document, from its text."""
    return f"doc-{_md5(content)}"


def chunk_id(doc: str, order: int, text: str) -> str:
    """Id of a chunk: its text within its document position (stable across runs)."""
    return f"chunk-{_md5(f'{doc}:{order}:{text}')}"


def chunk_text_key(text: str) -> str:
    """Key of a chunk's text alone: the extraction cache's key, so that a chunk whose text did
    not change costs no LLM call when its document is edited or moved."""
    return f"text-{_md5(text)}"


def entity_id(key: str) -> str:
    """Id of an entity, from its identity key (see extraction.entity_key)."""
    return f"ent-{_md5(key)}"


def relation_id(key_a: str, key_b: str) -> str:
    """Id of the unordered relation between two entity keys."""
    return "rel-" + _md5("\x1f".join(sorted((key_a, key_b))))


def shard_of(key: str, num_shards: int) -> int:
    """Stable shard of an entity key (crc32; never Python's salted hash())."""
    return zlib.crc32(key.encode("utf-8")) % num_shards
