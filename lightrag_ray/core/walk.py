"""Personalized PageRank over an entity-passage graph (pure functions, no Ray).

The graph is bipartite: an entity is linked to every passage that mentions it. A walk
restarts at the seeds (the question's entities and passages by vector search) and spreads over shared
entities, so a passage that no question word names but that a seed passage points to (the
"bridge" of a multi-hop question) collects score; the entities the walk visits most are the
ones the context describes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

DAMPING = 0.5  # probability of following an edge rather than restarting at a seed
ENTITY_SHARE = 0.5  # of the restart mass, for the question's entities (the rest for its passages)
ITERATIONS = 50
TOLERANCE = 1e-9


def split_restart(entity_seeds: dict[str, float], passage_seeds: dict[str, float],
                  entity_share: float = ENTITY_SHARE) -> tuple[dict[str, float], dict[str, float]]:
    """The seeds rescaled so that the entities get ``entity_share`` of the restart mass and the
    passages the rest (each side keeps its own proportions; one side alone gets it all)."""
    entity_total, passage_total = sum(entity_seeds.values()), sum(passage_seeds.values())
    if entity_total <= 0 or passage_total <= 0:
        return entity_seeds, passage_seeds
    return ({key: w * entity_share / entity_total for key, w in entity_seeds.items()},
            {chunk: w * (1 - entity_share) / passage_total for chunk, w in passage_seeds.items()})


@dataclass(frozen=True)
class WalkScores:
    """Visit probabilities of a walk: passage id -> score and entity key -> score."""

    passages: dict[str, float]
    entities: dict[str, float]


def walk_scores(links: dict[str, list[str]], entity_seeds: dict[str, float], passage_seeds: dict[str, float],
                damping: float = DAMPING) -> WalkScores:
    """Visit probabilities of a walk restarting at the seeds (weights need not sum to one),
    over ``links`` (entity key -> the passages mentioning it), for every passage and every
    entity of ``links``. Seed passages with no entity keep their restart mass."""
    entities = list(links)
    passages = list(dict.fromkeys([c for chunks in links.values() for c in chunks] + list(passage_seeds)))
    if not passages:
        return WalkScores({}, {})
    e_index = {key: i for i, key in enumerate(entities)}
    p_index = {chunk: len(entities) + i for i, chunk in enumerate(passages)}
    rows = [e_index[key] for key, chunks in links.items() for _ in chunks]
    cols = [p_index[c] for chunks in links.values() for c in chunks]
    size = len(entities) + len(passages)
    adjacency = sp.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(size, size)).tocsr()
    adjacency = adjacency + adjacency.T
    degree = np.asarray(adjacency.sum(axis=1)).ravel()
    step = (sp.diags(1.0 / np.where(degree == 0, 1.0, degree)) @ adjacency).T.tocsr()  # column-stochastic
    restart = np.zeros(size)
    for key, weight in entity_seeds.items():
        if key in e_index:
            restart[e_index[key]] += weight
    for chunk, weight in passage_seeds.items():
        restart[p_index[chunk]] += weight
    if restart.sum() <= 0:
        return WalkScores({}, {})
    restart /= restart.sum()
    scores = restart.copy()
    for _ in range(ITERATIONS):
        following = (1 - damping) * restart + damping * (step @ scores)
        done = np.abs(following - scores).sum() < TOLERANCE
        scores = following
        if done:
            break
    return WalkScores({chunk: float(scores[p_index[chunk]]) for chunk in passages},
                      {key: float(scores[e_index[key]]) for key in entities})
