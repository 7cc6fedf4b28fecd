"""Passages and entities for the ``walk`` mode: a multi-hop walk from the question's
entities and its best passages by vector search (personalized PageRank, core.walk).

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
``WalkWeights`` can add the ends of the question's best relations (one more vector search in
the first round) and more vector hits to the seeds; both are off, as measured on HotpotQA
(docs/benchmarks.md). Entities are ranked by visit probability over the square root of
their number of passages (``ENTITY_RANK_POWER``): on HotpotQA the answer is in the walk's
graph sections for 78 of 100 questions either way, and the damping keeps 30 entities in the
budget where raw visits keep 23 (hubs' long descriptions).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import numpy as np

from lightrag_ray.core.names import entity_key
from lightrag_ray.core.walk import split_restart, walk_scores
from lightrag_ray.query.fusion import fuse
from lightrag_ray.query.stores import GraphLookup, VectorIndex

SEED_PASSAGES = 5
SEED_TEMPERATURE = 0.05  # softmax temperature over the seed passages' cosine similarities
MAX_CHUNKS = 300
ENTITY_RANK_POWER = 0.5  # entities: visits / n_passages ** this (0: 23 entities in the budget, 0.5: 30)


async def name_candidates(vectors: VectorIndex, names: list[str],
                          name_vectors: np.ndarray | None) -> list[tuple[str, str, float]]:
    """Per name: its own entity key, and the key and similarity of the nearest entity."""
    if not names or name_vectors is None:
        return []
    hits = await vectors.search("entities", name_vectors, 1, ["key"])
    return [(entity_key(name), found[0]["key"], float(found[0]["score"])) if found else (entity_key(name), "", 0.0)
            for name, found in zip(names, hits)]


def link_names(candidates: list[tuple[str, str, float]], found: set[str], nearest_weight: float = 0.0) -> dict[str, float]:
    """Entity key -> link confidence: 1 for a name's own entity when the graph has it
    (``found``), and its nearest entity at ``nearest_weight`` times their similarity; else
    the nearest at its similarity."""
    linked: dict[str, float] = {}
    for own, nearest, similarity in candidates:
        pairs = [(own, 1.0), (nearest, nearest_weight * similarity)] if own in found else [(nearest, similarity)]
        for key, weight in pairs:
            if key in found and weight > 0:
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


@dataclass(frozen=True)
class WalkWeights:
    """How a walk's restart mass is made; each choice was measured (docs/benchmarks.md, HotpotQA)."""

    seed_passages: int = SEED_PASSAGES  # the best passages by vector search: seeds, and their entities expanded
    temperature: float = SEED_TEMPERATURE  # softmax temperature over those seeds' similarities
    relation_seeds: int = 0  # the question's best relations by vector search, whose ends join the entity seeds
    relation_weight: float = 0.0  # an end's link confidence per unit of its relation's similarity (a name's: 1)
    nearest_weight: float = 0.0  # a name's nearest entity, besides its own: link confidence per unit of similarity
    dense_pool: int = 0  # passages of the vector search that join the restart vector by similarity (not expanded)
    dense_weight: float = 0.0  # their restart weight at the best similarity (min-max scaled down to 0)


@dataclass(frozen=True)
class WalkRanking:
    """A walk's result: passage ids and entity keys, best first."""

    chunk_ids: list[str]
    entity_keys: list[str]


async def relation_ends(vectors: VectorIndex, question: np.ndarray, weights: WalkWeights) -> dict[str, float]:
    """Entity key -> link confidence of the ends of the question's best relations."""
    if weights.relation_seeds <= 0 or weights.relation_weight <= 0:
        return {}
    ends: dict[str, float] = {}
    for hit in (await vectors.search("relations", question, weights.relation_seeds, ["source_key", "target_key"]))[0]:
        for key in (hit["source_key"], hit["target_key"]):
            ends[key] = max(ends.get(key, 0.0), weights.relation_weight * float(hit["score"]))
    return ends


def passage_seeds(hits: list[dict[str, Any]], weights: WalkWeights) -> dict[str, float]:
    """Passage id -> restart weight: a softmax over the first ``seed_passages`` hits' similarities,
    plus, for the first ``dense_pool`` hits, ``dense_weight`` scaled by their min-max similarity."""
    seeds = hits[:weights.seed_passages]
    best = max((h["score"] for h in seeds), default=0.0)
    found = {h["id"]: float(np.exp((h["score"] - best) / weights.temperature)) for h in seeds}
    pool = hits[:weights.dense_pool]
    if weights.dense_weight > 0 and len(pool) > 1:
        high, low = pool[0]["score"], pool[-1]["score"]
        for h in pool:
            scaled = (h["score"] - low) / (high - low) if high > low else 1.0
            found[h["id"]] = found.get(h["id"], 0.0) + weights.dense_weight * scaled
    return found


async def lexical_passages(vectors: VectorIndex, text: str, top_k: int, weight: float,
                           version: int | None) -> list[dict[str, Any]]:
    """The BM25 passage hits (ids) of ``text``; none at weight 0."""
    if weight <= 0 or not text:
        return []
    return (await vectors.text_search("chunks", [text], top_k, ["id"], version))[0]


async def walk_ranking(vectors: VectorIndex, graph: GraphLookup, question_vector: Any, names: list[str],
                       name_vectors: np.ndarray | None, top_k: int, weights: WalkWeights = WalkWeights(),
                       version: int | None = None, text: str = "", lexical_weight: float = 0.0) -> WalkRanking:
    """The ``top_k`` passage ids for a question (its vector, the entity names in it and their
    vectors), best first, and the entities the walk visited, most visited first; ``version``:
    the passages searched are those a reader of that graph version sees; ``text``: the BM25
    query, whose passages are fused with the vector hits at ``lexical_weight`` into the seed
    passages (query.fusion; off by default for this mode, as measured)."""
    question = np.asarray([question_vector], dtype=np.float32)
    depth = max(top_k, weights.seed_passages, weights.dense_pool)
    dense, candidates, ends, lexical = await asyncio.gather(
        vectors.search("chunks", question, depth, ["id"], version),
        name_candidates(vectors, names, name_vectors), relation_ends(vectors, question, weights),
        lexical_passages(vectors, text, depth, lexical_weight, version))
    hits = fuse(dense[0], lexical, lexical_weight) if lexical else dense[0]
    seeds = [h["id"] for h in hits[:weights.seed_passages]]
    seed_ids = set(seeds)
    keys = list(dict.fromkeys([key for own, nearest, _ in candidates for key in (own, nearest) if key] + list(ends)))
    rows = {row["key"]: row for row in await graph.passage_entities(seeds, keys, MAX_CHUNKS)}
    linked = {key: weight for key, weight in link_names(candidates, set(rows), weights.nearest_weight).items()
              if rows[key]["chunks"]}
    for key, weight in ends.items():
        if key in rows and rows[key]["chunks"]:
            linked[key] = max(linked.get(key, 0.0), weight)
    links = {key: row["chunks"] for key, row in rows.items() if row["chunks"] and (key in linked or seed_ids & set(row["chunks"]))}
    variants = sorted({other for key in links for other in rows[key]["aliases"]} - set(rows))
    if variants:
        rows.update((row["key"], row) for row in await graph.passage_entities([], variants, MAX_CHUNKS))
    links = with_variants(links, rows)
    entity_seeds = {key: weight / rows[key]["n_chunks"] for key, weight in linked.items()}
    scores = walk_scores(links, *split_restart(entity_seeds, passage_seeds(hits, weights)))
    ranked = sorted(scores.passages, key=lambda c: -scores.passages[c])
    entities = sorted(scores.entities, key=lambda k: (-scores.entities[k] / rows[k]["n_chunks"] ** ENTITY_RANK_POWER, k))
    return WalkRanking(list(dict.fromkeys(ranked + [h["id"] for h in hits]))[:top_k], entities)
