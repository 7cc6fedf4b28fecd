"""Milvus vector store: three collections (entities, relations, chunks).

A local path means Milvus Lite, which one process at a time may open, so the pipeline
gives it to exactly one actor (storage.vector_owner); an ``http(s)://`` URI is a Milvus
server any process may use.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lightrag_ray.config import Settings
from lightrag_ray.storage.vector_contract import Rows, VectorStore, Vectors

KINDS = ("entities", "relations", "chunks")
LOG = logging.getLogger(__name__)
TEXT_FIELD, SPARSE_FIELD = "text", "sparse"  # a row's text (a passage's own; an item's embedded text) and its BM25 terms
TEXT_SUFFIX = "_bm25"  # the collection name of a kind with its BM25 field
MAX_TEXT_BYTES = 65_535  # Milvus's largest VARCHAR
# Milvus analyzers (Milvus Lite has the standard and jieba tokenizers, no stemmers).
TEXT_ANALYZERS: dict[str, dict[str, Any]] = {"standard": {"tokenizer": "standard", "filter": ["lowercase"]},
                                             "jieba": {"tokenizer": "jieba"}}
COLLECTION_NOT_FOUND = 100  # Milvus's error code
UPGRADE_BATCH = 1000  # rows read and written at a time by add_text_search
LITE_INDEX = {"index_type": "AUTOINDEX", "metric_type": "COSINE"}  # Milvus Lite: faiss HNSW
_NOTICES: set[str] = set()
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


def bm25_text(text: str) -> str:
    """``text`` cut to what the BM25 text field holds (MAX_TEXT_BYTES of UTF-8)."""
    data = text.encode("utf-8")
    return text if len(data) <= MAX_TEXT_BYTES else data[:MAX_TEXT_BYTES].decode("utf-8", errors="ignore")


def _hits(results: Any) -> list[Rows]:
    """A Milvus search's answer as rows of id, score and the fields asked, best first (a BM25
    score is reported positive: Milvus Lite gives its negation as the distance)."""
    return [[{"id": h["id"], "score": abs(float(h["distance"])), **h.get("entity", {})} for h in hits] for hits in results]


def has_bm25(server_version: str) -> bool:
    """Whether a Milvus of this version (``get_server_version``) does BM25 full-text search:
    Milvus 2.5 on, and the Milvus Lite builds this package installs (``milvus_lite-3.x``)."""
    found = re.match(r"v?(\d+)\.(\d+)", server_version)
    return server_version.startswith("milvus_lite") or found is None or (int(found[1]), int(found[2])) >= (2, 5)


def _no_bm25_notice(where: str, version: str) -> None:
    """Say once per process and collection set that this Milvus has no BM25: retrieval is dense only."""
    if where not in _NOTICES:
        _NOTICES.add(where)
        LOG.warning("the Milvus server of %s (%s) does not do BM25 text search (it needs Milvus 2.5 or later): "
                    "retrieval uses dense vectors only", where, version)


def graph_vector_items(changes: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Texts to embed (kind, id, text, meta JSON) for changed entities and relations."""
    entities = [
        {"kind": "entities", "id": e["id"], "text": entity_text(e),
         "meta": json.dumps({"name": e["name"], "key": e["key"], "type": e["type"], TEXT_FIELD: bm25_text(entity_text(e))})}
        for e in changes["entities"]
    ]
    relations = [
        {"kind": "relations", "id": r["id"], "text": relation_text(r),
         "meta": json.dumps({**{k: r[k] for k in RELATION_META}, TEXT_FIELD: bm25_text(relation_text(r))})}
        for r in changes["relations"]
    ]
    return entities + relations


def entity_text(entity: dict[str, Any]) -> str:
    """What an entity's vector is embedded from and its BM25 text: name and description."""
    return f"{entity['name']}\n{entity['description']}"


def relation_text(relation: dict[str, Any]) -> str:
    """What a relation's vector is embedded from and its BM25 text: keywords, ends, description."""
    return f"{relation['keywords']}\t{relation['source']}\t{relation['target']}\n{relation['description']}"


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


def add_text_search(writer: VectorStore, export: Callable[[], dict[str, list[Any]]]) -> dict[str, int]:
    """Give every collection of ``writer`` that lacks it BM25 text search (VectorStore.add_text_search),
    entities and relations with the texts their vectors were embedded from (``export``: the whole
    graph, read only when one of theirs needs it); no vector is recomputed, no LLM called.
    Returns the rows copied per kind upgraded (none on a server without BM25)."""
    missing = [kind for kind in KINDS if kind not in writer.text_kinds()]
    graph_kinds = {"entities", "relations"} & set(missing)
    texts = {item["id"]: item["text"] for item in graph_vector_items(export())} if graph_kinds else {}
    copied = {kind: writer.add_text_search(kind, texts) for kind in missing}
    return {kind: rows for kind, rows in copied.items() if rows}


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
    return MilvusStore(settings.milvus_uri(), dim, vec.collection_prefix, vec.token, vec.db_name, analyzer=vec.text_analyzer)


class MilvusStore:
    """The VectorStore of Milvus Lite or a Milvus server, with deterministic string ids.

    A kind's collection also answers BM25 text searches when it carries the ``text`` field with
    an analyzer and its BM25 ``sparse`` field (``{prefix}_{kind}_bm25``); collections made
    before that (``{prefix}_{kind}``) or on a server without BM25 (before 2.5) are dense only
    until ``add_text_search`` copies them into the new form."""

    def __init__(self, uri: str, dim: int, prefix: str = "lightrag", token: str = "", db_name: str = "default",
                 searchable: bool = True, analyzer: str = "standard"):
        """``searchable=False``: a writer that only upserts and deletes; the collections are not
        loaded, so Milvus Lite does not read the vector indexes into memory (at 0.5M vectors
        ~0.6 s of CPU and ~850 MB that an indexing run never searches). ``analyzer``: how new
        collections split texts into words (TEXT_ANALYZERS)."""
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
        self.uri = uri
        self.dim = dim
        self.searchable = searchable
        self.analyzer = analyzer
        self.prefix = prefix
        self.names: dict[str, str] = {}
        self.lexical: set[str] = set()  # the kinds whose collection answers text searches
        for kind in KINDS:
            self.names[kind] = self._open_collection(kind)

    def _open_collection(self, kind: str) -> str:
        """The name of ``kind``'s collection, created when there is none (with BM25 where the
        server has it). When both forms exist an upgrade was cut short: the dense-only one,
        which it copies from, is the one read."""
        dense_only, with_text = f"{self.prefix}_{kind}", f"{self.prefix}_{kind}{TEXT_SUFFIX}"
        if self.client.has_collection(dense_only):
            self._check(dense_only)
            return dense_only
        if not self.client.has_collection(with_text):
            version = self.client.get_server_version()
            if not has_bm25(version):
                _no_bm25_notice(f"{self.uri} {self.prefix}_*", version)
                self._create(dense_only, text=False)
                self._check(dense_only)
                return dense_only
            self._create(with_text, text=True)
        return self._opened_with_text(kind, with_text)

    def _opened_with_text(self, kind: str, name: str) -> str:
        self._check(name)
        self.lexical.add(kind)
        return name

    def _check(self, name: str) -> None:
        """Refuse a collection of another dimension; wait for a new server collection's index;
        load it when searchable."""
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

    def _create(self, name: str, text: bool) -> None:
        """A collection of ``id``, ``vector`` and dynamic fields; ``text``: with the BM25 text field.
        On a server another process may have just created it: that one is used."""
        from pymilvus import DataType, Function, FunctionType, MilvusException

        schema = self.client.create_schema(auto_id=False, enable_dynamic_field=True)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=self.dim)
        index = self.client.prepare_index_params()
        index.add_index("vector", **(LITE_INDEX if self.lite else SERVER_INDEX))
        if text:
            schema.add_field(TEXT_FIELD, DataType.VARCHAR, max_length=MAX_TEXT_BYTES, enable_analyzer=True,
                             analyzer_params=TEXT_ANALYZERS[self.analyzer])
            schema.add_field(SPARSE_FIELD, DataType.SPARSE_FLOAT_VECTOR)
            schema.add_function(Function(name="bm25", function_type=FunctionType.BM25,
                                         input_field_names=[TEXT_FIELD], output_field_names=[SPARSE_FIELD]))
            index.add_index(SPARSE_FIELD, index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
        try:
            self.client.create_collection(name, schema=schema, index_params=index)  # also loads it
        except MilvusException:
            if self.lite or not self.client.has_collection(name):
                raise

    def text_kinds(self) -> list[str]:
        """The kinds whose collection answers ``text_search`` (on a server, also those another
        process upgraded since this store opened)."""
        for kind in set(KINDS) - self.lexical:
            with_text = f"{self.prefix}_{kind}{TEXT_SUFFIX}"
            if not self.lite and self.client.has_collection(with_text) and not self.client.has_collection(self.names[kind]):
                self.names[kind] = self._opened_with_text(kind, with_text)
        return sorted(self.lexical)

    def _on(self, kind: str, call: Callable[[str], Any]) -> Any:
        """``call`` on ``kind``'s collection; once more on the one that replaced it when another
        process gave it text search meanwhile (the old collection is then gone)."""
        from pymilvus import MilvusException

        try:
            return call(self.names[kind])
        except MilvusException as exc:
            if getattr(exc, "code", None) != COLLECTION_NOT_FOUND:
                raise
            self.names[kind] = self._open_collection(kind)
            return call(self.names[kind])

    def add_text_search(self, kind: str, texts: dict[str, str]) -> int:
        """Copy ``kind``'s dense-only collection into one that also answers BM25 searches, each
        row with its text (``texts`` by id, else the row's own ``text``), then drop the old one;
        no vector is recomputed. Returns the rows copied (0: nothing to do, or a server without
        BM25, which keeps its dense collection)."""
        version = self.client.get_server_version()
        if kind in self.lexical or not has_bm25(version):
            return 0
        dense_only, with_text = self.names[kind], f"{self.prefix}_{kind}{TEXT_SUFFIX}"
        if self.client.has_collection(with_text):  # left by an upgrade that was cut short: start again
            self.client.drop_collection(with_text)
        self._create(with_text, text=True)
        self.client.load_collection(dense_only)  # a writer's (searchable=False) is not loaded: it is read here
        copied = 0
        iterator = self.client.query_iterator(dense_only, batch_size=UPGRADE_BATCH, filter="", output_fields=["*", "vector"])
        try:
            while batch := iterator.next():
                for row in batch:
                    row[TEXT_FIELD] = bm25_text(texts.get(row["id"], row.get(TEXT_FIELD, "")))
                self.client.insert(with_text, batch)
                copied += len(batch)
        finally:
            iterator.close()
        self.client.flush(with_text)
        self.client.drop_collection(dense_only)
        self.names[kind] = self._opened_with_text(kind, with_text)
        return copied

    def upsert(self, kind: str, rows: list[dict[str, Any]]) -> int:
        """Insert or replace rows (each with ``id``, ``vector`` and scalar fields)."""
        if not rows:
            return 0
        for row in rows:
            if isinstance(row["vector"], np.ndarray):
                row["vector"] = row["vector"].astype(np.float32).tolist()
            row.pop(SPARSE_FIELD, None)  # computed by Milvus from the text (a row read back may carry it)
            row[TEXT_FIELD] = bm25_text(row.get(TEXT_FIELD) or "")
        self._on(kind, lambda name: self.client.upsert(name, rows))
        return len(rows)

    def delete(self, kind: str, ids: list[str]) -> None:
        if ids:
            self._on(kind, lambda name: self.client.delete(name, ids=list(ids)))

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
        results = self._on(kind, lambda name: self.client.search(
            name, data=data, limit=top_k, filter="" if version is None else visible_at(version),
            output_fields=self._fields(output_fields), anns_field="vector",
            search_params={"params": {"ef": max(SEARCH_EF, top_k)}},
        ))
        return _hits(results)

    def text_search(self, kind: str, texts: list[str], top_k: int, output_fields: list[str] | None = None,
                    version: int | None = None) -> list[Rows]:
        """For each text, the BM25 hits (VectorStore.text_search); none from a dense-only collection."""
        if kind not in self.lexical:
            return [[] for _ in texts]
        results = self._on(kind, lambda name: self.client.search(
            name, data=[bm25_text(t) for t in texts], limit=top_k, anns_field=SPARSE_FIELD,
            filter="" if version is None else visible_at(version), output_fields=self._fields(output_fields),
            search_params={"metric_type": "BM25"},
        ))
        return _hits(results)

    @staticmethod
    def _fields(output_fields: list[str] | None) -> list[str]:
        return output_fields or ["*"]

    def get(self, kind: str, ids: list[str], output_fields: list[str] | None = None) -> list[dict[str, Any]]:
        """Stored rows by id (without vectors unless asked), in no particular order."""
        if not ids:
            return []
        return list(self._on(kind, lambda name: self.client.get(name, ids=list(ids), output_fields=self._fields(output_fields))))

    def count(self, kind: str) -> int:
        return int(self._on(kind, lambda name: self.client.query(name, filter="", output_fields=["count(*)"]))[0]["count(*)"])

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
