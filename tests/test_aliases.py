"""Name aliases: the rules (core.alias_rules), the links a shard keeps and saves
(core.graph.aliases, storage.graph.snapshot), the alias pass (index.stages.aliases) on in-process
shards, and the walk following a link to a passage it could not reach before."""

from __future__ import annotations

import asyncio

import pytest

from lightrag_ray.core.alias_rules import (
    MAX_BLOCK,
    MAX_FREQUENCY,
    MAX_LINKS,
    Name,
    alias_reason,
    block_keys,
    find_aliases,
    lexical_reason,
    words,
)
from lightrag_ray.core.graph.shard_graph import ShardGraph
from lightrag_ray.core.names import entity_key, normalize_name
from lightrag_ray.core.records import EntityRecord
from lightrag_ray.index.stages.aliases import link_aliases
from lightrag_ray.index.pipeline import IndexRun
from lightrag_ray.service.indexing import index_paths
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.graph.reader import ShardReader
from lightrag_ray.storage.graph.writer import GraphRouter
from lightrag_ray.storage.graph.snapshot import compact, load_snapshot, save_snapshot, snapshot_folder
from lightrag_ray.storage.workspace import Workspace
from tests.memory_stores import MemoryGraph
from tests.test_index_pipeline import _write
from tests.test_query_engine import _engine, retrieve


def name(text: str, *chunks: str) -> Name:
    return Name(entity_key(text), normalize_name(text), frozenset(chunks or ("c0",)))


@pytest.mark.parametrize(("a", "b", "reason"), [
    ("Marley", "Jacob Marley", "contained"),
    ("Old Jacob Marley", "Jacob Marley", "contained"),
    ("Christopher Nolan", "Christopher Edward Nolan", "contained"),
    ("Queen Elizabeth II", "Elizabeth II", "contained"),
    ("J. R. R. Tolkien", "John Ronald Reuel Tolkien", "initials"),
    ("USA", "United States of America", "acronym"),
    ("Usa", "United States of America", None),  # not written as an acronym
    ("Paul Allen", "Ray Allen", None),
    ("New York", "New York City", None),  # the last words differ
    ("Oxford", "University of Oxford", None),  # the complement of "of" is another entity
    ("J. Nolan", "Christopher Nolan", None),
    ("Jacob Marley", "jacob marley", None),  # one entity already: same key
    ("毛泽东", "毛主席", None),  # no rule for names written without spaces
])
def test_the_rules_link_name_variants_and_only_them(a, b, reason):
    assert lexical_reason(name(a), name(b)) == reason == lexical_reason(name(b), name(a))


def test_a_shortened_form_needs_a_shared_passage_and_a_similar_frequency_unless_it_drops_only_middle_words():
    assert alias_reason(name("Helen Hunt", "c1"), name("Helen Elizabeth Hunt", "c2")) == "contained"
    assert alias_reason(name("Bradshaw", "c1"), name("Matthew Bradshaw", "c2")) is None
    assert alias_reason(name("Bradshaw", "c1", "c3"), name("Matthew Bradshaw", "c1")) == "contained"
    assert alias_reason(name("UK", "c1"), name("United Kingdom", "c2")) is None
    assert alias_reason(name("UK", "c1"), name("United Kingdom", "c1")) == "acronym"
    common = name("American", *(f"c{i}" for i in range(MAX_FREQUENCY + 2)))  # in 6 passages, the long form in 1
    assert alias_reason(common, name("Asian American", "c1")) is None
    assert alias_reason(common, name("Latin American", "c1", "c2")) == "contained"


def test_variants_share_a_block_and_chinese_names_have_none():
    assert block_keys(entity_key("Marley")) & block_keys(entity_key("Old Jacob Marley")) == {"w:marley"}
    assert block_keys(entity_key("USA")) & block_keys(entity_key("United States of America")) == {"i:usa"}
    assert words(entity_key("Robert Downey Jr.")) == ["robert", "downey"]
    assert block_keys(entity_key("北京大学")) == set() and block_keys(entity_key("1999")) == set()


def _blocks(names: list[Name]) -> dict[str, list[Name]]:
    blocks: dict[str, list[Name]] = {}
    for n in names:
        for block in block_keys(n.key):
            blocks.setdefault(block, []).append(n)
    return blocks


def pair(a: Name, b: Name) -> tuple[str, str]:
    return (min(a.key, b.key), max(a.key, b.key))


def test_an_ambiguous_variant_is_linked_to_none_and_loses_its_earlier_links():
    smiths = [name(f"{first} Smith") for first in ("Adam", "John", "Will", "Maggie", "Patti")]
    short = name("Smith")
    early = find_aliases({short.key, smiths[0].key}, _blocks([short, smiths[0]]))
    assert early == {pair(short, smiths[0]): "contained"}
    everyone = [short, *smiths]
    late = find_aliases({s.key for s in smiths[1:]}, _blocks(everyone))
    assert len(smiths) > MAX_LINKS and late == {pair(short, s): None for s in smiths}  # unlink the early one too
    assert find_aliases({n.key for n in everyone}, _blocks(everyone)) == late  # one batch or two: no link


def test_a_hub_block_is_skipped_and_forms_of_one_name_all_link():
    marleys = [name("Marley"), name("Jacob Marley"), name("Old Jacob Marley")]
    crowd = [name(f"Person{i} Marley") for i in range(MAX_BLOCK)]
    assert find_aliases({n.key for n in marleys}, _blocks(marleys + crowd)) == {}  # w:marley is a hub
    assert find_aliases({n.key for n in marleys}, _blocks(marleys)) == {
        pair(marleys[0], marleys[1]): "contained", pair(marleys[0], marleys[2]): "contained",
        pair(marleys[1], marleys[2]): "contained"}


def _records(chunk: str, *names: str) -> list[EntityRecord]:
    return [EntityRecord(n, "person", f"{n} appears in {chunk}.", chunk, f"{chunk}.txt") for n in names]


def _aliases(graph: MemoryGraph, key: str) -> list[str]:
    rows = asyncio.run(graph.passage_entities([], [key], 100))
    return rows[0]["aliases"] if rows else []


def test_the_pass_links_new_entities_on_both_shards_and_relinks_after_a_removal():
    graph = MemoryGraph(num_shards=3)
    graph.apply(_records("c1", "Marley", "Ebenezer Scrooge"), [])
    assert link_aliases(graph) == 0  # nothing to link yet
    graph.apply(_records("c2", "Jacob Marley", "Marley", "Scrooge", "Ebenezer Scrooge"), [])
    assert link_aliases(graph) == 4  # two links, stored at both ends
    assert link_aliases(graph) == 0  # nothing new since
    marley, jacob = entity_key("Marley"), entity_key("Jacob Marley")
    assert _aliases(graph, marley) == [jacob] and _aliases(graph, jacob) == [marley]
    assert _aliases(graph, entity_key("Scrooge")) == [entity_key("Ebenezer Scrooge")]
    for shard in graph.shards:
        shard.remove_chunks({"c2"})  # Jacob Marley and Scrooge are gone, and so are their own link ends
    assert _aliases(graph, jacob) == [] and _aliases(graph, entity_key("Scrooge")) == []
    assert _aliases(graph, marley) == [jacob]  # the other end stays; readers skip an entity that is not there
    graph.apply(_records("c2", "Jacob Marley", "Marley"), [])
    assert link_aliases(graph) == 1 and _aliases(graph, jacob) == [marley]  # linked again: its own end


def test_readers_see_links_once_the_job_is_published_and_a_rollback_undoes_them():
    shard = ShardGraph(0, 1)
    shard.apply([{"key": entity_key(n), "chunk_id": "c1", "type": "person", "description": "d", "name": n}
                 for n in ("Marley", "Jacob Marley")], [])
    marley, jacob = entity_key("Marley"), entity_key("Jacob Marley")
    for finish, expected in ((shard.rollback, []), (shard.publish, [jacob])):
        shard.begin()
        assert shard.set_aliases([(marley, jacob, "contained")]) == 2
        assert shard.published.passage_entities([], [marley], 10)[0]["aliases"] == []  # readers: before the job
        finish()
        assert shard.published.passage_entities([], [marley], 10)[0]["aliases"] == expected


def test_links_are_saved_in_deltas_and_bases_and_load_back(tmp_path):
    workspace = Workspace(str(tmp_path / "ws"))
    shard = ShardGraph(0, 1)
    rows = [{"key": entity_key(n), "chunk_id": c, "type": "person", "description": "d", "name": n}
            for c, n in (("c1", "Marley"), ("c2", "Jacob Marley"), ("c2", "USA"), ("c3", "United States of America"))]
    shard.apply(rows, [])
    marley, jacob, usa, america = (entity_key(r["name"]) for r in rows)
    shard.set_aliases([(marley, jacob, "contained")])
    assert save_snapshot(workspace, shard, 1) == "base"
    shard.mark_saved()
    shard.set_aliases([(usa, america, "acronym"), (marley, jacob, None)])
    assert save_snapshot(workspace, shard, 2) == "delta"
    shard.mark_saved()

    def links(version: int | None = None) -> dict[str, dict[str, str]]:
        fresh = ShardGraph(0, 1)
        load_snapshot(workspace, fresh, version)
        return fresh.aliases.links

    assert links(1) == {marley: {jacob: "contained"}, jacob: {marley: "contained"}}
    expected = {usa: {america: "acronym"}, america: {usa: "acronym"}}
    assert links(2) == expected == shard.aliases.links
    compact(workspace, snapshot_folder(0, 1), 2)  # the delta folded into a new base
    assert links(2) == expected


def test_the_walk_follows_an_alias_to_the_bridge_passage():
    passages = ["Dark Harbour is a film by Lindqvist.", "Mara Lindqvist was raised in Tromso.",
                "Mara Lindqvist is a director. Lindqvist lives in Malmo.",
                "Owen Hale directed the film Blue Meadow.", "Ada Brook wrote songs about storms.",
                "Ivo Stern built boats on a quiet lake.", "Red Coast is a novel about sailors.",
                "Children sail in Bergen.", "The director Tove Lund lives in Oslo."]
    engine, graph = _engine(passages, num_shards=3)
    question = "Where did the director of Dark Harbour grow up?"

    def walk() -> list[int]:
        context, _, _ = retrieve(engine, question, mode="walk", chunk_top_k=4)
        return [passages.index(c["text"]) for c in context.chunks]

    assert 1 not in walk()  # from "Lindqvist" to the passage about "Mara Lindqvist": four steps, too far
    assert link_aliases(graph) == 2  # they share passage 2
    assert 1 in walk()  # now two, as for one name


def test_an_index_run_links_the_variants_it_brings_and_the_links_load_from_disk(ray_cluster, llm, make_settings, tmp_path):
    settings = make_settings(graph={"num_shards": 3})
    corpus = tmp_path / "corpus"
    _write(corpus, "a.txt", "Marley was dead to begin with. Scrooge signed the register of his burial.")
    first = index_paths([str(corpus)], settings, progress=None)
    _write(corpus, "b.txt", "Jacob Marley was the partner of Ebenezer Scrooge. Marley left Scrooge his house.")
    second = index_paths([str(corpus)], settings, progress=None)
    assert (first.alias_links, second.alias_links) == (0, 4)  # two links, each stored at both ends

    router = GraphRouter(settings.workspace, settings.graph)  # fresh shards: state from the files
    try:
        reader = ShardReader(settings.workspace, settings.graph.num_shards)
        keys = [entity_key(n) for n in ("Marley", "Jacob Marley", "Scrooge", "Ebenezer Scrooge")]
        rows = {row["key"]: row["aliases"] for row in asyncio.run(reader.passage_entities([], keys, 10))}
    finally:
        router.close()
    assert rows == {keys[0]: [keys[1]], keys[1]: [keys[0]], keys[2]: [keys[3]], keys[3]: [keys[2]]}


def test_a_workspace_built_before_aliases_gets_them_all_at_its_next_run(ray_cluster, llm, make_settings, tmp_path, monkeypatch):
    settings = make_settings()
    corpus = tmp_path / "corpus"
    _write(corpus, "a.txt", "Jacob Marley was the partner of Ebenezer Scrooge. Marley left Scrooge his house.")
    every_stage = IndexRun.stages
    with monkeypatch.context() as older:  # a version without the alias pass
        older.setattr(IndexRun, "stages", lambda run: [stage for stage in every_stage(run) if stage.name != "aliases"])
        index_paths([str(corpus)], settings, progress=None)
    assert not manifests.load(Workspace(settings.workspace)).aliases_linked
    _write(corpus, "b.txt", "Fred Holywell invited Bob Cratchit to dinner.")
    report = index_paths([str(corpus)], settings, progress=None)
    assert report.alias_links == 4 and manifests.load(Workspace(settings.workspace)).aliases_linked
