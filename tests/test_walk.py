"""The ``walk`` mode on in-memory stores: the shard hop, the PageRank and the ranking, no Ray."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from lightrag_ray.core.names import entity_key
from lightrag_ray.core.walk import passage_walk, split_restart
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
    scores = passage_walk(links, {}, {"p1": 1.0})
    assert scores["p2"] > scores["p3"] > 0.0 and scores.get("p4", 0.0) == 0.0 == scores.get("p5", 0.0)


def test_entity_seeds_and_isolated_seed_passages_count():
    scores = passage_walk({"mara": ["p1", "p2"]}, {"mara": 1.0}, {"lonely": 1.0})
    assert scores["p1"] == scores["p2"] > 0.0 and scores["lonely"] > 0.0
    assert passage_walk({}, {}, {}) == {} and passage_walk({"mara": ["p1"]}, {"other": 1.0}, {}) == {}


def test_the_named_entity_gets_half_the_restart_mass_against_five_seed_passages():
    links = {"named": ["p_named"], "shared": ["p1", "p2"]}
    entities, passages = {"named": 1.0}, {f"p{i}": 1.0 for i in range(1, 6)}
    assert split_restart(entities, passages) == ({"named": 0.5}, {p: 0.1 for p in passages})
    assert split_restart({}, passages) == ({}, passages) and split_restart(entities, {}) == (entities, {})
    unsplit, split = passage_walk(links, entities, passages), passage_walk(links, *split_restart(entities, passages))
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
