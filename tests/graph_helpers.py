"""Helpers for integration tests: expected graphs from the scripted LLM, graph dumps, an opened writer."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from lightrag_ray.config import Settings
from lightrag_ray.core.names import entity_key
from lightrag_ray.models.embedding import make_embedder
from lightrag_ray.storage.graph_router import GraphRouter
from lightrag_ray.storage.vectors import open_store
from lightrag_ray.storage.workspace import Workspace
from tests.scripted_llm import derive_records

PASSAGE_START, PASSAGE_END = "<input_text>\n", "\n</input_text>"


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
    router = GraphRouter(settings.workspace, settings.graph)
    try:
        return router.export()
    finally:
        router.close()



@contextlib.contextmanager
def open_writer(settings: Settings) -> Iterator[tuple[Workspace, GraphRouter, Any, Any]]:
    """(workspace, router, vectors, embedder) of a workspace, as the Serve app keeps them
    for deletes and graph edits; closed at the end."""
    router = GraphRouter(settings.workspace, settings.graph, settings.ray.namespace)
    embedder = make_embedder(settings.embedding)
    vectors = open_store(settings, embedder.dim)
    try:
        yield Workspace(settings.workspace), router, vectors, embedder
    finally:
        vectors.close()
        router.close()
