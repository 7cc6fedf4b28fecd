"""Scale benchmark: synthetic extraction records merged into the graph shards at growing size
(method and figures: docs/benchmarks.md, "Graph scale").

On its own local Ray cluster: 1. **merge** seeded Zipf-like records of ``--mentions`` mentions
into ``--shards`` fresh shards (merge time, snapshot, reload, shard RSS); 2. **add** a
``--doc-chunks`` document to the largest graph, cold then warm (non-LLM time, the scripted LLM at
zero latency), and on an empty workspace for the fixed cost; 3. **query**: context-only
``retrieve()`` latency per mode. ``--store lite|server`` (or both, compared) holds the vectors.

    .venv/bin/python scripts/bench_scale.py --workdir /tmp/bench_scale_out/work \
        --json-out /tmp/bench_scale_out/bench_scale.json --plot /tmp/bench_scale_out/bench_scale.png
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import string
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from bench_kit import (ROOT, command_line, logger, machine, markdown, offline, percentiles_ms, pyplot, save_plot,
                       start_ray, stop_ray, write_json)

offline()
import ray  # noqa: E402

from lightrag_ray.config import ChunkingConfig, ExtractionConfig, GraphConfig, Settings, load_settings  # noqa: E402
from lightrag_ray.core.ids import chunk_id, entity_id  # noqa: E402
from lightrag_ray.core.names import entity_key  # noqa: E402
from lightrag_ray.core.records import EntityRecord, RelationRecord  # noqa: E402
from lightrag_ray.query.params import RETRIEVAL_MODES  # noqa: E402
from lightrag_ray.core.tokenizer import count_tokens, get_encoding  # noqa: E402
from lightrag_ray.index.embedding_pool import EmbeddingPool  # noqa: E402
from lightrag_ray.index.pipeline import IndexRun  # noqa: E402
from lightrag_ray.index.stages.aliases import link_aliases  # noqa: E402
from lightrag_ray.service.indexing import WriterOnDemand, index_paths  # noqa: E402
from lightrag_ray.service.opening import OpenWorkspace, with_shards  # noqa: E402
from lightrag_ray.service.reshard import reshard_workspace  # noqa: E402
from lightrag_ray.models.embedding import make_embedder  # noqa: E402
from lightrag_ray.query.engine import QueryParam  # noqa: E402
from lightrag_ray.service.session import LocalSession  # noqa: E402
from lightrag_ray.storage import manifest as manifests  # noqa: E402
from lightrag_ray.storage.graph.writer import GraphRouter  # noqa: E402
from lightrag_ray.storage.vectors import (  # noqa: E402
    MilvusStore,
    graph_vector_items,
    open_store,
    vector_rows,
)
from lightrag_ray.storage.vector_owner import open_vector_sink  # noqa: E402
from lightrag_ray.storage.workspace import Workspace  # noqa: E402
from tests.milvus_standalone import MilvusStandalone  # noqa: E402
from tests.scripted_llm import ScriptedLLM, derive_records  # noqa: E402

BOOK = ROOT.parent / "shared" / "data" / "christmas_carol" / "mock_data.txt"
MODES = ("naive", "local", "global", "hybrid", "mix", "walk")  # RETRIEVAL_MODES, in the order of the tables
assert set(MODES) == set(RETRIEVAL_MODES)
STORES = {"lite": "Milvus Lite", "server": "Milvus server (2.3 standalone, HNSW)"}
ID_KINDS = ("entities", "relations", "chunks")  # of a retrieved context, compared between stores
# Two hits whose cosine similarities to the query differ by less than this are a tie: float32
# HNSW distances and the graph's summed scores do not order them reliably.
TIE_COSINE = 0.005
CHUNK_MENTIONS = (20, 40)  # mentions per synthetic chunk (inclusive)
DESCRIPTION_WORDS = (30, 60)
CHUNKS_PER_DOC = 10
CHUNK_CHARS = 5000  # synthetic chunk text, ~1200 tokens
SUMMARY_CHARS = 1200  # synthetic summary, ~250 tokens
UPSERT_ROWS = 5000
SYNTHETIC_RANK, SYNTHETIC_NOISE = 32, 0.2  # principal directions of the synthetic vectors; share of the residual noise
ADD_TARGET_S, QUERY_TARGET_MS, QUERY_P95_TARGET_MS = 5.0, 100.0, 250.0  # issues 5 and 10 (add: warm)
COLD_ADD_TARGET_S = 15.0  # issue 12: the CLI adds a document in < 15 s
COLD, WARM = "cold (CLI)", "warm (Serve app)"  # how an add row's run found its shards, embedder and vector writer
log = logger("bench_scale")
LEXICAL_WEIGHTS = (0.0, 1.0)  # vectors only, BM25 fused (--lexical-repeats)


# ---- synthetic records -------------------------------------------------------------------
def zipf(n: int, skew: float) -> np.ndarray:
    """Probabilities of ranks 0..n-1, proportional to 1 / (rank + 1)^skew."""
    weights = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** skew
    return weights / weights.sum()


def name_pool(size: int, known: list[str], seed: int, skew: float) -> list[str]:
    """``size`` names with distinct entity keys, most popular first: ``known`` names at
    Zipf-drawn ranks, invented two-word names (``Bako Rive``) everywhere else."""
    rng = np.random.default_rng([seed, 1])
    known = list({entity_key(n): n for n in known}.values())[:size]
    syllables = [c + v for c in "bdfghklmnprstvz" for v in "aeiou"]
    words = [a + b for a in syllables for b in syllables]
    taken = {entity_key(n) for n in known}
    codes = rng.choice(len(words) ** 2, size + len(known), replace=False)
    invented = (f"{words[c // len(words)].capitalize()} {words[c % len(words)].capitalize()}" for c in codes)
    fill = iter([n for n in invented if entity_key(n) not in taken][: size - len(known)])
    ranks = set(rng.choice(size, len(known), replace=False, p=zipf(size, skew)).tolist()) if known else set()
    planted = iter(known)
    return [next(planted) if rank in ranks else next(fill) for rank in range(size)]


@dataclass
class Batch:
    """Records of a run of consecutive chunks, and those chunks' Milvus rows (when asked)."""

    entities: list[EntityRecord]
    relations: list[RelationRecord]
    chunks: list[dict[str, Any]]


class Corpus:
    """Word windows of a text and a ranked name pool: the material of every workload."""

    def __init__(self, text: str, pool: int, known: list[str], seed: int, skew: float) -> None:
        words = text.split()
        self.text = " ".join(words)
        self.starts = np.cumsum([0] + [len(w) + 1 for w in words]).tolist()  # char offset of each word
        self.words = len(words)
        vocab = {w.strip(string.punctuation).lower() for w in words}
        self.vocab = sorted(w for w in vocab if w.isalpha() and len(w) > 3)
        self.names = name_pool(pool, known, seed, skew)
        rng = np.random.default_rng([seed, 2])
        types = ExtractionConfig().entity_types
        self.types = [types[i] for i in rng.integers(0, len(types), pool)]
        self.seed, self.skew = seed, skew

    def window(self, start: int, words: int) -> str:
        """``words`` consecutive words of the text from word ``start``."""
        return self.text[self.starts[start] : self.starts[start + words] - 1]


class Workload:
    """M mentions over the ``distinct`` most popular names, cut into chunks, with
    ``relation_ratio`` relation records per mention between names of the same chunk.

    Every random draw happens here (vectorised), so the distinct entities and relations are
    known before any record is built, and ``batches`` only formats records."""

    def __init__(self, corpus: Corpus, mentions: int, distinct: int, relation_ratio: float) -> None:
        self.corpus = corpus
        distinct = max(1, min(distinct, mentions, len(corpus.names)))
        rng = np.random.default_rng([corpus.seed, 3, mentions])
        extra = rng.choice(distinct, mentions - distinct, p=zipf(distinct, corpus.skew))
        self.ids = rng.permutation(np.concatenate([np.arange(distinct), extra]))  # every name at least once
        sizes = rng.integers(CHUNK_MENTIONS[0], CHUNK_MENTIONS[1] + 1, mentions // CHUNK_MENTIONS[0] + 1)
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        self.bounds = np.minimum(bounds[: np.searchsorted(bounds, mentions) + 1], mentions)
        per_chunk = np.diff(self.bounds)
        pairs = np.rint(per_chunk * relation_ratio).astype(np.int64)
        self.pair_bounds = np.concatenate([[0], np.cumsum(pairs)])
        chunk_of = np.repeat(np.arange(len(per_chunk)), pairs)
        m = per_chunk[chunk_of]
        a = rng.integers(0, m)
        b = (a + 1 + rng.integers(0, np.maximum(m - 1, 1))) % m  # another position of the same chunk
        self.pair_a, self.pair_b = self.bounds[chunk_of] + a, self.bounds[chunk_of] + b
        self.mention_words, self.pair_words = self.words_drawn(rng, mentions), self.words_drawn(rng, len(chunk_of))
        self.keywords = rng.integers(0, len(corpus.vocab), (len(chunk_of), 2))
        self.weights = rng.integers(1, 11, len(chunk_of))
        ends_a, ends_b = self.ids[self.pair_a], self.ids[self.pair_b]
        self.valid = ends_a != ends_b  # a name related to itself is dropped, as the router does
        keys = np.minimum(ends_a, ends_b)[self.valid] * distinct + np.maximum(ends_a, ends_b)[self.valid]
        self.distinct_entities = int(np.unique(self.ids).size)
        self.distinct_relations = int(np.unique(keys).size)
        self.mentions = mentions
        self.relation_records = int(self.valid.sum())
        self.chunks = len(per_chunk)
        self.mention_counts = np.bincount(self.ids, minlength=distinct)

    def words_drawn(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """(start word, length) of ``n`` description windows."""
        lengths = rng.integers(DESCRIPTION_WORDS[0], DESCRIPTION_WORDS[1] + 1, n)
        starts = rng.integers(0, self.corpus.words - DESCRIPTION_WORDS[1], n)
        return np.stack([starts, lengths], axis=1)

    def batches(self, batch_chunks: int, with_chunks: bool = False) -> Iterator[Batch]:
        """Records of ``batch_chunks`` chunks at a time (plus the chunks' Milvus rows)."""
        c = self.corpus
        names, types = c.names, c.types
        ids, mention_words, pair_words = self.ids.tolist(), self.mention_words.tolist(), self.pair_words.tolist()
        pair_a, pair_b, valid = self.pair_a.tolist(), self.pair_b.tolist(), self.valid.tolist()
        keywords, weights = self.keywords.tolist(), self.weights.tolist()
        for first in range(0, self.chunks, batch_chunks):
            entities: list[EntityRecord] = []
            relations: list[RelationRecord] = []
            chunks: list[dict[str, Any]] = []
            for chunk in range(first, min(first + batch_chunks, self.chunks)):
                doc, order = divmod(chunk, CHUNKS_PER_DOC)
                doc_id, path = f"doc-synthetic-{doc:07d}", f"synthetic/{doc:07d}.txt"
                cid = chunk_id(doc_id, order, "")
                lo, hi = int(self.bounds[chunk]), int(self.bounds[chunk + 1])
                descriptions = []
                for pos in range(lo, hi):
                    k = ids[pos]
                    start, length = mention_words[pos]
                    descriptions.append(f"{names[k]} {c.window(start, length)}")
                    entities.append(EntityRecord(names[k], types[k], descriptions[-1], cid, path))
                for p in range(int(self.pair_bounds[chunk]), int(self.pair_bounds[chunk + 1])):
                    if not valid[p]:
                        continue
                    source, target = names[ids[pair_a[p]]], names[ids[pair_b[p]]]
                    start, length = pair_words[p]
                    description = f"{source} and {target}: {c.window(start, length)}"
                    relations.append(RelationRecord(source, target, ", ".join(c.vocab[i] for i in keywords[p]),
                                                    description, cid, float(weights[p]), path))
                if with_chunks:
                    text = " ".join(descriptions)[:CHUNK_CHARS].strip()
                    chunks.append({"id": cid, "doc_id": doc_id, "file_path": path, "order": order, "text": text,
                                   "text_tokens": count_tokens(text)})  # as chunking stores it
            yield Batch(entities, relations, chunks)


def distinct_for(mentions: int, sizes: list[int], entities: int) -> int:
    """Distinct names at a size: proportional to the mentions, ``entities`` at the largest."""
    return max(1, round(entities * mentions / max(sizes)))


# ---- Ray-side measurements ---------------------------------------------------------------
def _pid(_actor: Any) -> int:
    return os.getpid()


def shard_rss_mib(router: GraphRouter) -> list[float]:
    """Resident memory of each shard actor's process."""
    import psutil

    pids = ray.get([shard.__ray_call__.remote(_pid) for copies in router.shards for shard in copies])
    return [round(psutil.Process(pid).memory_info().rss / 2**20, 1) for pid in pids]


def folder_mib(path: Path) -> float:
    """Size of the files under ``path``."""
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1)


# ---- 1. merge ------------------------------------------------------------------------------
def merge_run(work: Workload, shards: int, workspace: Path, batch_chunks: int,
              prepare: Callable[[GraphRouter, list[dict[str, Any]]], None] | None = None) -> dict[str, Any]:
    """Merge the workload into fresh shards, snapshot them, start them again from the snapshot.

    ``prepare`` (router, chunk rows) runs after the merge, before the snapshot."""
    config = GraphConfig(num_shards=shards)
    router = GraphRouter(str(workspace), config)
    rss_empty = shard_rss_mib(router)
    merge_s, chunk_rows = 0.0, []
    for batch in work.batches(batch_chunks, with_chunks=prepare is not None):
        start = time.perf_counter()
        router.apply(batch.entities, batch.relations)
        merge_s += time.perf_counter() - start
        chunk_rows += batch.chunks
    counts = router.counts()
    rss_merged = shard_rss_mib(router)
    if prepare is not None:
        prepare(router, chunk_rows)
    start = time.perf_counter()
    router.commit(Workspace(str(workspace)))  # the first commit of a workspace writes a whole base
    save_s = time.perf_counter() - start
    router.close()
    start = time.perf_counter()
    router = GraphRouter(str(workspace), config)
    reloaded = router.counts()  # the first call waits until the shards have loaded
    load_s = time.perf_counter() - start
    rss_loaded = shard_rss_mib(router)
    router.close()
    if reloaded != counts:
        raise RuntimeError(f"snapshot reload changed the graph: {counts} -> {reloaded}")
    return {
        "mentions": work.mentions, "relation_records": work.relation_records, "chunks": work.chunks,
        "shards": shards, "distinct_entities": work.distinct_entities, "distinct_relations": work.distinct_relations,
        "entities": counts["entities"], "relations": counts["relations"], "merge_s": round(merge_s, 2),
        "mentions_per_s": round(work.mentions / merge_s),
        "records_per_s": round((work.mentions + work.relation_records) / merge_s),
        "save_s": round(save_s, 2), "snapshot_mib": folder_mib(workspace / "graph"), "load_s": round(load_s, 2),
        "rss_empty_mib": rss_empty, "rss_merged_mib": rss_merged, "rss_loaded_mib": rss_loaded,
    }


# ---- workspace of the add/query graph -----------------------------------------------------
def synthetic_summary(item: dict[str, Any]) -> str:
    """Stand-in for an LLM summary: the first fragments, ~250 tokens."""
    return f"{item['name']}: " + " ".join(item["fragments"])[:SUMMARY_CHARS]


@dataclass(frozen=True)
class EmbeddingShape:
    """The distribution of real embeddings, fitted on passages of the book: their mean, the
    ``SYNTHETIC_RANK`` leading principal directions with their spreads, and the spread left
    over per dimension."""

    mean: np.ndarray
    directions: np.ndarray  # (rank, dim)
    spreads: np.ndarray  # (rank,)
    residual: float

    @classmethod
    def fit(cls, embedder: Any, text: str, seed: int, passages: int = 400) -> "EmbeddingShape":
        words = text.split()
        rng = np.random.default_rng([seed, 6])
        starts = rng.integers(0, len(words) - DESCRIPTION_WORDS[1], passages)
        sample = [" ".join(words[s : s + int(rng.integers(*DESCRIPTION_WORDS))]) for s in starts]
        real = np.asarray(embedder.embed(sample), dtype=np.float64)
        mean = real.mean(axis=0)
        _, singular, directions = np.linalg.svd(real - mean, full_matrices=False)
        spreads = singular / np.sqrt(len(real) - 1)
        residual = float(np.sqrt((spreads[SYNTHETIC_RANK:] ** 2).sum() / real.shape[1]))
        return cls(mean, directions[:SYNTHETIC_RANK], spreads[:SYNTHETIC_RANK], residual)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` unit vectors (float32) drawn like real passage embeddings.

        Real embeddings share a mean direction and lie near a low-dimensional subspace,
        which is what lets HNSW find the true neighbours (recall@40 ~0.99 measured here);
        i.i.d. random vectors have neither, so every query's top 40 would be near-ties any
        two ANN indexes order differently, and the entity vectors would not compete with
        the real ones the questions look for."""
        coords = rng.standard_normal((n, len(self.spreads))) * self.spreads
        noise = SYNTHETIC_NOISE * self.residual * rng.standard_normal((n, len(self.mean)))
        vectors = (self.mean + coords @ self.directions + noise).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def wait_indexed(store: MilvusStore, timeout_s: float = 3600.0) -> None:
    """Flush a Milvus server's collections and wait until its query node serves every row from
    sealed segments with their HNSW index (the server indexes no segment under 1024 rows)."""
    for name in store.names.values():
        store.client.flush(name)
    deadline = time.monotonic() + timeout_s
    for name in store.names.values():
        while True:
            index = store.client.describe_index(name, "vector")
            segments = store.client.list_loaded_segments(name)
            if (index["pending_index_rows"] == 0 and sum(s.num_rows for s in segments) == index["total_rows"]
                    and all(s.index_name or s.num_rows < 1024 for s in segments)):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"Milvus collection {name} not indexed after {timeout_s:g} s: {index}")
            time.sleep(1)


def vector_parts(items: list[dict[str, Any]], chunk_rows: list[dict[str, Any]], real: dict[str, Any],
                 shape: EmbeddingShape, seed: int) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(kind, rows with their vectors) as every store receives them, ``UPSERT_ROWS`` at a time:
    synthetic unit vectors, the ``real`` ones by id; the same for a seed."""
    rng = np.random.default_rng([seed, 4])
    for start in range(0, len(items), UPSERT_ROWS):
        part = items[start : start + UPSERT_ROWS]
        yield from vector_rows(part, [real.get(item["id"], v) for item, v in zip(part, shape.sample(rng, len(part)))]).items()
    for start in range(0, len(chunk_rows), UPSERT_ROWS):
        rows = chunk_rows[start : start + UPSERT_ROWS]
        yield "chunks", [{**row, "vector": v} for row, v in zip(rows, shape.sample(rng, len(rows)))]


def write_vectors(settings: Settings, parts: Iterator[tuple[str, list[dict[str, Any]]]], dim: int) -> dict[str, float]:
    """Upsert the vectors of ``vector_parts``, flush and index them, reopen; seconds of each."""
    store = open_store(settings, dim)
    clock = time.perf_counter()
    for kind, rows in parts:
        store.upsert(kind, rows)
    upsert_s, clock = time.perf_counter() - clock, time.perf_counter()
    if not store.lite:
        wait_indexed(store)
    store.close()  # Milvus Lite flushes the rows into indexed segments here
    index_s, clock = time.perf_counter() - clock, time.perf_counter()
    open_store(settings, dim).close()
    return {"upsert_s": round(upsert_s, 1), "index_s": round(index_s, 1), "open_s": round(time.perf_counter() - clock, 1)}


class ExactIndex:
    """Brute-force cosine search over the vectors every store received: the reference the
    stores' (approximate, HNSW) searches are measured against."""

    def __init__(self, parts: Iterator[tuple[str, list[dict[str, Any]]]]) -> None:
        ids: dict[str, list[str]] = {}
        vectors: dict[str, list[np.ndarray]] = {}
        for kind, rows in parts:
            ids.setdefault(kind, []).extend(row["id"] for row in rows)
            vectors.setdefault(kind, []).append(np.asarray([row["vector"] for row in rows], dtype=np.float32))
        self.ids = {kind: np.asarray(values) for kind, values in ids.items()}
        self.vectors = {kind: np.concatenate(values) for kind, values in vectors.items()}
        self.row_of = {kind: {i: n for n, i in enumerate(values)} for kind, values in ids.items()}

    def top(self, kind: str, vector: np.ndarray, k: int) -> tuple[list[str], np.ndarray]:
        """The exact top ``k`` ids for ``vector``, best first, and their cosine similarities."""
        scores = self.vectors[kind] @ np.asarray(vector, dtype=np.float32)
        best = np.argpartition(-scores, k)[:k]
        best = best[np.argsort(-scores[best])]
        return self.ids[kind][best].tolist(), scores[best]

    def similarity(self, kind: str, vector: np.ndarray, ids: list[str]) -> np.ndarray:
        """The cosine similarity of ``vector`` to the stored vectors ``ids``."""
        rows = [self.row_of[kind][i] for i in ids]
        return self.vectors[kind][rows] @ np.asarray(vector, dtype=np.float32)


def prepare_workspace(router: GraphRouter, chunk_rows: list[dict[str, Any]], stores: dict[str, Settings],
                      real_vector_names: list[str], seed: int, exact: list[ExactIndex] | None = None) -> dict[str, Any]:
    """Summaries, manifest and Milvus rows of a merged graph, as an indexing run leaves them, with
    the same vectors in every store (settings per store name; the first one's make the manifest);
    appends an ExactIndex of those vectors to ``exact`` if given."""
    settings = next(iter(stores.values()))
    graph = settings.graph
    started = time.perf_counter()
    todo = router.pending_summaries(graph.summary_max_fragments, graph.summary_max_tokens)
    router.add_summaries({item["hash"]: synthetic_summary(item) for item in todo})
    summaries_s = time.perf_counter() - started
    items = graph_vector_items(router.take_changes())
    log(f"prepare: {len(todo)} synthetic summaries in {summaries_s:.1f} s, change feed of {len(items)} entities and "
        f"relations ({time.perf_counter() - started:.1f} s so far)")
    aliases_started = time.perf_counter()
    alias_links = link_aliases(router, everything=True)  # as the run that built the graph left it
    alias_s = round(time.perf_counter() - aliases_started, 1)
    log(f"prepare: alias pass over every entity: {alias_links} link ends in {alias_s} s")
    embedder = make_embedder(settings.embedding)
    wanted = {entity_id(entity_key(name)) for name in real_vector_names}
    named = [item for item in items if item["id"] in wanted]
    # The vector of the name alone: the question's keyword matches it as a good extraction
    # would, so local retrieval expands around the named entities, hubs of 15k mentions
    # included (their "name: description" texts are long and would not stand out).
    real = dict(zip((item["id"] for item in named), embedder.embed([item["text"].split("\n", 1)[0] for item in named])))
    shape = EmbeddingShape.fit(embedder, BOOK.read_text(encoding="utf-8"), seed)
    workspace = Workspace(settings.workspace)  # the manifest created from the settings, as indexing does
    manifests.save(workspace, manifests.open_for_settings(workspace, settings).model_copy(  # merge_run commits
        update={"embedding_dim": embedder.dim, "aliases_linked": True}))
    milvus = {}
    for name, store_settings in stores.items():
        milvus[name] = write_vectors(store_settings, vector_parts(items, chunk_rows, real, shape, seed), embedder.dim)
        log(f"prepare: vectors into {STORES[name]}: {milvus[name]}")
    if exact is not None:
        exact.append(ExactIndex(vector_parts(items, chunk_rows, real, shape, seed)))
    first = next(iter(milvus.values()))
    info = {"summaries": len(todo), "alias_links": alias_links, "alias_s": alias_s,
            "vectors": len(items) + len(chunk_rows), "real_vectors": len(real),
            "milvus_upsert_s": first["upsert_s"], "milvus_close_s": first["index_s"], "milvus_open_s": first["open_s"],
            "milvus": milvus, "prepare_s": round(time.perf_counter() - started, 1)}
    log(f"prepare: {info}")
    return info


@dataclass(frozen=True)
class TeeSink:
    """A vector sink writing to every store of the run (``--store lite server``: the add step
    gives all of them the same vectors)."""

    sinks: tuple[Any, ...]

    def open(self) -> Any:
        return TeeWriter([sink.open() for sink in self.sinks])

    def flush(self) -> None:
        for sink in self.sinks:
            sink.flush()


class TeeWriter:
    def __init__(self, writers: list[Any]) -> None:
        self.writers = writers

    def upsert(self, kind: str, rows: list[dict[str, Any]]) -> int:
        return [writer.upsert(kind, [dict(row) for row in rows]) for writer in self.writers][0]

    def delete(self, kind: str, ids: list[str]) -> None:
        for writer in self.writers:
            writer.delete(kind, ids)

    def close(self) -> None:
        for writer in self.writers:
            writer.close()


def stage_times(report: Any) -> dict[str, float]:
    """One index_paths run split into its steps (the report's ``stage_seconds``)."""
    steps = report.stage_seconds
    return {
        "read_chunk_s": steps.get("read and chunk", 0.0),
        "extract_s": steps.get("embed chunks, extract and merge", 0.0),
        "summaries_s": steps.get("summarise", 0.0),
        "embed_graph_s": steps.get("embed graph", 0.0),
        "aliases_s": steps.get("aliases", 0.0),
        "vectors_s": steps.get("finish vectors", 0.0),  # a Milvus Lite owner of the run's own flushing
        "save_s": steps.get("commit graph", 0.0),
        "finish_s": steps.get("record documents", 0.0),
    }


@dataclass
class Held:
    """What the Serve app holds open across inserts: the workspace opened as its writer (shards
    and vector sink, the run's kept target), embedding workers with the model loaded; seconds
    each took to open."""

    opened: OpenWorkspace
    pool: EmbeddingPool
    writers: list[Any]
    open_s: dict[str, float]

    @classmethod
    def open(cls, settings: Settings, stores: list[Settings]) -> Held:
        """Load the shards, start the embedding workers (model loaded) and open the vector sink."""
        started = time.perf_counter()
        router = GraphRouter(settings.workspace, settings.graph, settings.ray.namespace)
        router.counts()  # loaded
        shards = time.perf_counter()
        pool = EmbeddingPool(settings.embedding)
        writers: list[Any] = []
        try:
            dim = pool.warm_up()
            loaded = time.perf_counter()
            sink, writers = open_sinks(stores, dim)
            writers[0].upsert("chunks", [])  # returns once the store is open (a Milvus Lite owner actor is up)
        except BaseException:
            for writer in writers:
                writer.close()
            pool.close()
            router.close()
            raise
        open_s = {"shards": round(shards - started, 2), "embedding_pool": round(loaded - shards, 2),
                  "vectors": round(time.perf_counter() - loaded, 2)}
        log(f"opened for the warm add (not counted): shards loaded in {open_s['shards']} s, embedding workers "
            f"with the model loaded in {open_s['embedding_pool']} s, vector writer in {open_s['vectors']} s")
        workspace = Workspace(settings.workspace)
        opened = OpenWorkspace(settings, workspace, manifests.load(workspace), router=router, sink=sink)
        return cls(opened, pool, writers, open_s)

    def close(self) -> None:
        for writer in self.writers:
            writer.close()
        self.pool.close()
        self.opened.close()  # the shards (the writers own the stores)


class StoresOnDemand(WriterOnDemand):
    """The workspace opened on demand for one run, as the CLI opens it, its vectors written to
    every store (``--store lite server``)."""

    def __init__(self, settings: Settings, stores: list[Settings]) -> None:
        super().__init__(settings)
        self.stores = stores
        self.writers: list[Any] = []

    def vector_sink(self, dim: int, actor_options: dict[str, Any]) -> Any:
        sink, self.writers = open_sinks(self.stores, dim)
        return sink

    def finish_vectors(self) -> None:
        for writer in self.writers:
            writer.close()
        self.writers = []


def open_sinks(stores: list[Settings], dim: int) -> tuple[Any, list[Any]]:
    """The vector sink of the add step (every store's, when there are several) and the writers
    that own them."""
    opened = [open_vector_sink(store, dim) for store in stores]
    sinks = [sink for sink, _ in opened]
    return (sinks[0] if len(sinks) == 1 else TeeSink(tuple(sinks))), [writer for _, writer in opened]


def add_document(settings: Settings, path: Path, label: str, sim: ScriptedLLM, stores: list[Settings],
                 held: Held | None = None) -> dict[str, Any]:
    """Index one document. Cold (no ``held``), as the CLI does: the run opens its shards (they
    load from the workspace), its embedding workers and its vector store (all the stores, opened
    before the run, when there are several). Warm: through what ``held`` keeps open, as the
    Serve app does."""
    progress: list[tuple[float, str]] = []

    def say(message: str) -> None:
        progress.append((time.perf_counter(), message))
        log(f"  pipeline: {message}")

    before = manifests.load(Workspace(settings.workspace)).entities
    sim.reset()
    started = time.perf_counter()
    if held:
        report = index_paths([str(path)], settings, progress=say, opened=held.opened, embedding_pool=held.pool)
    else:
        with contextlib.closing(StoresOnDemand(settings, stores)) as target:
            report = IndexRun(target, progress=say).run([str(path)])
    end = time.perf_counter()
    if report.docs_failed or report.chunks_failed:
        raise RuntimeError(f"indexing {path.name} failed: {report.errors[:2]}")
    requests = sim.snapshot()["counts"]
    row = {"graph": label, "document": path.stem, "actors": WARM if held else COLD,
           **{k: round(v, 2) for k, v in stage_times(report).items()},
           "total_s": round(end - started, 2), "chunks": report.chunks, "entities_before": before,
           "entities_after": report.entities, "summaries": report.summaries, "llm_requests": requests,
           "vectors_upserted": report.vectors_upserted, "progress": [(round(t - started, 2), m) for t, m in progress]}
    if held:
        row["held_open_s"] = held.open_s
    log(f"add {path.stem} to the {label} graph ({row['actors']}): {row['total_s']} s, LLM requests {requests}")
    return row


def add_documents(settings: Settings, docs: list[Path], label: str, sim: ScriptedLLM,
                  stores: list[Settings] | None = None) -> list[dict[str, Any]]:
    """The first document cold, as the CLI adds it; the second warm, through shards, an
    embedding pool and a vector sink opened in between (not counted)."""
    stores = stores or [settings]
    first = add_document(settings, docs[0], label, sim, stores)
    held = Held.open(settings, stores)
    try:
        second = add_document(settings, docs[1], label, sim, stores, held)
    finally:
        held.close()
    return [first, second]


def new_documents(folder: Path, chunks: int, chunking: ChunkingConfig) -> list[Path]:
    """Two consecutive pieces of the book, each ``chunks`` chunks long, as .txt files."""
    encoding = get_encoding(chunking.encoding)
    tokens = encoding.encode(BOOK.read_text(encoding="utf-8"), disallowed_special=())
    span = chunks * (chunking.chunk_tokens - chunking.overlap_tokens) + chunking.overlap_tokens
    if 2 * span > len(tokens):
        raise SystemExit(f"the book has {len(tokens)} tokens, two documents of {chunks} chunks need {2 * span}")
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(2):
        path = folder / f"new-document-{i + 1}.txt"
        path.write_text(encoding.decode(tokens[i * span : (i + 1) * span]), encoding="utf-8")
        paths.append(path)
    return paths


# ---- 3. query latency ------------------------------------------------------------------------
def context_ids(context: Any) -> dict[str, set[str]]:
    """Ids of the entities, relations and chunks of a retrieved context."""
    return {"entities": {e["id"] for e in context.entities}, "relations": {r["id"] for r in context.relations},
            "chunks": {c["chunk_id"] for c in context.chunks}}


class StageClock:
    """Wall time spent in each awaited store call of a query (embedding, vector search and get
    per collection, graph rounds), summed per query: where a retrieval's time goes. Levels that
    run side by side (hybrid, mix) are summed, so stages can add up to more than the total."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    def wrap(self, target: Any, methods: dict[str, Callable[[tuple[Any, ...]], str]]) -> None:
        """Time ``target``'s async ``methods`` (name -> stage label from the call's args)."""
        for name, label in methods.items():
            original = getattr(target, name)

            async def timed(*args: Any, _original: Any = original, _label: Any = label) -> Any:
                start = time.perf_counter()
                try:
                    return await _original(*args)
                finally:
                    stage = _label(args)
                    self.spent[stage] = self.spent.get(stage, 0.0) + time.perf_counter() - start

            setattr(target, name, timed)

    def take(self) -> dict[str, float]:
        """Milliseconds per stage since the last take."""
        spent, self.spent = self.spent, {}
        return {stage: seconds * 1000 for stage, seconds in spent.items()}


def clock_engine(engine: Any) -> StageClock:
    """A StageClock on ``engine``'s embedder, vector index and graph lookup."""
    clock = StageClock()
    clock.wrap(engine.embedder, {"embed": lambda args: "embed"})
    clock.wrap(engine.vectors, {"search": lambda args: f"search {args[0]}", "get": lambda args: f"get {args[0]}",
                                "text_search": lambda args: f"bm25 {args[0]}"})
    clock.wrap(engine.graph, {"neighborhood": lambda args: "graph neighborhood", "fetch": lambda args: "graph fetch",
                              "passage_entities": lambda args: "graph passage entities"})
    return clock


def query_latency(settings: Settings, names: list[str], exact: ExactIndex | None = None
                  ) -> tuple[list[dict[str, Any]], float, dict[str, list[Any]], list[dict[str, Any]]]:
    """Context-only retrieve() per mode for one question per name, with vectors only (the stores
    compared alike: a 2.3 server has no BM25; ``lexical_latency`` measures BM25); (rows, session
    open s, the context ids of each question per mode, the store's recall against ``exact`` per kind)."""
    questions = [f"What is known about {name}?" for name in names]
    started = time.perf_counter()
    loop = asyncio.new_event_loop()
    rows = []
    retrieved: dict[str, list[dict[str, set[str]]]] = {mode: [] for mode in MODES}
    with LocalSession(settings) as session:
        open_s = time.perf_counter() - started
        for mode in MODES:  # warm-up: first calls load the collections and open connections
            loop.run_until_complete(session.engine.retrieve(questions[0], QueryParam(mode=mode, lexical_weight=0)))
        clock = clock_engine(session.engine)
        for mode in MODES:
            ms, found, sizes, stages = [], 0, [], []
            for name, question in zip(names, questions):
                clock.take()
                start = time.perf_counter()
                context, _, _ = loop.run_until_complete(session.engine.retrieve(question, QueryParam(mode=mode, lexical_weight=0)))
                ms.append((time.perf_counter() - start) * 1000)
                stages.append(clock.take())
                found += entity_key(name) in {e["key"] for e in context.entities}
                retrieved[mode].append(context_ids(context))
                sizes.append((len(context.entities), len(context.relations), len(context.chunks)))
            mean = np.mean(sizes, axis=0)
            rows.append({"mode": mode, "questions": len(ms), **percentiles_ms(ms, 50, 95), "max_ms": round(max(ms), 1),
                         "named_entity_found": found, "mean_entities": round(float(mean[0]), 1),
                         "mean_relations": round(float(mean[1]), 1), "mean_passages": round(float(mean[2]), 1),
                         "stage_p50_ms": {stage: round(float(np.percentile([s.get(stage, 0.0) for s in stages], 50)), 1)
                                          for stage in sorted({k for s in stages for k in s})}})
            log(f"query {mode}: p50 {rows[-1]['p50_ms']} ms, stages {rows[-1]['stage_p50_ms']}")
        recall = loop.run_until_complete(search_recall(session.engine, questions, exact)) if exact else []
    loop.close()
    return rows, open_s, retrieved, recall


def lexical_latency(settings: Settings, names: list[str], repeats: int) -> list[dict[str, Any]]:
    """Context-only retrieve() p50 per mode with vectors only (lexical_weight 0) and with BM25
    fused (weight 1), interleaved: each repeat runs every mode at both weights over the same
    questions; per mode and weight, the median of the repeats' p50s."""
    questions = [f"What is known about {name}?" for name in names]
    loop = asyncio.new_event_loop()
    p50s: dict[tuple[str, float], list[float]] = {}
    with LocalSession(settings) as session:
        for mode in MODES:  # warm-up: both search paths of every mode
            for weight in LEXICAL_WEIGHTS:
                loop.run_until_complete(session.engine.retrieve(questions[0], QueryParam(mode=mode, lexical_weight=weight)))
        for repeat in range(repeats):
            for mode in MODES:
                for weight in LEXICAL_WEIGHTS:
                    ms = []
                    for question in questions:
                        start = time.perf_counter()
                        loop.run_until_complete(session.engine.retrieve(question, QueryParam(mode=mode, lexical_weight=weight)))
                        ms.append((time.perf_counter() - start) * 1000)
                    p50s.setdefault((mode, weight), []).append(float(np.percentile(ms, 50)))
            log(f"BM25 latency repeat {repeat + 1}/{repeats} done")
    loop.close()
    rows = []
    for mode in MODES:
        dense, fused = (float(np.median(p50s[(mode, w)])) for w in LEXICAL_WEIGHTS)
        rows.append({"mode": mode, "repeats": repeats, "dense_p50_ms": round(dense, 1), "bm25_p50_ms": round(fused, 1),
                     "ratio": round(fused / dense, 2), "dense_repeat_p50s": [round(v, 1) for v in p50s[(mode, 0.0)]],
                     "bm25_repeat_p50s": [round(v, 1) for v in p50s[(mode, 1.0)]]})
    return rows


def lexical_table(rows: list[dict[str, Any]]) -> str:
    return markdown(["mode", "vectors only p50 ms", "with BM25 p50 ms", "ratio"],
                    [[r["mode"], r["dense_p50_ms"], r["bm25_p50_ms"], f"{r['ratio']:.2f}x"] for r in rows])


async def search_recall(engine: Any, questions: list[str], exact: ExactIndex) -> list[dict[str, Any]]:
    """Per kind, the share of the exact top k that the store's own search returns for the
    questions' search vectors (entities: low-level keywords, top_k; relations: high-level
    keywords, top_k; chunks: the question, chunk_top_k); and the share of its hits that are the
    exact top k up to ties (exact similarity within TIE_COSINE of the exact k-th), with the
    largest shortfall of a hit below the exact k-th similarity."""
    param = QueryParam(mode="mix")  # the mode that searches all three collections
    found: dict[str, list[float]] = {kind: [] for kind in ID_KINDS}
    tied: dict[str, list[float]] = {kind: [] for kind in ID_KINDS}
    shortfall: dict[str, list[float]] = {kind: [] for kind in ID_KINDS}
    for question in questions:
        _, _, vectors = await engine.search_vectors(question, param)
        for kind, vector, k in (("entities", vectors.low, param.top_k), ("relations", vectors.high, param.top_k),
                                ("chunks", vectors.question, param.chunk_top_k)):
            hits = [hit["id"] for hit in (await engine.vectors.search(kind, np.asarray([vector]), k, ["id"]))[0]]
            best, best_scores = exact.top(kind, vector, k)
            found[kind].append(len(set(hits) & set(best)) / k)
            gap = best_scores[-1] - exact.similarity(kind, vector, hits) if hits else np.zeros(1)
            tied[kind].append(float(np.sum(gap <= TIE_COSINE)) / k)
            shortfall[kind].append(float(max(0.0, gap.max())))
    return [{"kind": kind, "k": param.chunk_top_k if kind == "chunks" else param.top_k, "questions": len(questions),
             "mean_recall": round(float(np.mean(shares)), 3), "min_recall": round(float(np.min(shares)), 3),
             "mean_recall_up_to_ties": round(float(np.mean(tied[kind])), 3),
             "max_shortfall": round(float(np.max(shortfall[kind])), 4)}
            for kind, shares in found.items()]


def reshard_and_retrieve(settings: Settings, num_shards: int, names: list[str],
                         before: dict[str, list[dict[str, set[str]]]]) -> dict[str, Any]:
    """Reshard the workspace to ``num_shards`` and retrieve for ``names`` again (context only);
    the reshard's seconds and ``overlap`` with ``before`` (the ids retrieved before it)."""
    no_llm = settings.model_copy(update={"llm": settings.llm.model_copy(update={"backend": "none"})})
    before_label, after_label = f"{settings.graph.num_shards} shards", f"{num_shards} shards"
    log(f"reshard {before_label} -> {after_label}")
    started = time.perf_counter()
    reshard_workspace(no_llm, num_shards)
    seconds = round(time.perf_counter() - started, 2)
    _, _, after, _ = query_latency(with_shards(no_llm, num_shards), names)
    rows = overlap(before_label, after_label, {before_label: before, after_label: after})
    log(f"  {seconds} s; identical contexts per mode: {[row['identical'] for row in rows]} of {len(names)}")
    return {"reshard_s": seconds, "overlap": rows}


def overlap(base: str, other: str, retrieved: dict[str, dict[str, list[dict[str, set[str]]]]]) -> list[dict[str, Any]]:
    """Per mode, how far the ids ``other``'s retrieval found agree with ``base``'s (same questions):
    mean Jaccard per kind, questions with identical sets per kind and for all three."""
    rows = []
    for mode in MODES:
        pairs = list(zip(retrieved[base][mode], retrieved[other][mode]))
        row: dict[str, Any] = {"stores": f"{other} vs {base}", "mode": mode, "questions": len(pairs)}
        for kind in ID_KINDS:
            row[f"{kind}_jaccard"] = round(float(np.mean(
                [len(a[kind] & b[kind]) / len(a[kind] | b[kind]) if a[kind] | b[kind] else 1.0 for a, b in pairs])), 3)
            row[f"{kind}_identical"] = sum(a[kind] == b[kind] for a, b in pairs)
        row["identical"] = sum(a == b for a, b in pairs)
        row["identical_fraction"] = round(row["identical"] / max(1, len(pairs)), 3)
        rows.append(row)
    return rows


# ---- output ----------------------------------------------------------------------------------
def merge_table(rows: list[dict[str, Any]]) -> str:
    return markdown(
        ["mentions", "shards", "relation records", "distinct entities / relations generated",
         "merged entities / relations", "merge s", "mentions/s", "records/s", "save s", "snapshot MiB",
         "reload s", "RSS per shard MiB: empty / merged / reloaded (max)"],
        [[r["mentions"], r["shards"], r["relation_records"], f"{r['distinct_entities']} / {r['distinct_relations']}",
          f"{r['entities']} / {r['relations']}", r["merge_s"], r["mentions_per_s"], r["records_per_s"], r["save_s"],
          r["snapshot_mib"], r["load_s"], f"{max(r['rss_empty_mib']):.0f} / {max(r['rss_merged_mib']):.0f} / "
          f"{max(r['rss_loaded_mib']):.0f}"] for r in rows])


def add_table(rows: list[dict[str, Any]]) -> str:
    """The add rows, then what each warm run found open (opened before it, not counted)."""
    table = markdown(
        ["graph", "document", "run", "read + chunk s", "embed chunks, extract, merge s", "summaries s (n)",
         "embed graph texts s", "aliases s", "Lite flush s", "snapshot save s", "finish s", "total s",
         "chunks", "entities before / after", "LLM requests (extract/glean/summary)", "vectors upserted"],
        [[r["graph"], r["document"], r["actors"], r["read_chunk_s"], r["extract_s"],
          f"{r['summaries_s']} ({r['summaries']})", r["embed_graph_s"], r["aliases_s"], r["vectors_s"],
          r["save_s"], r["finish_s"], r["total_s"], r["chunks"],
          f"{r['entities_before']} / {r['entities_after']}",
          "/".join(str(r["llm_requests"].get(k, 0)) for k in ("extract", "glean", "summary")),
          r["vectors_upserted"]] for r in rows])
    held = [f"{r['graph']} graph, {WARM}: before the run (not counted), the shards loaded in {r['held_open_s']['shards']} s, "
            f"embedding workers started with the model loaded in {r['held_open_s']['embedding_pool']} s and the vector "
            f"writer opened in {r['held_open_s']['vectors']} s" for r in rows if "held_open_s" in r]
    return "\n\n".join([table, *held])


def query_table(rows: list[dict[str, Any]]) -> str:
    return markdown(
        ["mode", "questions", "p50 ms", "p95 ms", "max ms", "named entity in context",
         "mean entities / relations / passages"],
        [[r["mode"], r["questions"], r["p50_ms"], r["p95_ms"], r["max_ms"],
          f"{r['named_entity_found']}/{r['questions']}",
          f"{r['mean_entities']} / {r['mean_relations']} / {r['mean_passages']}"] for r in rows])


def stage_table(rows: list[dict[str, Any]]) -> str:
    stages = sorted({stage for r in rows for stage in r["stage_p50_ms"]})
    return markdown(["mode", "p50 ms", *stages],
                    [[r["mode"], r["p50_ms"], *(r["stage_p50_ms"].get(s, 0.0) for s in stages)] for r in rows])


def graph_summary(info: dict[str, Any]) -> str:
    """One paragraph on the add/query graph and how its workspace was prepared."""
    planted = info["planted_names_mentions"]
    text = (f"Graph of the add/query steps: {info['mentions']} mentions, {info['entities']} entities, "
            f"{info['relations']} relations, {info['chunks']} chunks; mentions per entity: median "
            f"{info['median_mentions']:g}, max {info['most_mentioned']}. {info['planted_names']} names of the new "
            f"documents were planted (mentions: max {max(planted, default=0)}, "
            f"{sum(m >= 100 for m in planted)} with 100 or more).")
    if "prepare_s" in info:
        stores = "; ".join(f"{STORES[name]}: upsert {m['upsert_s']} s, flush and index {m['index_s']} s, reopen "
                           f"{m['open_s']} s" for name, m in info["milvus"].items())
        text += (f" Preparation (not measured above): {info['summaries']} synthetic summaries, {info['vectors']} "
                 f"vectors into each store ({stores}); {info['prepare_s']} s in all.")
    if "session_open_s" in info:
        opened = ", ".join(f"{STORES[name]} {m['session_open_s']:.1f} s" for name, m in info["milvus"].items()
                           if "session_open_s" in m)
        text += f" Query session open (shards from the snapshot, Milvus, model): {opened}."
    return text


def overlap_table(rows: list[dict[str, Any]]) -> str:
    return markdown(
        ["stores", "mode", "questions", "mean Jaccard entities / relations / chunks",
         "identical entities / relations / chunks", "identical contexts (all ids)"],
        [[r["stores"], r["mode"], r["questions"], " / ".join(f"{r[f'{k}_jaccard']:.3f}" for k in ID_KINDS),
          " / ".join(str(r[f"{k}_identical"]) for k in ID_KINDS), f"{r['identical']}/{r['questions']}"] for r in rows])


def met(ok: bool) -> str:
    return "yes" if ok else "no"


def add_targets(adds: list[dict[str, Any]], entities: int) -> list[list[Any]]:
    """Target rows of the add step: on the graph, warm < ADD_TARGET_S and cold < COLD_ADD_TARGET_S
    (non-LLM); for every add, at most two summary requests per description it summarised."""
    rows = []
    for r in adds:
        if r["graph"] != "empty":
            limit = ADD_TARGET_S if r["actors"] == WARM else COLD_ADD_TARGET_S
            rows.append([f"add a document to the {entities}-entity graph, {r['actors']}, < {limit:g} s (non-LLM)",
                         f"{r['total_s']} s", met(r["total_s"] < limit)])
    for r in adds:
        requests = r["llm_requests"].get("summary", 0)
        rows.append([f"summary LLM requests <= 2 x touched over-limit descriptions, {r['graph']} graph, "
                     f"{r['document']} ({r['actors']})", f"{requests} <= 2 x {r['summaries']}",
                     met(requests <= 2 * r["summaries"])])
    return rows


def targets_table(adds: list[dict[str, Any]], queries: list[dict[str, Any]], info: dict[str, Any]) -> str:
    """Targets: adding a document (``add_targets``), retrieval p50 < 100 ms and p95 < 250 ms
    (on the first --store)."""
    rows = add_targets(adds, info["entities"])
    for r in queries:
        rows.append([f"context-only retrieval p50 < {QUERY_TARGET_MS:g} ms, p95 < {QUERY_P95_TARGET_MS:g} ms, "
                     f"{r['mode']}", f"{r['p50_ms']} / {r['p95_ms']} ms",
                     met(r["p50_ms"] < QUERY_TARGET_MS and r["p95_ms"] < QUERY_P95_TARGET_MS)])
    return markdown(["target", "measured", "met"], rows)


def plot(rows: list[dict[str, Any]], path: Path) -> bool:
    """Merge time vs mentions, one line per shard count (log-log)."""
    plt = pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    for shards in sorted({r["shards"] for r in rows}):
        points = sorted((r["mentions"], r["merge_s"]) for r in rows if r["shards"] == shards)
        ax.plot(*zip(*points), marker="o", label=f"{shards} shard{'s' if shards > 1 else ''}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("entity mentions merged")
    ax.set_ylabel("merge time (s)")
    path.parent.mkdir(parents=True, exist_ok=True)
    save_plot(fig, ax, path, "Graph merge time vs size (2 CPUs)")
    return True


# ---- main ------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Default size: 16-18 minutes on 2 cores (AMD EPYC), 7-11 of them preparing the add/query "
        "workspace (27 under heavy load).\nTiny run: --mentions 1000 2000 --entities 500 --shards 1 2 --doc-chunks 2 --questions 5 --no-baseline"
        "\nBoth vector stores, compared: --store lite server (adds the server's start, upsert and HNSW build)")
    parser.add_argument("--mentions", type=int, nargs="+", default=[10_000, 100_000, 1_000_000],
                        help="entity mentions per size (default: 10000 100000 1000000)")
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4], help="shard counts (default: 1 2 4)")
    parser.add_argument("--entities", type=int, default=200_000,
                        help="distinct entities at the largest size; smaller sizes get a proportional share (200000)")
    parser.add_argument("--skew", type=float, default=0.8, help="Zipf exponent of the name popularity (0.8)")
    parser.add_argument("--relations-per-mention", type=float, default=0.3,
                        help="relation records per entity mention (0.3: ~1.5 distinct relations per entity, as in "
                        "the graphs of docs/benchmarks.md)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-chunks", type=int, default=16,
                        help="chunks per router.apply call (16, the pipeline's extraction batch)")
    parser.add_argument("--add-shards", type=int, default=2,
                        help="shards of the add/query graph, the largest size (default: 2)")
    parser.add_argument("--doc-chunks", type=int, default=10, help="chunks of each added document (10)")
    parser.add_argument("--questions", type=int, default=20, help="questions per query mode (20)")
    parser.add_argument("--no-baseline", action="store_true", help="skip adding the documents to an empty workspace")
    parser.add_argument("--skip-add", action="store_true", help="skip the add-document step")
    parser.add_argument("--skip-query", action="store_true", help="skip the query step")
    parser.add_argument("--lexical-repeats", type=int, default=0, metavar="N",
                        help="after the query step, N interleaved repeats of every mode with BM25 fused and without "
                        "(lexical_weight 1 and 0), medians of their p50s (default 0: not measured)")
    parser.add_argument("--reshard", type=int, default=None, metavar="N",
                        help="after the query step: `lightrag-ray reshard` the graph to N shards, then retrieve again "
                        "on the first store and compare the retrieved ids with those before")
    parser.add_argument("--store", nargs="+", choices=list(STORES), default=["lite"],
                        help="vector store(s) of the add/query graph: lite (Milvus Lite file in the workspace), server "
                        "(a Milvus 2.3 standalone server started in a temp dir, HNSW), or both: the add step writes to the "
                        "first, retrieval runs on each and the retrieved ids are compared (default: lite)")
    parser.add_argument("--workdir", default=None, help="scratch folder, kept (default: a new temp dir, removed)")
    parser.add_argument("--json-out", default=None, help="write every row and setting as JSON here")
    parser.add_argument("--plot", default=None, help="PNG of merge time vs mentions (default: beside --json-out, "
                        "with its name and .png; none without --json-out)")
    args = parser.parse_args(argv)

    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bench_scale_"))
    for folder in ("input", "graph", "empty", *(f"merge-{m}-{n}" for m in args.mentions for n in args.shards)):
        shutil.rmtree(workdir / folder, ignore_errors=True)  # only what this script writes
    largest = max(args.mentions)
    sim = ScriptedLLM(latency_s=0.0).start()
    settings = load_settings(overrides={
        "workspace": str(workdir / "graph"), "graph": {"num_shards": args.add_shards}, "extraction": {"mode": "llm"},
        "llm": {"backend": "openai", "base_url": sim.url, "model": "sim", "timeout_s": 600.0}})
    docs = new_documents(workdir / "input", args.doc_chunks, settings.chunking)
    doc_names = [e["name"] for doc in docs for e in derive_records(doc.read_text(encoding="utf-8"))[0]]
    known = doc_names[::2][: max(1, args.entities // 20)]  # half of the new documents' names exist already
    corpus = Corpus(BOOK.read_text(encoding="utf-8"), args.entities, known, args.seed, args.skew)
    rank = {name: i for i, name in enumerate(corpus.names)}
    rng = np.random.default_rng([args.seed, 5])
    head = corpus.names[: args.questions // 2]  # the most mentioned names, then random ones
    question_names = head + [corpus.names[i] for i in rng.choice(
        np.arange(len(head), args.entities), args.questions - len(head), replace=False)]
    with_graph = not (args.skip_add and args.skip_query)
    runs = [(m, n) for m in sorted(args.mentions) for n in args.shards]
    if with_graph and (largest, args.add_shards) not in runs:
        runs.append((largest, args.add_shards))

    start_ray(2, namespace=settings.ray.namespace)
    merges: list[dict[str, Any]] = []
    adds: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    graph_info: dict[str, Any] = {}
    stores = list(dict.fromkeys(args.store))
    server = MilvusStandalone(tempfile.mkdtemp(prefix="bench_scale_milvus_")) if "server" in stores else None
    by_store: dict[str, dict[str, Any]] = {}  # per store: query rows, retrieved ids, recall vs exact
    resharded: dict[str, Any] = {}  # --reshard: its seconds and the retrieved ids compared with before
    exact: list[ExactIndex] = []  # with --skip-add: every store's vectors, for exact search

    def store_settings(store: str) -> Settings:
        """The add/query settings with vectors.uri on that store (the server starts on first use)."""
        if store == "server" and server.process is None:
            log(f"starting a Milvus server in {server.base_dir}")
            server.start()
        uri = server.uri if store == "server" else None  # None: Milvus Lite in the workspace
        return settings.model_copy(update={"vectors": settings.vectors.model_copy(update={"uri": uri})})

    try:
        for mentions, shards in runs:
            work = Workload(corpus, mentions, distinct_for(mentions, args.mentions, args.entities),
                            args.relations_per_mention)
            log(f"merge {mentions} mentions ({work.distinct_entities} entities, {work.relation_records} relation "
                f"records, {work.chunks} chunks) into {shards} shards")
            if with_graph and (mentions, shards) == (largest, args.add_shards):
                counts = work.mention_counts
                planted = sorted((int(counts[rank[n]]) for n in known if rank.get(n, len(counts)) < len(counts)),
                                 reverse=True)
                graph_info = {"mentions": mentions, "entities": work.distinct_entities,
                              "relations": work.distinct_relations, "chunks": work.chunks,
                              "most_mentioned": int(counts.max()), "median_mentions": float(np.median(counts)),
                              "planted_names": len(planted), "planted_names_mentions": planted}

                def prepare(router: GraphRouter, chunk_rows: list[dict[str, Any]]) -> None:
                    graph_info.update(prepare_workspace(router, chunk_rows, {s: store_settings(s) for s in stores},
                                                        question_names, args.seed, exact if args.skip_add else None))

                merges.append(merge_run(work, shards, Path(settings.workspace), args.batch_chunks, prepare))
            else:
                workspace = workdir / f"merge-{mentions}-{shards}"
                merges.append(merge_run(work, shards, workspace, args.batch_chunks))
                shutil.rmtree(workspace, ignore_errors=True)
            row = merges[-1]
            log(f"  {row['merge_s']} s, {row['mentions_per_s']} mentions/s; save {row['save_s']} s, "
                f"reload {row['load_s']} s")
        if not args.skip_add:
            if not args.no_baseline:
                empty = settings.model_copy(update={"workspace": str(workdir / "empty")})
                adds += add_documents(empty, docs, "empty", sim)[:1]  # Milvus Lite in its own workspace
            adds += add_documents(store_settings(stores[0]), docs, f"{graph_info['entities']}-entity", sim,
                                  [store_settings(s) for s in stores])
        if not args.skip_query:
            for store in stores:
                log(f"query on {STORES[store]}")
                on_store = store_settings(store)
                no_llm = on_store.model_copy(update={"llm": on_store.llm.model_copy(update={"backend": "none"})})
                rows, open_s, retrieved, recall = query_latency(no_llm, question_names, exact[0] if exact else None)
                by_store[store] = {"rows": rows, "retrieved": retrieved, "recall": recall,
                                   "lexical": lexical_latency(no_llm, question_names, args.lexical_repeats)
                                   if args.lexical_repeats else []}
                graph_info["milvus"][store]["session_open_s"] = round(open_s, 2)
            queries = by_store[stores[0]]["rows"]
            graph_info["session_open_s"] = graph_info["milvus"][stores[0]]["session_open_s"]
            if args.reshard:
                resharded = reshard_and_retrieve(store_settings(stores[0]), args.reshard, question_names,
                                                 by_store[stores[0]]["retrieved"])
    finally:
        sim.stop()
        stop_ray()
        if server is not None:
            server.stop()
            shutil.rmtree(server.base_dir, ignore_errors=True)
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    retrieved_by_store = {store: value["retrieved"] for store, value in by_store.items()}
    overlaps = [row for other in stores[1:] if other in by_store for row in overlap(stores[0], other, retrieved_by_store)]

    command = command_line("bench_scale.py", argv)
    print("## Merge\n")
    print(merge_table(merges))
    if adds:
        print(f"\n## Add one {args.doc_chunks}-chunk document (simulated LLM, zero latency; vectors into "
              f"{STORES[stores[0]]})\n")
        print(add_table(adds))
    for store, value in by_store.items():
        print(f"\n## Context-only retrieval on the {graph_info['entities']}-entity graph, {STORES[store]}\n")
        print(query_table(value["rows"]))
        print("\nWhere the time goes: p50 ms of each awaited store call per query (levels that run side by side "
              "in hybrid and mix are summed, so stages can add up to more than the total)\n")
        print(stage_table(value["rows"]))
        if value["lexical"]:
            print(f"\nBM25 fused (lexical_weight 1) against vectors only (0), {args.lexical_repeats} interleaved "
                  "repeats, median of their p50s\n")
            print(lexical_table(value["lexical"]))
    if overlaps:
        print(f"\n## Retrieved ids compared with {STORES[stores[0]]} (same graph, same questions)\n")
        print(overlap_table(overlaps))
    if resharded:
        print(f"\n## Reshard {args.add_shards} -> {args.reshard} shards: {resharded['reshard_s']} s; retrieved ids "
              f"after it compared with before (same questions, {STORES[stores[0]]})\n")
        print(overlap_table(resharded["overlap"]))
    recall_rows = [{"store": store, **row} for store, value in by_store.items() for row in value["recall"]]
    if recall_rows:
        print("\n## Search recall against exact (brute-force) search over the same vectors\n")
        print(f"(up to ties: a hit counts when its exact similarity is within {TIE_COSINE} of the exact k-th; "
              "largest shortfall: how far the worst hit falls below the exact k-th)\n")
        print(markdown(["store", "kind", "k", "questions", "mean recall@k", "min recall@k", "recall up to ties",
                        "largest shortfall"],
                       [[STORES[r["store"]], r["kind"], r["k"], r["questions"], r["mean_recall"], r["min_recall"],
                         r["mean_recall_up_to_ties"], r["max_shortfall"]] for r in recall_rows]))
    if graph_info:
        print(f"\n{graph_summary(graph_info)}")
    if adds or queries:
        print(f"\n## Targets\n\n{targets_table(adds, queries, graph_info)}")
    print(f"\nmachine: {machine()}; command: {command}")
    png = Path(args.plot) if args.plot else Path(args.json_out).with_suffix(".png") if args.json_out else None
    if png and plot(merges, png):
        print(f"plot: {png}")
    write_json(args.json_out, {
        "command": command, "machine": machine(), "settings": vars(args), "graph": graph_info,
        "merge": merges, "add": adds, "query": queries,
        "query_by_store": {store: value["rows"] for store, value in by_store.items()}, "overlap": overlaps,
        "bm25_latency_by_store": {store: value["lexical"] for store, value in by_store.items()},
        "search_recall": recall_rows, "reshard": resharded})


if __name__ == "__main__":
    main()
