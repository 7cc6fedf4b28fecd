"""Query keywords from LLM answers (or without an LLM) and the ranking helpers (pure logic)."""

from __future__ import annotations

import pytest

from lightrag_ray.core.keywords import Keywords, keywords_without_llm, parse_keywords
from lightrag_ray.core.ranking import graph_chunk_ranking, interleave, local_relation_order, relevance_ranking


@pytest.mark.parametrize("answer, expected", [
    ('{"high_level_keywords": ["family", "poverty"], "low_level_keywords": ["Tiny Tim"]}',
     Keywords(["family", "poverty"], ["Tiny Tim"])),
    ('Sure!\n```json\n{"high_level_keywords": ["ghosts"], "low_level_keywords": ["Marley", "Marley", " "]}\n```',
     Keywords(["ghosts"], ["Marley"])),
    ('{"high_level_keywords": ["charity"], "low_level_keywords": ["Fred"],}',  # trailing comma: broken JSON
     Keywords(["charity"], ["Fred"])),
    ("high_level_keywords: none that I can see", Keywords([], [])),
    ("", Keywords([], [])),
])
def test_parse_keywords(answer, expected):
    found = parse_keywords(answer)
    assert (found.high, found.low) == (expected.high, expected.low)


def test_keywords_without_llm_take_names_from_the_question():
    found = keywords_without_llm("What did Jacob Marley tell Ebenezer Scrooge?")
    assert found.high == ["What did Jacob Marley tell Ebenezer Scrooge?"]
    assert {"Jacob Marley", "Ebenezer Scrooge"} <= set(found.low)
    assert keywords_without_llm("why?").low == ["why?"]


def test_interleave_round_robin_first_occurrence_wins():
    a = [{"id": 1}, {"id": 2}, {"id": 3}]
    b = [{"id": 2, "from": "b"}, {"id": 4}]
    assert [x["id"] for x in interleave(a, b)] == [1, 2, 4, 3]
    assert interleave(a, b)[1]["from"] == "b"  # b's id 2 (position 0) comes before a's (position 1)


def test_graph_chunks_follow_the_best_citing_item_then_citations():
    entities = [{"id": "e1", "source_ids": ["c2", "c1"]}, {"id": "e2", "source_ids": ["c3", "c1"]}]
    relations = [{"id": "r1", "source_ids": ["c3"]}]
    # interleave order: e1, r1, e2 -> c2/c1 (rank 0; c1 cited 2x), c3 (rank 1)
    assert graph_chunk_ranking(entities, relations) == ["c1", "c2", "c3"]


def test_relevance_ranking_weighs_similarity_against_the_place_in_the_graph_order():
    similarity = {"a": 0.30, "b": 0.50, "c": 0.31, "d": 0.40}
    # scores 0.30, 0.50 - 0.05 ln 2 = 0.465, 0.31 - 0.05 ln 3 = 0.255, 0.40 - 0.05 ln 4 = 0.331
    assert relevance_ranking(["a", "b", "c", "d"], similarity, floor=0.0) == ["b", "d", "a", "c"]
    assert relevance_ranking(["a", "b", "c", "d"], similarity, floor=0.0, weight=1.0) == ["a", "b", "c", "d"]
    # unknown similarity: the floor, then the graph order decides
    assert relevance_ranking(["x", "y", "b"], {"b": 0.2}, floor=0.25) == ["x", "y", "b"]
    assert relevance_ranking(["x", "y", "b"], {"b": 0.4}, floor=0.25) == ["b", "x", "y"]
    assert relevance_ranking([], {}, floor=0.0) == []


def test_local_relation_order_joined_first_then_endpoint_rank_then_weight():
    order = local_relation_order(["x", "y"])
    ranked = sorted([("a", "y", 9.0), ("a", "x", 1.0), ("b", "x", 5.0), ("x", "y", 0.5)], key=lambda e: order(*e))
    assert ranked == [("x", "y", 0.5), ("b", "x", 5.0), ("a", "x", 1.0), ("a", "y", 9.0)]
