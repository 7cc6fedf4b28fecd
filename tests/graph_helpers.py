"""Helpers for integration tests: expected graphs from the scripted LLM, graph dumps, graph
comparisons, an opened writer."""

from __future__ import annotations

import contextlib
import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any, NamedTuple

from lightrag_ray.config import Settings
from lightrag_ray.core.graph.contract import operation
from lightrag_ray.core.graph.views import DESCRIPTION_SEP, fragments
from lightrag_ray.core.ids import entity_id, relation_id
from lightrag_ray.core.names import entity_key
from lightrag_ray.models.embedding import make_embedder
from lightrag_ray.service.opening import bound_settings
from lightrag_ray.storage import manifest
from lightrag_ray.storage.graph.writer import GraphRouter
from lightrag_ray.storage.vectors import open_store
from lightrag_ray.storage.workspace import Workspace
from tests.scripted_llm import derive_records

SUMMARY_PREFIX = "Summary of "  # how the scripted LLM starts every summary
KIND = {"entities": "entity", "relations": "relation"}
PASSAGE_START, PASSAGE_END = "<input_text>\n", "\n</input_text>"


def shard_ref(actor: Any, name: str, *args: Any) -> Any:
    """The object ref of one graph-contract operation on one shard actor (it answers
    (incarnation, result))."""
    return actor.call.remote(operation(name), args)


def passages_sent(requests: list[tuple[str, list[dict[str, Any]]]]) -> list[str]:
    """Chunk texts of the extraction requests the scripted LLM received."""
    texts = []
    for kind, messages in requests:
        if kind == "extract":
            content = messages[-1]["content"]
            texts.append(content.split(PASSAGE_START, 1)[1].rsplit(PASSAGE_END, 1)[0])
    return texts


def expected_graph(passages: list[str]) -> tuple[set[str], set[frozenset[str]]]:
    """Entity keys and relation key pairs that merging the LLM's answers must give."""
    entities: set[str] = set()
    relations: set[frozenset[str]] = set()
    for passage in passages:
        ents, rels = derive_records(passage)
        entities.update(entity_key(e["name"]) for e in ents)
        for rel in rels:
            a, b = entity_key(rel["source"]), entity_key(rel["target"])
            if a != b:
                entities.update((a, b))
                relations.add(frozenset((a, b)))
    return entities, relations


def dump_graph(settings: Settings) -> dict[str, list[dict[str, Any]]]:
    """The whole stored graph of a workspace, loaded by fresh shard actors."""
    settings = bound_settings(settings)
    router = GraphRouter(settings.workspace, settings.graph)
    try:
        return router.export()
    finally:
        router.close()


class Stored(NamedTuple):
    """What fresh shard actors load from a workspace, and its manifest."""

    graph: dict[str, list[dict[str, Any]]]  # GraphRouter.export()
    mentions: dict[str, list[dict[str, Any]]]  # GraphRouter.mention_rows() of every entity
    manifest: manifest.Manifest


def load_stored(settings: Settings) -> Stored:
    """The whole graph and all mention rows, read by fresh shard actors over the workspace
    (as dump_graph does)."""
    settings = bound_settings(settings)
    router = GraphRouter(settings.workspace, settings.graph)
    try:
        graph = router.export()
        rows = router.mention_rows([e["key"] for e in graph["entities"]])
    finally:
        router.close()
    return Stored(graph, rows, manifest.load(Workspace(settings.workspace)))


def normalised_rows(rows: list[dict[str, Any]]) -> list[str]:
    """Rows as sorted JSON strings: comparable whatever their order."""
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in rows)


def item_fragments(mentions: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    """Item id -> its distinct description fragments in chunk order (LightRAG's merge rule)."""
    said: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for row in mentions["entities"]:
        said[entity_id(row["key"])].append((row["chunk_id"], row["description"]))
    for row in mentions["relations"]:
        said[relation_id(row["source_key"], row["target_key"])].append((row["chunk_id"], row["description"]))
    return {item: fragments(d for _, d in sorted(pairs, key=lambda p: p[0])) for item, pairs in said.items()}


def graph_differences(got: Stored, want: Stored, max_fragments: int | None = None) -> tuple[list[str], int]:
    """Every difference between two stored graphs, and how many items are summarised.

    The mention rows must be equal, and every entity and relation equal in every field.
    With ``max_fragments`` (the ``graph.summary_max_fragments`` both were built with), a
    description is compared as tests/test_incremental_equivalence.py explains: an item of
    more fragments must be summarised on both sides (the wording of incremental summaries
    depends on how the inserts were split), any other must be exactly its fragments joined.
    Without it, descriptions must be identical too (e.g. a resumed run against one run)."""
    problems: list[str] = []
    for kind in ("entities", "relations"):
        got_rows, want_rows = normalised_rows(got.mentions[kind]), normalised_rows(want.mentions[kind])
        if got_rows != want_rows:
            extra, missing = set(got_rows) - set(want_rows), set(want_rows) - set(got_rows)
            problems.append(f"{kind} mention rows differ: extra {sorted(extra)[:3]}, missing {sorted(missing)[:3]}")
    parts = item_fragments(want.mentions) if max_fragments is not None else {}
    summarised = 0
    for kind in ("entities", "relations"):
        got_items = {item["id"]: item for item in got.graph[kind]}
        want_items = {item["id"]: item for item in want.graph[kind]}
        if set(got_items) != set(want_items):
            problems.append(f"{kind}: extra ids {sorted(set(got_items) - set(want_items))}, "
                            f"missing ids {sorted(set(want_items) - set(got_items))}")
        for item_id in sorted(set(got_items) & set(want_items)):
            g, w = got_items[item_id], want_items[item_id]
            label = f"{KIND[kind]} {w.get('key') or (w['source_key'], w['target_key'])}"
            for field in sorted(set(g) | set(w)):
                if (field != "description" or max_fragments is None) and g.get(field) != w.get(field):
                    problems.append(f"{label}: {field} {g.get(field)!r} != one run's {w.get(field)!r}")
            if max_fragments is None:
                continue
            frags = parts.get(item_id, [])
            if len(frags) > max_fragments:
                summarised += 1
                for side, item in (("incremental", g), ("one run", w)):
                    if not item["description"].startswith(SUMMARY_PREFIX):
                        problems.append(f"{label} ({len(frags)} fragments) is not summarised in the {side} "
                                        f"graph: {item['description']!r}")
            else:
                joined = DESCRIPTION_SEP.join(frags)
                for side, item in (("incremental", g), ("one run", w)):
                    if item["description"] != joined:
                        problems.append(f"{label} ({len(frags)} fragments): {side} description "
                                        f"{item['description']!r} != its joined fragments {joined!r}")
    for field in ("entities", "relations"):
        if getattr(got.manifest, field) != getattr(want.manifest, field):
            problems.append(f"manifest {field}: {getattr(got.manifest, field)} != one run's "
                            f"{getattr(want.manifest, field)}")
        if getattr(got.manifest, field) != len(got.graph[field]):
            problems.append(f"manifest {field} {getattr(got.manifest, field)} != {len(got.graph[field])} stored")
    return problems, summarised


@contextlib.contextmanager
def open_writer(settings: Settings) -> Iterator[tuple[Workspace, GraphRouter, Any, Any]]:
    """(workspace, router, vectors, embedder) of a workspace, as the Serve app keeps them
    for deletes and graph edits; closed at the end."""
    settings = bound_settings(settings)
    router = GraphRouter(settings.workspace, settings.graph, settings.ray.namespace)
    embedder = make_embedder(settings.embedding)
    vectors = open_store(settings, embedder.dim)
    try:
        yield Workspace(settings.workspace), router, vectors, embedder
    finally:
        vectors.close()
        router.close()
