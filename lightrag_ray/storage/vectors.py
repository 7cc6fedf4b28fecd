"""Milvus vector store: three collections (entities, relations, chunks).

A local path means Milvus Lite, which one process at a time may open, so the pipeline
gives it to exactly one actor (storage.vector_owner); an ``http(s)://`` URI is a Milvus
server any process may use.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lightrag_ray.config import Settings
from lightrag_ray.storage.vector_contract import Rows, VectorStore, Vectors

KINDS = ("entities", "relations", "chunks")
RELATION_META = ("source", "target", "source_key", "target_key", "keywords")
# Open MilvusStores per Milvus Lite file in this process (they share one in-process server).
_LITE_OPEN: Counter[str] = Counter()
# HNSW search breadth (ef), at least top_k. Milvus Lite's AUTOINDEX is faiss HNSW; its default
# ef=64 barely exceeds top_k=40 and misses ~3% of the true top 40, sometimes the exact-name entity.
SEARCH_EF = 256
# pymilvus pings an idle channel every 10 s; gRPC servers on default settings (milvus-lite's
# server among them) allow one ping per 5 minutes without calls and answer the third with
# GOAWAY "too many pings", which kills a connection left idle for ~30 s. Ping only during calls.
SERVER_GRPC_OPTIONS = {"grpc.keepalive_permit_without_calls": False}
# The index of each new collection on a Milvus server (Milvus Lite builds its AUTOINDEX).
SERVER_INDEX = {"index_type": "HNSW", "metric_type": "COSINE", "params": {"M": 16, "efConstruction": 200}}
# Milvus Lite searches a collection in Python, linearly in its size (one top-40 query, dim
# 384, on 2 cores: ~15-30 ms at 10k vectors, ~50-100 ms at 50k, ~175 ms at 200k; a Milvus
# server with HNSW: ~8 ms at 200k). Past this many vectors in a collection, use a server.
LITE_COMFORTABLE_VECTORS = 50_000
RETIRE_BATCH = 1024  # rows read back (with their vectors) and marked at a time by retire_vectors
NEVER = 2**53  # the ``until`` of a row retired by a job that was undone: seen at every later version


def graph_vector_items(changes: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Texts to embed (kind, id, text, meta JSON) for changed entities and relations."""
    entities = [
        {"kind": "entities", "id": e["id"], "text": f"{e['name']}\n{e['description']}",
         "meta": json.dumps({"name": e["name"], "key": e["key"], "type": e["type"]})}
        for e in changes["entities"]
    ]
    relations = [
        {"kind": "relations", "id": r["id"], "text": f"{r['keywords']}\t{r['source']}\t{r['target']}\n{r['description']}",
         "meta": json.dumps({k: r[k] for k in RELATION_META})}
        for r in changes["relations"]
    ]
    return entities + relations


def chunk_vector_item(row: dict[str, Any], since: int | None = None) -> dict[str, Any]:
    """The text to embed (kind, id, text, meta JSON) for one chunk row; ``since``: the graph
    version from which readers see it (None: at every version)."""
    meta = {"doc_id": row["doc_id"], "file_path": row["file_path"], "order": int(row["order"]), "text": row["text"]}
    if "text_tokens" in row:  # chunk rows written before it was counted have none
        meta["text_tokens"] = int(row["text_tokens"])
    if since is not None:
        meta["since"] = since
    return {"kind": "chunks", "id": row["chunk_id"], "text": row["text"], "meta": json.dumps(meta)}


def visible_at(version: int) -> str:
    """The Milvus filter of the rows a reader of graph ``version`` sees: written by a job
    published by then (``since``) and not retired by one (``until``). Rows without the fields
    (entities, relations, older chunks) are seen at every version; the ``exists`` form is the
    one both Milvus Lite and a 2.3 server evaluate so (a missing field compares as null)."""
    return (f"(since <= {version} or not (exists since)) and "
            f"(until > {version} or not (exists until))")


def retire_vectors(writer: VectorStore, kind: str, ids: list[str], version: int | None) -> int:
    """Mark the rows ``ids`` as gone from graph ``version`` on (``until``): readers of an older
    version still find them until the writer deletes them, once ``version`` is published
    (None: never, a job undone; an upsert without the field would keep Milvus Lite's old value).
    Returns the rows marked."""
    until = NEVER if version is None else version
    marked = 0
    for start in range(0, len(ids), RETIRE_BATCH):
        found = writer.get(kind, ids[start : start + RETIRE_BATCH], ["*", "vector"])
        marked += writer.upsert(kind, [{**row, "until": until} for row in found])
    return marked


def vector_rows(items: list[dict[str, Any]], vectors: list[Any]) -> dict[str, list[dict[str, Any]]]:
    """Milvus rows per collection from embedded items (id, vector and the meta fields)."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for item, vector in zip(items, vectors):
        rows.setdefault(item["kind"], []).append({"id": item["id"], "vector": vector, **json.loads(item["meta"])})
    return rows


def delete_graph_vectors(writer: VectorStore, removed_ids: list[str]) -> None:
    """Delete vectors of removed entities (ent-*) and relations (rel-*)."""
    for kind, prefix in (("entities", "ent-"), ("relations", "rel-")):
        writer.delete(kind, [i for i in removed_ids if i.startswith(prefix)])


def write_graph_changes(writer: VectorStore, embed: Callable[[list[str]], Any], changes: dict[str, list[Any]]) -> None:
    """Bring the vectors in line with a graph change feed (GraphRouter.take_changes): changed
    entities and relations re-embedded with ``embed``; the removed ones are the caller's to
    delete (``delete_graph_vectors``, once its job is published: readers still find them)."""
    items = graph_vector_items(changes)
    if items:
        for kind, rows in vector_rows(items, list(embed([item["text"] for item in items]))).items():
            writer.upsert(kind, rows)


def is_server_uri(uri: str) -> bool:
    return uri.startswith(("http://", "https://", "tcp://", "grpc://"))


def lite_file_in_use(uri: str) -> bool:
    """Whether another process holds the Milvus Lite file ``uri`` open (its LOCK file is
    flocked by the owner, e.g. a running server); False for a server URI."""
    lock = Path(uri) / "LOCK"
    if is_server_uri(uri) or not lock.exists() or _LITE_OPEN[os.path.abspath(uri)]:
        return False
    import fcntl

    with lock.open("rb") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def open_store(settings: Settings, dim: int) -> "MilvusStore":
    """The MilvusStore of the settings' ``vectors.uri`` (Milvus Lite in the workspace by default)."""
    vec = settings.vectors
    return MilvusStore(settings.milvus_uri(), dim, vec.collection_prefix, vec.token, vec.db_name)


class MilvusStore:
    """The VectorStore of Milvus Lite or a Milvus server, with deterministic string ids."""

    def __init__(self, uri: str, dim: int, prefix: str = "lightrag", token: str = "", db_name: str = "default",
                 searchable: bool = True):
        """``searchable=False``: a writer that only upserts and deletes; the collections are not
        loaded, so Milvus Lite does not read the vector indexes into memory (at 0.5M vectors
        ~0.6 s of CPU and ~850 MB that an indexing run never searches)."""
        from pymilvus import MilvusClient

        self._lite_path: str | None = None
        self.lite = not is_server_uri(uri)
        if self.lite:
            Path(uri).parent.mkdir(parents=True, exist_ok=True)
            self.client = MilvusClient(uri)
            self._lite_path = os.path.abspath(uri)
            _LITE_OPEN[self._lite_path] += 1
        else:
            self.client = MilvusClient(uri=uri, token=token, db_name=db_name, grpc_options=SERVER_GRPC_OPTIONS)
        self.dim = dim
        self.searchable = searchable
        self.names = {kind: f"{prefix}_{kind}" for kind in KINDS}
        for name in self.names.values():
            self._ensure(name)

    def _ensure(self, name: str) -> None:
        from pymilvus import MilvusException

        if not self.client.has_collection(name):
            try:
                self._create(name)
                return
            except MilvusException:  # on a server, another process may have just created it: use that one
                if self.lite or not self.client.has_collection(name):
                    raise
        fields = self.client.describe_collection(name)["fields"]
        dim = next(int(f["params"]["dim"]) for f in fields if f["name"] == "vector")
        if dim != self.dim:
            raise ValueError(
                f"Milvus collection {name} holds {dim}-dimensional vectors but the embedding "
                f"model gives {self.dim}; use the model the workspace was built with or a new workspace"
            )
        deadline = time.monotonic() + 60  # a collection created a moment ago may not have its index yet
        while not self.lite and not self.client.list_indexes(name) and time.monotonic() < deadline:
            time.sleep(0.2)
        if self.searchable:
            self.client.load_collection(name)

    def _create(self, name: str) -> None:
        if self.lite:
            self.client.create_collection(
                name, dimension=self.dim, primary_field_name="id", id_type="string", max_length=64,
                vector_field_name="vector", metric_type="COSINE", auto_id=False, enable_dynamic_field=True,
            )
            return
        from pymilvus import DataType

        schema = self.client.create_schema(auto_id=False, enable_dynamic_field=True)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=self.dim)
        index = self.client.prepare_index_params()
        index.add_index("vector", **SERVER_INDEX)
        self.client.create_collection(name, schema=schema, index_params=index)  # also loads it

    def upsert(self, kind: str, rows: list[dict[str, Any]]) -> int:
        """Insert or replace rows (each with ``id``, ``vector`` and scalar fields)."""
        if not rows:
            return 0
        for row in rows:
            if isinstance(row["vector"], np.ndarray):
                row["vector"] = row["vector"].astype(np.float32).tolist()
        self.client.upsert(self.names[kind], rows)
        return len(rows)

    def delete(self, kind: str, ids: list[str]) -> None:
        if ids:
            self.client.delete(self.names[kind], ids=list(ids))

    def flush(self) -> None:
        """Make the rows written so far searchable through the index. Milvus Lite searches
        unflushed rows by brute force beside its indexed segments: upserting 300 rows into a
        collection of 700 made a search ~1.8x slower until a flush. A server seals and indexes
        its growing segments itself (and counts each flush call against a rate limit), so
        only a Lite file is flushed."""
        if self.lite:
            for name in self.names.values():
                self.client.flush(name)

    def search(self, kind: str, vectors: Vectors, top_k: int, output_fields: list[str] | None = None,
               version: int | None = None) -> list[Rows]:
        """For each query vector, hits as dicts with id, score and the requested fields
        (VectorStore.search)."""
        data = np.asarray(vectors, dtype=np.float32).tolist()
        results = self.client.search(
            self.names[kind], data=data, limit=top_k, filter="" if version is None else visible_at(version),
            output_fields=output_fields or ["*"], search_params={"params": {"ef": max(SEARCH_EF, top_k)}},
        )
        return [[{"id": h["id"], "score": float(h["distance"]), **h.get("entity", {})} for h in hits] for hits in results]

    def get(self, kind: str, ids: list[str], output_fields: list[str] | None = None) -> list[dict[str, Any]]:
        """Stored rows by id (without vectors unless asked), in no particular order."""
        if not ids:
            return []
        return list(self.client.get(self.names[kind], ids=list(ids), output_fields=output_fields or ["*"]))

    def count(self, kind: str) -> int:
        return int(self.client.query(self.names[kind], filter="", output_fields=["count(*)"])[0]["count(*)"])

    def close(self) -> None:
        """Close the client; the last store of a Milvus Lite file also stops its in-process
        server, which flushes the inserted rows into indexed segments. Without that the rows
        stay in the write-ahead log when the process is killed (the pipeline's actor is), and
        the next process searches them unindexed: ~50x slower on 10k vectors."""
        self.client.close()
        path, self._lite_path = self._lite_path, None
        if path is None:
            return
        _LITE_OPEN[path] -= 1
        if _LITE_OPEN[path] <= 0:
            del _LITE_OPEN[path]
            try:
                from milvus_lite.server_manager import server_manager_instance
            except ImportError:  # another Lite build: it flushes on its own terms
                return
            server_manager_instance.release_server(path)
