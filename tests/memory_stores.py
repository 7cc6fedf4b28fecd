"""In-memory implementations of the query stores (lightrag_ray.query.stores), for fast
tests of the query engine with no Ray, Milvus or model.

MemoryGraph runs the real merge rules (core.graph.shard_graph.ShardGraph) on several in-process
shards and takes every operation from the graph contract (core.graph.contract), planned and
merged as the Ray reader and writer do, so what the engine sees has the same shape and order
as in a cluster. HashingEmbedder is a
deterministic bag-of-words embedder: texts sharing words are close.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from typing import Any

import numpy as np

from lightrag_ray.core.graph.contract import READ, GraphOperations, Operation, run_in_process
from lightrag_ray.core.graph.shard_graph import ShardGraph
from lightrag_ray.core.records import EntityRecord, RelationRecord
from lightrag_ray.storage.vectors import graph_vector_items, vector_rows

_WORD = re.compile(r"\w+")
BM25_K1, BM25_B = 1.2, 0.75  # Okapi BM25's usual parameters (Milvus's defaults too)


class HashingEmbedder:
    """Words hashed into ``dim`` buckets, L2-normalised (the TextEmbedder protocol)."""

    def __init__(self, dim: int = 512) -> None:
        self.dim = dim

    def embed_now(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                out[row, int(hashlib.md5(word.encode()).hexdigest()[:8], 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)

    async def embed(self, texts: list[str]) -> np.ndarray:
        return self.embed_now(texts)


class MemoryVectorIndex:
    """Exact cosine search over rows kept in numpy, and Okapi BM25 over their ``text`` (the
    VectorIndex protocol)."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, dict[str, Any]]] = {"entities": {}, "relations": {}, "chunks": {}}

    def upsert(self, kind: str, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            self.rows[kind][row["id"]] = {**row, "vector": np.asarray(row["vector"], dtype=np.float32)}

    async def search(self, kind: str, vectors: np.ndarray, top_k: int, output_fields: list[str],
                     version: int | None = None) -> list[list[dict[str, Any]]]:
        rows = [row for row in self.rows[kind].values() if version is None or _visible(row, version)]
        if not rows:
            return [[] for _ in vectors]
        matrix = np.stack([r["vector"] for r in rows])
        results = []
        for vector in np.asarray(vectors, dtype=np.float32):
            scores = matrix @ vector
            best = sorted(range(len(rows)), key=lambda i: (-scores[i], rows[i]["id"]))[:top_k]
            results.append([{**_fields(rows[i], output_fields), "id": rows[i]["id"], "score": float(scores[i])} for i in best])
        return results

    async def text_search(self, kind: str, texts: list[str], top_k: int, output_fields: list[str],
                          version: int | None = None) -> list[list[dict[str, Any]]]:
        rows = [row for row in self.rows[kind].values() if version is None or _visible(row, version)]
        documents = [Counter(_WORD.findall(str(row.get("text", "")).lower())) for row in rows]
        length = sum(sum(d.values()) for d in documents) / max(len(documents), 1)
        frequency = Counter(word for d in documents for word in d)
        results = []
        for text in texts:
            words = set(_WORD.findall(text.lower()))
            scores = [sum(math.log(1 + (len(rows) - frequency[w] + 0.5) / (frequency[w] + 0.5))
                          * d[w] * (BM25_K1 + 1) / (d[w] + BM25_K1 * (1 - BM25_B + BM25_B * sum(d.values()) / length))
                          for w in words if d[w]) for d in documents]
            best = sorted((i for i in range(len(rows)) if scores[i] > 0), key=lambda i: (-scores[i], rows[i]["id"]))[:top_k]
            results.append([{**_fields(rows[i], output_fields), "id": rows[i]["id"], "score": scores[i]} for i in best])
        return results

    async def text_kinds(self) -> list[str]:
        return sorted(self.rows)

    async def get(self, kind: str, ids: list[str], output_fields: list[str]) -> list[dict[str, Any]]:
        return [_fields(self.rows[kind][i], output_fields) for i in ids if i in self.rows[kind]]


class MemoryGraph(GraphOperations):
    """Shards of the knowledge graph in this process: the graph contract's READ operations
    awaited (as the query engine uses a ShardReader), the others blocking (the writer's, as
    indexing uses them)."""

    def __init__(self, num_shards: int = 2, max_source_ids: int = 300) -> None:
        self.num_shards = num_shards
        self.shards = [ShardGraph(i, num_shards, max_source_ids) for i in range(num_shards)]
        self.calls: list[tuple[str, int]] = []  # (operation, shard) of every read

    def run(self, op: Operation[..., Any], *args: Any) -> Any:
        if op.access is READ:
            return self._read(op, args)
        return run_in_process(op, self.shards, args)

    async def _read(self, op: Operation[..., Any], args: tuple[Any, ...]) -> Any:
        self.calls += [(op.name, i) for i in op.shard_calls(self.num_shards, args)]
        return run_in_process(op, self.shards, args)


def index_in_memory(
    chunks: list[dict[str, Any]], entities: list[EntityRecord], relations: list[RelationRecord],
    embedder: HashingEmbedder, num_shards: int = 2,
) -> tuple[MemoryGraph, MemoryVectorIndex]:
    """Merge the records into a MemoryGraph and embed chunks, entities and relations into a
    MemoryVectorIndex, with the same texts and fields as an indexing run writes to Milvus.
    ``chunks``: rows with chunk_id, doc_id, file_path, order, text."""
    graph, vectors = MemoryGraph(num_shards), MemoryVectorIndex()
    graph.apply(entities, relations)
    items = graph_vector_items(graph.take_changes())
    for kind, rows in vector_rows(items, list(embedder.embed_now([i["text"] for i in items]))).items():
        vectors.upsert(kind, rows)
    chunk_vectors = embedder.embed_now([c["text"] for c in chunks])
    vectors.upsert("chunks", [
        {"id": c["chunk_id"], "vector": v, "doc_id": c["doc_id"], "file_path": c["file_path"],
         "order": c["order"], "text": c["text"]}
        for c, v in zip(chunks, chunk_vectors)
    ])
    return graph, vectors


def _visible(row: dict[str, Any], version: int) -> bool:
    """Whether a reader of graph ``version`` sees ``row`` (storage.vectors.visible_at, in Python)."""
    return row.get("since", version) <= version and row.get("until", version + 1) > version


def _fields(row: dict[str, Any], fields: list[str]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "vector" and (not fields or "*" in fields or k in fields)}
