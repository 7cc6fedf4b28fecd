"""The ``walk`` mode on in-memory stores: the shard hop, the PageRank and the ranking, no Ray."""

from __future__ import annotations

import asyncio
import math
import re
from pathlib import Path

import pytest

from lightrag_ray.core.names import entity_key
from lightrag_ray.core.walk import split_restart, walk_scores
from lightrag_ray.query.walk import WalkWeights, link_names, passage_seeds, walk_ranking
from tests.test_query_engine import _engine, retrieve

BRIDGE = [
    "Dark Harbour is a film directed by Mara Lindqvist.",
    "Mara Lindqvist was raised in Tromso.",
    "Tromso is a city in the north of Norway.",
    "Where did the storm grow? The director asked.",
    "The film festival of Cannes grew up around directors.",
    "Owen Hale directed the film Blue Meadow.",
]
QUESTION = "Where did the director of the film Dark Harbour grow up?"
BOOK = Path(__file__).resolve().parents[1] / "lightrag_ray" / "data" / "christmas_carol.txt"


@pytest.fixture(scope="module")
def book_passages() -> list[str]:
    """Passages of three sentences from the bundled book (its first ~400 sentences)."""
    text = BOOK.read_text(encoding="utf-8")
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if 40 < len(s.strip()) < 300][:400]
    return [" ".join(sentences[i:i + 3]) for i in range(0, len(sentences), 3)]


def test_the_walk_reaches_a_passage_linked_to_a_seed_by_a_shared_entity():
    links = {"mara": ["p1", "p2"], "tromso": ["p2", "p3"], "owen": ["p4", "p5"]}
    walked = walk_scores(links, {}, {"p1": 1.0})
    scores = walked.passages
    assert scores["p2"] > scores["p3"] > 0.0 and scores.get("p4", 0.0) == 0.0 == scores.get("p5", 0.0)
    assert walked.entities["mara"] > walked.entities["tromso"] > 0.0 == walked.entities["owen"]


def test_entity_seeds_and_isolated_seed_passages_count():
    scores = walk_scores({"mara": ["p1", "p2"]}, {"mara": 1.0}, {"lonely": 1.0}).passages
    assert scores["p1"] == scores["p2"] > 0.0 and scores["lonely"] > 0.0
    nothing = walk_scores({}, {}, {})
    assert nothing.passages == nothing.entities == {} == walk_scores({"mara": ["p1"]}, {"other": 1.0}, {}).passages


def test_the_named_entity_gets_half_the_restart_mass_against_five_seed_passages():
    links = {"named": ["p_named"], "shared": ["p1", "p2"]}
    entities, passages = {"named": 1.0}, {f"p{i}": 1.0 for i in range(1, 6)}
    assert split_restart(entities, passages) == ({"named": 0.5}, {p: 0.1 for p in passages})
    assert split_restart({}, passages) == ({}, passages) and split_restart(entities, {}) == (entities, {})
    unsplit = walk_scores(links, entities, passages).passages
    split = walk_scores(links, *split_restart(entities, passages)).passages
    assert unsplit["p_named"] < min(unsplit[p] for p in passages)  # one seed among six: outranked by all passages
    assert split["p_named"] > max(split[p] for p in passages)


def test_one_shard_round_gives_the_entities_of_passages_and_keys_and_skips_hubs():
    engine, graph = _engine(BRIDGE, num_shards=3)
    chunks = asyncio.run(engine.vectors.search("chunks", engine.embedder.embed_now([BRIDGE[0]]), 1, ["id"]))[0]
    graph.calls.clear()
    rows = asyncio.run(graph.passage_entities([chunks[0]["id"]], [entity_key("Owen Hale")], 1))
    by_key = {row["key"]: row for row in rows}
    assert set(by_key) == {entity_key("Mara Lindqvist"), entity_key("Dark Harbour"), entity_key("Owen Hale")}
    mara, owen = by_key[entity_key("Mara Lindqvist")], by_key[entity_key("Owen Hale")]
    assert (mara["n_chunks"], mara["chunks"]) == (2, [])  # past max_chunks: not expanded
    assert owen["n_chunks"] == 1 and owen["chunks"] != [chunks[0]["id"]] and len(rows) == 3
    assert sorted(graph.calls) == [("passage_entities", 0), ("passage_entities", 1), ("passage_entities", 2)]


def test_walk_ranks_the_bridge_passage_that_vector_search_misses():
    engine, _ = _engine(BRIDGE)
    titles = {text: i for i, text in enumerate(BRIDGE)}
    naive, _, _ = retrieve(engine, QUESTION, mode="naive", chunk_top_k=6)
    walk, keywords, _ = retrieve(engine, QUESTION, mode="walk", chunk_top_k=3)
    assert keywords.low == ["Dark Harbour"]
    assert {0, 1} <= {titles[c["text"]] for c in walk.chunks}  # the film's passage and the bridge
    assert titles[naive.chunks[-1]["text"]] == 1  # shares no word with the question: last by vectors


def test_the_walk_context_describes_the_entities_it_visited_and_the_relations_among_them():
    engine, graph = _engine(BRIDGE)
    graph.calls.clear()
    context, _, _ = retrieve(engine, QUESTION, mode="walk", chunk_top_k=3, top_k=4)
    names = [e["name"] for e in context.entities]
    assert len(names) <= 4 and {"Dark Harbour", "Mara Lindqvist"} <= set(names)  # the named film and the bridge
    assert "Owen Hale" not in names  # in no passage the walk reached
    ends = [{r["source"], r["target"]} for r in context.relations]
    assert {"Dark Harbour", "Mara Lindqvist"} in ends and ends[0] <= set(names)  # relations among them first
    assert "Mara Lindqvist" in context.sections["entities"] and "Dark Harbour" in context.sections["relations"]
    # one graph round more than the walk's: the context's entities, read beside the passages
    assert [m for m, _ in graph.calls].count("neighborhood") == len({c for m, c in graph.calls if m == "neighborhood"})


def test_dense_passages_join_the_restart_vector_by_similarity():
    hits = [{"id": f"p{i}", "score": 0.9 - 0.1 * i} for i in range(6)]
    assert passage_seeds(hits, WalkWeights(seed_passages=2)) == pytest.approx({"p0": 1.0, "p1": math.exp(-2)})
    dense = passage_seeds(hits, WalkWeights(seed_passages=2, dense_pool=5, dense_weight=0.1))
    assert list(dense) == ["p0", "p1", "p2", "p3", "p4"]  # p5: outside the pool
    assert dense["p0"] == pytest.approx(1.1) and dense["p2"] == pytest.approx(0.05) and dense["p4"] == 0.0


def test_a_names_nearest_entity_joins_its_own_only_when_asked():
    """"Drew Fuller" has its own entity, but the passage about him names "Andrew Alan" (HotpotQA)."""
    candidates = [("drew fuller", "andrew alan", 0.6), ("nobody", "somebody", 0.4)]
    found = {"drew fuller", "andrew alan", "somebody"}
    assert link_names(candidates, found) == {"drew fuller": 1.0, "somebody": 0.4}
    assert link_names(candidates, found, nearest_weight=0.5) == pytest.approx(
        {"drew fuller": 1.0, "andrew alan": 0.3, "somebody": 0.4})


def test_the_ends_of_the_questions_best_relations_seed_the_walk():
    engine, _ = _engine(BRIDGE)
    question = "Which city raised the director?"
    vector, no_names = engine.embedder.embed_now([question])[0], engine.embedder.embed_now([])

    def ranking(weights: WalkWeights) -> tuple[list[str], list[str]]:
        walked = asyncio.run(walk_ranking(engine.vectors, engine.graph, vector, [], no_names, 6, weights))
        texts = {row["id"]: row["text"] for row in asyncio.run(engine.vectors.get("chunks", walked.chunk_ids, ["id", "text"]))}
        return [texts[c] for c in walked.chunk_ids], walked.entity_keys

    plain, plain_entities = ranking(WalkWeights(seed_passages=1))
    seeded, seeded_entities = ranking(WalkWeights(seed_passages=1, relation_seeds=2, relation_weight=1.0))
    assert plain_entities == []  # the best passage names nobody: the walk has nowhere to go
    assert {entity_key("Mara Lindqvist"), entity_key("Tromso")} <= set(seeded_entities)  # the relations' ends
    assert seeded.index(BRIDGE[0]) < plain.index(BRIDGE[0])  # the film, one step from the director's passage


def test_walk_is_the_default_mode_everywhere():
    from lightrag_ray.cli.main import MODES as CLI_MODES
    from lightrag_ray.query.engine import DEFAULT_MODE, QueryParam
    from lightrag_ray.serve.api_models import MODES as SERVE_MODES

    assert DEFAULT_MODE == QueryParam().mode == CLI_MODES[0] == "walk" and "walk" in SERVE_MODES


def test_walk_retrieves_the_same_passages_over_any_number_of_shards(book_passages):
    """The shards' rows of a walk's hop arrive sorted by key, so ties and float sums of the
    PageRank do not depend on how many shards answered (a reshard changes nothing)."""
    questions = ["Who is Scrooge?", "What did Marley say?", "Where does Bob Cratchit live?", "Who is Tiny Tim?",
                 "What is Fezziwig's ball?", "Who is Belle?", "What does the Ghost of Christmas Past show?",
                 "Why is Marley in chains?"]
    found = {}
    for shards in (1, 2, 8):
        engine, _ = _engine(book_passages, num_shards=shards)
        found[shards] = [[c["text"] for c in retrieve(engine, q, mode="walk")[0].chunks] for q in questions]
    assert all(found[1]) and found[2] == found[1] and found[8] == found[1]
