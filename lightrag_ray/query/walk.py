"""Passages for the ``walk`` mode: a multi-hop walk from the question's entities and its
best passages by vector search (personalized PageRank, core.walk).

Up to three rounds of reads. First, side by side: a vector search of the passages and, for
each entity name of the question, one of the entities. Then one parallel round over the
shards for the entities of the seed passages and of the names (a name's own entity when the
graph has it, else the nearest found), with the passages that mention each (hubs, mentioned
by more than ``MAX_CHUNKS`` passages, are not expanded) and their aliases (name variants,
core.alias_rules); then, when they have aliases, one more round for those. The walk treats
an entity and its aliases as one: each of them leads to the passages of all, so "Marley" in a
seed passage leads to the passages about "Jacob Marley" in the two steps a shared name takes
(an entity-to-entity edge would make it three, and a damped walk loses most of its mass
there). Seeds: the question's entities weighted
by specificity (one over their number of passages) and the first ``SEED_PASSAGES``
passages weighted by a softmax of their similarity to the question; the entities, when the
question names some, get half of the restart mass and the passages the other half.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from lightrag_ray.core.names import entity_key
from lightrag_ray.core.walk import passage_walk, split_restart
from lightrag_ray.query.stores import GraphLookup, VectorIndex

SEED_PASSAGES = 5
SEED_TEMPERATURE = 0.05  # softmax temperature over the seed passages' cosine similarities
MAX_CHUNKS = 300


async def name_candidates(vectors: VectorIndex, names: list[str], name_vectors: np.ndarray) -> list[tuple[str, str, float]]:
    """Per name: its own entity key, and the key and similarity of the nearest entity."""
    if not names:
        return []
    hits = await vectors.search("entities", name_vectors, 1, ["key"])
    return [(entity_key(name), found[0]["key"], float(found[0]["score"])) if found else (entity_key(name), "", 0.0)
            for name, found in zip(names, hits)]


def link_names(candidates: list[tuple[str, str, float]], found: set[str]) -> dict[str, float]:
    """Entity key -> link confidence: 1 for a name's own entity when the graph has it
    (``found``), else the similarity of the nearest entity."""
    linked: dict[str, float] = {}
    for own, nearest, similarity in candidates:
        key, weight = (own, 1.0) if own in found else (nearest, similarity)
        if key in found:
            linked[key] = max(linked.get(key, 0.0), weight)
    return linked


def with_variants(links: dict[str, list[str]], rows: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """``links`` (entity key -> passages) where each entity also leads to the passages of its
    aliases found in ``rows`` (hubs excepted), and those aliases are entities of the walk too."""
    merged = {key: list(chunks) for key, chunks in links.items()}
    for key in links:
        for other in rows[key]["aliases"]:
            if other in rows and rows[other]["chunks"]:
                merged[key] = list(dict.fromkeys(merged[key] + rows[other]["chunks"]))
                merged[other] = list(dict.fromkeys(merged.get(other, rows[other]["chunks"]) + links[key]))
    return merged


async def walk_chunk_ids(vectors: VectorIndex, graph: GraphLookup, question_vector: Any, names: list[str],
                         name_vectors: np.ndarray, top_k: int) -> list[str]:
    """The ``top_k`` passage ids for a question (its vector, the entity names in it and
    their vectors), best first."""
    question = np.asarray([question_vector], dtype=np.float32)
    dense, candidates = await asyncio.gather(
        vectors.search("chunks", question, max(top_k, SEED_PASSAGES), ["id"]), name_candidates(vectors, names, name_vectors))
    hits = dense[0]
    seeds = hits[:SEED_PASSAGES]
    seed_ids = {h["id"] for h in seeds}
    keys = [key for own, nearest, _ in candidates for key in (own, nearest) if key]
    rows = {row["key"]: row for row in await graph.passage_entities([h["id"] for h in seeds], keys, MAX_CHUNKS)}
    linked = {key: weight for key, weight in link_names(candidates, set(rows)).items() if rows[key]["chunks"]}
    links = {key: row["chunks"] for key, row in rows.items() if row["chunks"] and (key in linked or seed_ids & set(row["chunks"]))}
    variants = sorted({other for key in links for other in rows[key]["aliases"]} - set(rows))
    if variants:
        rows.update((row["key"], row) for row in await graph.passage_entities([], variants, MAX_CHUNKS))
    links = with_variants(links, rows)
    entity_seeds = {key: weight / rows[key]["n_chunks"] for key, weight in linked.items()}
    best = max((h["score"] for h in seeds), default=0.0)
    passage_seeds = {h["id"]: float(np.exp((h["score"] - best) / SEED_TEMPERATURE)) for h in seeds}
    scores = passage_walk(links, *split_restart(entity_seeds, passage_seeds))
    ranked = sorted(scores, key=lambda c: -scores[c])
    return list(dict.fromkeys(ranked + [h["id"] for h in hits]))[:top_k]
