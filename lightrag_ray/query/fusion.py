"""Dense and BM25 rankings fused into one: reciprocal-rank fusion (Cormack et al., 2009).

A hit at rank r (from 1) of a ranking of weight w adds w / (RRF_K + r) to its score; the dense
ranking weighs 1, the BM25 one the query's ``lexical_weight`` (0: dense only). Each mode's
default weight was measured on HotpotQA (docs/benchmarks.md, "BM25 fusion").
"""

from __future__ import annotations

from typing import Any

from lightrag_ray.query.params import Mode

RRF_K = 60
# The BM25 ranking's weight per mode when the query names none (0: that mode stays dense only).
# HotpotQA fast mode, all-gold@8 with / without: naive .73/.67, local .73/.58, global .69/.67, hybrid .73/.70,
# mix .73/.72, walk .83/.86 (docs/benchmarks.md).
LEXICAL_WEIGHTS: dict[str, float] = {"naive": 1.0, "local": 1.0, "global": 1.0, "hybrid": 1.0, "mix": 1.0,
                                     "walk": 0.0, "bypass": 0.0}

Hits = list[dict[str, Any]]


def lexical_weight(mode: Mode, asked: float | None) -> float:
    """The BM25 weight of a query: the one asked for, else the mode's default."""
    return LEXICAL_WEIGHTS[mode] if asked is None else asked


def fuse(dense: Hits, lexical: Hits, weight: float) -> Hits:
    """The hits of both rankings by fused score, best first (ties: dense order first). A hit
    keeps its dense row (with its similarity ``score``) where it has one; a BM25-only hit gets
    the similarity of the dense hit at its fused rank, so scores stay similarities that fall
    with the rank (the walk's seed weights use them)."""
    scores: dict[str, float] = {}
    rows: dict[str, dict[str, Any]] = {}
    for ranking, w in ((dense, 1.0), (lexical, weight)):
        for rank, hit in enumerate(ranking, 1):
            scores[hit["id"]] = scores.get(hit["id"], 0.0) + w / (RRF_K + rank)
            rows.setdefault(hit["id"], hit)
    order = sorted(rows, key=lambda i: -scores[i])  # stable: dense hits first among equals
    similarities = [hit["score"] for hit in dense]
    dense_ids = {hit["id"] for hit in dense}
    fused = []
    for rank, hit_id in enumerate(order):
        row = rows[hit_id]
        if hit_id not in dense_ids:
            row = {**row, "score": similarities[min(rank, len(similarities) - 1)] if similarities else 0.0}
        fused.append(row)
    return fused
