"""A shard's bulk state as columns: every mention in Arrow and numpy arrays, sorted by item,
with indexes over them (pure Python, no Ray).

One Python object per mention and per item cost about 4.7 KiB per item held (a shard of 157k
entities and 221k relations took 1.18 GiB). Here repeated strings (keys, chunk ids, types,
paths, spellings) are int32 codes into sorted dictionaries, descriptions and keywords stay
in Arrow string arrays, and an item's mentions are a contiguous run of rows, so a shard
costs about its text. The tables are immutable: a shard's recent writes live in layers of
Python objects above them (core.graph.versions) until they are folded into new tables.

Keys are coded in sorted order, so key codes compare like keys and a relation's pair
(a < b) is (code a < code b); chunk codes sort like chunk ids, so rows of one item come in
chunk order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lightrag_ray.core.graph.mentions import (
    ENTITY_SCHEMA,
    RELATION_SCHEMA,
    EntityMention,
    Mentions,
    Pair,
    RelationMention,
)
from lightrag_ray.core.ids import shard_of

_EMPTY_CODES = np.zeros(0, dtype=np.int32)


def _sorted_unique(*columns: pa.ChunkedArray | pa.Array) -> pa.Array:
    values = pa.chunked_array([c for column in columns for c in (column.chunks if isinstance(column, pa.ChunkedArray)
                                                                 else [column])], type=pa.string())
    unique = pc.unique(values)
    return unique.take(pc.sort_indices(unique))


def _codes(column: pa.ChunkedArray | pa.Array, dictionary: pa.Array) -> np.ndarray:
    """Positions of ``column``'s values in ``dictionary`` (every value must be in it)."""
    if len(column) == 0:
        return _EMPTY_CODES
    return pc.index_in(column, value_set=dictionary).to_numpy(zero_copy_only=False).astype(np.int32, copy=False)


class Dictionary:
    """Distinct strings in sorted order and their codes."""

    def __init__(self, values: pa.Array) -> None:
        self.values = values
        self._strings: list[str] | None = None
        self._codes: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.values)

    @property
    def strings(self) -> list[str]:
        if self._strings is None:
            self._strings = self.values.to_pylist()
        return self._strings

    def code(self, value: str) -> int | None:
        if self._codes is None:
            self._codes = {s: i for i, s in enumerate(self.strings)}
        return self._codes.get(value)


class EncodedColumn:
    """A string column as codes into a sorted dictionary: its own, or one it shares."""

    def __init__(self, column: pa.ChunkedArray | pa.Array, dictionary: Dictionary | None = None) -> None:
        self.dictionary = dictionary or Dictionary(_sorted_unique(column))
        self.codes = _codes(column, self.dictionary.values)

    def take(self, rows: np.ndarray) -> list[str]:
        strings = self.dictionary.strings
        return [strings[i] for i in self.codes[rows]]


def _runs(values: np.ndarray, size: int) -> np.ndarray:
    """Start offsets (``size + 1``) of the runs of each value 0..size-1 in sorted ``values``."""
    return np.searchsorted(values, np.arange(size + 1)).astype(np.int64)


class BaseTables:
    """Every entity and relation mention of one shard at one point, columnar and indexed.

    Entities: rows sorted by (key, chunk); ``entity_rows(k)`` of key code k is a slice.
    Relations: items are pairs (a < b) sorted by codes; rows sorted by (pair, chunk).
    Adjacency: per key code, the other ends and pair numbers of its relations.
    """

    def __init__(self, entities: pa.Table, relations: pa.Table, shard: int, num_shards: int) -> None:
        entities = entities.select(ENTITY_SCHEMA.names).cast(ENTITY_SCHEMA)
        relations = relations.select(RELATION_SCHEMA.names).cast(RELATION_SCHEMA)
        self.keys = Dictionary(_sorted_unique(entities["key"], relations["key_a"], relations["key_b"]))
        self.chunks = Dictionary(_sorted_unique(entities["chunk_id"], relations["chunk_id"]))
        n_keys = len(self.keys)
        self.owned = np.fromiter((shard_of(k, num_shards) == shard for k in self.keys.strings), bool, n_keys)

        e_key, e_chunk = _codes(entities["key"], self.keys.values), _codes(entities["chunk_id"], self.chunks.values)
        order = np.lexsort((e_chunk, e_key))
        entities = entities.take(pa.array(order))
        self.e_key, self.e_chunk = e_key[order], e_chunk[order]
        self.e_start = _runs(self.e_key, n_keys)
        self.names = Dictionary(_sorted_unique(entities["name"], relations["name_a"], relations["name_b"]))
        self.e_type = EncodedColumn(entities["type"])
        self.e_file = EncodedColumn(entities["file_path"])
        self.e_name = EncodedColumn(entities["name"], self.names)
        self.e_description = entities["description"].combine_chunks()

        r_a, r_b = _codes(relations["key_a"], self.keys.values), _codes(relations["key_b"], self.keys.values)
        r_chunk = _codes(relations["chunk_id"], self.chunks.values)
        order = np.lexsort((r_chunk, r_b, r_a))
        relations = relations.take(pa.array(order))
        r_a, r_b, self.r_chunk = r_a[order], r_b[order], r_chunk[order]
        new_pair = np.ones(len(r_a), dtype=bool)
        new_pair[1:] = (r_a[1:] != r_a[:-1]) | (r_b[1:] != r_b[:-1])
        starts = np.flatnonzero(new_pair)
        self.p_a, self.p_b = r_a[starts], r_b[starts]
        self.r_start = np.append(starts, len(r_a)).astype(np.int64)
        self.r_pair = np.cumsum(new_pair) - 1 if len(r_a) else _EMPTY_CODES
        self.r_keywords = relations["keywords"].combine_chunks()
        self.r_description = relations["description"].combine_chunks()
        self.r_weight = relations["weight"].to_numpy().astype(np.float64) if len(r_a) else np.zeros(0)
        self.r_file = EncodedColumn(relations["file_path"])
        self.r_name_a = EncodedColumn(relations["name_a"], self.names)
        self.r_name_b = EncodedColumn(relations["name_b"], self.names)
        self.p_weight = self._pair_weights()

        # adjacency: (key, other, pair) for both ends, grouped by key, others in code order
        ends = np.concatenate([self.p_a, self.p_b])
        others = np.concatenate([self.p_b, self.p_a])
        pair_numbers = np.tile(np.arange(len(self.p_a), dtype=np.int64), 2)
        order = np.lexsort((others, ends))
        self.adj_other, self.adj_pair = others[order], pair_numbers[order]
        self.adj_start = _runs(ends[order], n_keys)
        self._chunk_keys: tuple[np.ndarray, np.ndarray] | None = None
        self._display_names: np.ndarray | None = None

    @classmethod
    def empty(cls, shard: int, num_shards: int) -> BaseTables:
        return cls(ENTITY_SCHEMA.empty_table(), RELATION_SCHEMA.empty_table(), shard, num_shards)

    def _pair_weights(self) -> np.ndarray:
        """Per pair: the largest weight of each source chunk, summed over its chunks."""
        n = len(self.r_chunk)
        if not n:
            return np.zeros(0)
        new_entry = np.ones(n, dtype=bool)
        new_entry[1:] = (self.r_pair[1:] != self.r_pair[:-1]) | (self.r_chunk[1:] != self.r_chunk[:-1])
        entry_starts = np.flatnonzero(new_entry)
        per_entry = np.maximum.reduceat(self.r_weight, entry_starts)
        return np.bincount(self.r_pair[entry_starts], weights=per_entry, minlength=len(self.p_a))

    # ---- sizes --------------------------------------------------------------------------
    @property
    def mention_rows(self) -> int:
        return len(self.e_key) + len(self.r_chunk)

    def item_count(self) -> int:
        """Entities (keys) and relations (pairs) held."""
        return len(self.keys) + len(self.p_a)

    def owned_counts(self) -> dict[str, int]:
        """Owned entities and owned relations (a relation is owned by the shard of its smaller key)."""
        return {"entities": int(self.owned.sum()), "relations": int(self.owned[self.p_a].sum()) if len(self.p_a) else 0}

    # ---- lookups ----------------------------------------------------------------------------
    def key_code(self, key: str) -> int | None:
        return self.keys.code(key)

    def pair_number(self, a: str, b: str) -> int | None:
        """The pair of keys a < b, or None."""
        code_a, code_b = self.keys.code(a), self.keys.code(b)
        if code_a is None or code_b is None:
            return None
        start, end = self.adj_start[code_a], self.adj_start[code_a + 1]
        at = start + np.searchsorted(self.adj_other[start:end], code_b)
        return int(self.adj_pair[at]) if at < end and self.adj_other[at] == code_b else None

    def has_node(self, key: str) -> bool:
        return self.keys.code(key) is not None

    def entity_mentions(self, key: str) -> Mentions:
        """What each chunk said about ``key`` (empty when only named as a relation end)."""
        code = self.keys.code(key)
        if code is None:
            return {}
        start, end = int(self.e_start[code]), int(self.e_start[code + 1])
        rows = np.arange(start, end)
        return self._by_chunk(self.e_chunk[start:end], map(EntityMention._make, zip(
            self.e_type.take(rows), self.e_description.slice(start, end - start).to_pylist(),
            self.e_file.take(rows), self.e_name.take(rows))))

    def relation_mentions(self, number: int) -> Mentions:
        """What each chunk said about pair ``number``."""
        start, end = int(self.r_start[number]), int(self.r_start[number + 1])
        rows = np.arange(start, end)
        return self._by_chunk(self.r_chunk[start:end], map(RelationMention._make, zip(
            self.r_keywords.slice(start, end - start).to_pylist(),
            self.r_description.slice(start, end - start).to_pylist(), self.r_weight[start:end].tolist(),
            self.r_file.take(rows), self.r_name_a.take(rows), self.r_name_b.take(rows))))

    def _by_chunk(self, chunk_codes: np.ndarray, mentions: Iterable[Any]) -> Mentions:
        """Mentions grouped under their chunk's id (codes into the chunk dictionary), sorted."""
        chunks = self.chunks.strings
        said: Mentions = {}
        for code, mention in zip(chunk_codes, mentions):
            said.setdefault(chunks[code], []).append(mention)
        return _sorted_entries(said)

    def pair_keys(self, number: int) -> Pair:
        strings = self.keys.strings
        return strings[self.p_a[number]], strings[self.p_b[number]]

    def neighbors(self, key: str) -> list[str]:
        code = self.keys.code(key)
        if code is None:
            return []
        strings = self.keys.strings
        return [strings[i] for i in self.adj_other[self.adj_start[code]:self.adj_start[code + 1]]]

    def incident(self, key: str) -> Iterator[tuple[str, float]]:
        """(other end, weight) of every relation of ``key``."""
        code = self.keys.code(key)
        if code is None:
            return iter(())
        start, end = self.adj_start[code], self.adj_start[code + 1]
        strings = self.keys.strings
        return zip((strings[i] for i in self.adj_other[start:end]), self.p_weight[self.adj_pair[start:end]].tolist())

    def display_name(self, key: str) -> str:
        """The spelling of ``key`` used most often by its own mentions and its relations'
        (a tie goes to the smallest string), for all keys at once on first use."""
        if self._display_names is None:
            self._display_names = self._majority_names()
        return self.names.strings[self._display_names[self.keys.code(key)]]

    def _majority_names(self) -> np.ndarray:
        """Per key code, the code of its most used spelling (names codes sort like the names)."""
        keys = np.concatenate([self.e_key, self.p_a[self.r_pair], self.p_b[self.r_pair]]).astype(np.int64)
        names = np.concatenate([self.e_name.codes, self.r_name_a.codes, self.r_name_b.codes]).astype(np.int64)
        spellings, counts = np.unique(keys * max(1, len(self.names)) + names, return_counts=True)
        key_of, name_of = np.divmod(spellings, max(1, len(self.names)))
        order = np.lexsort((name_of, -counts, key_of))  # per key: most used first, then the smallest name
        first = np.flatnonzero(np.diff(key_of[order], prepend=-1) != 0)
        result = np.zeros(len(self.keys), dtype=np.int64)
        result[key_of[order][first]] = name_of[order][first]
        return result

    def entity_chunk_ids(self, key: str) -> list[str]:
        """The chunks that said something about ``key`` (in chunk order)."""
        code = self.keys.code(key)
        if code is None:
            return []
        strings = self.chunks.strings
        return [strings[c] for c in np.unique(self.e_chunk[self.e_start[code]:self.e_start[code + 1]])]

    def pairs(self) -> Iterator[Pair]:
        strings = self.keys.strings
        return ((strings[a], strings[b]) for a, b in zip(self.p_a.tolist(), self.p_b.tolist()))

    def entity_keys_of_chunks(self, chunk_ids: Iterable[str]) -> dict[str, list[str]]:
        """Per chunk id, the keys (owned or not) of the entities it mentions."""
        if self._chunk_keys is None:
            entries = np.unique(np.stack([self.e_chunk.astype(np.int64), self.e_key.astype(np.int64)], axis=1), axis=0) \
                if len(self.e_key) else np.zeros((0, 2), dtype=np.int64)
            self._chunk_keys = (_runs(entries[:, 0], len(self.chunks)), entries[:, 1])
        starts, keys = self._chunk_keys
        strings = self.keys.strings
        found = {}
        for chunk in chunk_ids:
            code = self.chunks.code(chunk)
            if code is not None and starts[code] < starts[code + 1]:
                found[chunk] = [strings[k] for k in keys[starts[code]:starts[code + 1]]]
        return found

    def rows_of_chunks(self, chunk_ids: Iterable[str]) -> tuple[list[str], list[Pair]]:
        """The keys and pairs with a mention from one of ``chunk_ids``."""
        codes = [c for c in (self.chunks.code(chunk) for chunk in chunk_ids) if c is not None]
        if not codes:
            return [], []
        strings = self.keys.strings
        keys = np.unique(self.e_key[np.isin(self.e_chunk, codes)])
        pairs = np.unique(self.r_pair[np.isin(self.r_chunk, codes)])
        return [strings[k] for k in keys], [self.pair_keys(int(p)) for p in pairs]

    # ---- whole tables --------------------------------------------------------------------------
    def entity_arrow(self, without: Iterable[str] = ()) -> pa.Table:
        """ENTITY_SCHEMA rows, leaving out the keys ``without``."""
        keep = self._keep(self.e_key, without)
        rows = np.flatnonzero(keep)
        return pa.table({
            "key": self.keys.values.take(pa.array(self.e_key[rows])),
            "chunk_id": self.chunks.values.take(pa.array(self.e_chunk[rows])),
            "type": self.e_type.dictionary.values.take(pa.array(self.e_type.codes[rows])),
            "description": self.e_description.take(pa.array(rows)),
            "file_path": self.e_file.dictionary.values.take(pa.array(self.e_file.codes[rows])),
            "name": self.e_name.dictionary.values.take(pa.array(self.e_name.codes[rows])),
        }, schema=ENTITY_SCHEMA)

    def relation_arrow(self, without: Iterable[Pair] = ()) -> pa.Table:
        """RELATION_SCHEMA rows, leaving out the pairs ``without``."""
        gone = [n for n in (self.pair_number(a, b) for a, b in without) if n is not None]
        rows = np.flatnonzero(~np.isin(self.r_pair, gone)) if gone else np.arange(len(self.r_chunk))
        pairs = self.r_pair[rows]
        return pa.table({
            "key_a": self.keys.values.take(pa.array(self.p_a[pairs])),
            "key_b": self.keys.values.take(pa.array(self.p_b[pairs])),
            "chunk_id": self.chunks.values.take(pa.array(self.r_chunk[rows])),
            "keywords": self.r_keywords.take(pa.array(rows)),
            "description": self.r_description.take(pa.array(rows)),
            "weight": pa.array(self.r_weight[rows], pa.float64()),
            "file_path": self.r_file.dictionary.values.take(pa.array(self.r_file.codes[rows])),
            "name_a": self.r_name_a.dictionary.values.take(pa.array(self.r_name_a.codes[rows])),
            "name_b": self.r_name_b.dictionary.values.take(pa.array(self.r_name_b.codes[rows])),
        }, schema=RELATION_SCHEMA)

    def _keep(self, key_codes: np.ndarray, without: Iterable[str]) -> np.ndarray:
        gone = [c for c in (self.keys.code(k) for k in without) if c is not None]
        return ~np.isin(key_codes, gone) if gone else np.ones(len(key_codes), dtype=bool)


def _sorted_entries(said: Mentions) -> Mentions:
    """Each chunk's mentions in the order the merge rules keep them (sorted)."""
    for mentions in said.values():
        if len(mentions) > 1:
            mentions.sort()
    return said
