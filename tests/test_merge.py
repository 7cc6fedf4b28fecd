"""LightRAG's merge rules on ShardGraph (pure Python), sharding invariance and snapshots."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from lightrag_ray.core.ids import entity_id, relation_id, shard_of
from lightrag_ray.core.graph.shard_graph import DESCRIPTION_SEP, ShardGraph, fragments_hash
from lightrag_ray.core.names import entity_key
from lightrag_ray.core.records import EntityRecord, RelationRecord
from lightrag_ray.core.tokenizer import count_tokens
from lightrag_ray.core.graph.routing import entity_rows, relation_rows
from lightrag_ray.storage.graph.snapshot import load_snapshot, save_snapshot
from lightrag_ray.storage.workspace import Workspace

Rows = tuple[list[dict[str, Any]], list[dict[str, Any]]]


def ent(name: str, chunk: str, type_: str = "person", desc: str | None = None, file_path: str = "f.txt"):
    return EntityRecord(name=name, type=type_, description=desc if desc is not None else f"{name} in {chunk}",
                        chunk_id=chunk, file_path=file_path)


def rel(source: str, target: str, chunk: str, keywords: str = "knows", desc: str | None = None,
        weight: float = 1.0, file_path: str = "f.txt"):
    return RelationRecord(source=source, target=target, keywords=keywords,
                          description=desc if desc is not None else f"{source}-{target} in {chunk}",
                          chunk_id=chunk, weight=weight, file_path=file_path)


def rows(entities: list[EntityRecord], relations: list[RelationRecord] = ()) -> Rows:
    return entity_rows(list(entities)), relation_rows(list(relations))


def route(entities: list[EntityRecord], relations: list[RelationRecord], num_shards: int) -> list[Rows]:
    """Per-shard rows exactly as GraphRouter.apply sends them."""
    per_shard: list[Rows] = [([], []) for _ in range(num_shards)]
    for row in entity_rows(entities):
        per_shard[shard_of(row["key"], num_shards)][0].append(row)
    for row in relation_rows(relations):
        if row["source_key"] == row["target_key"]:
            continue
        for i in {shard_of(row["source_key"], num_shards), shard_of(row["target_key"], num_shards)}:
            per_shard[i][1].append(row)
    return per_shard


def graph_of(entities: list[EntityRecord], relations: list[RelationRecord] = (), **kwargs) -> ShardGraph:
    graph = ShardGraph(0, 1, **kwargs)
    graph.apply(*rows(entities, relations))
    return graph


def by_key(export: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return {e["key"]: e for e in export["entities"]}


def the_relation(graph: ShardGraph, a: str, b: str) -> dict[str, Any]:
    [found] = [r for r in graph.published.export()["relations"] if {r["source_key"], r["target_key"]} == {a, b}]
    return found


def random_corpus(seed: int, n_chunks: int = 30) -> tuple[list[EntityRecord], list[RelationRecord]]:
    """Entities and relations of many chunks: repeated names in several spellings, relation
    endpoints that were never extracted, duplicate mentions, self-relations."""
    rng = random.Random(seed)
    names = [f"Person {i}" for i in range(25)] + ["Acme Corp", "acme corp", "ACME CORP", "Paris", "paris"]
    types = ["person", "organization", "location", "concept"]
    entities, relations = [], []
    for c in range(n_chunks):
        chunk = f"chunk-{rng.getrandbits(64):016x}"
        in_chunk = rng.sample(names, rng.randint(1, 6))
        for name in in_chunk:
            for _ in range(rng.choice([1, 1, 2])):
                entities.append(ent(name, chunk, rng.choice(types), f"{name} fact {rng.randint(0, 4)}",
                                    file_path=f"doc{c % 4}.txt"))
        for _ in range(rng.randint(0, 5)):
            source = rng.choice(in_chunk)
            target = rng.choice(names + ["Ghost Endpoint", "Other Ghost"])
            relations.append(rel(source, target, chunk, rng.choice(["works with", "rivals, enemies", "visits"]),
                                 f"{source}/{target} story {rng.randint(0, 3)}", rng.choice([0.5, 1.0, 2.0, 3.5]),
                                 file_path=f"doc{c % 4}.txt"))
    return entities, relations


# ---- (a) idempotent per chunk ------------------------------------------------------------
def test_applying_the_same_rows_twice_changes_nothing():
    entities, relations = random_corpus(1)
    graph = graph_of(entities, relations)
    export, counts = graph.published.export(), graph.counts()
    assert counts["entities"] > 20 and counts["relations"] > 10
    graph.apply(*rows(entities, relations))
    assert graph.published.export() == export
    assert graph.counts() == counts
    # re-delivering single chunks again, one at a time, changes nothing either
    for chunk in sorted({e.chunk_id for e in entities})[:5]:
        graph.apply(*rows([e for e in entities if e.chunk_id == chunk],
                          [r for r in relations if r.chunk_id == chunk]))
    assert graph.published.export() == export


def test_redelivered_chunk_replaces_what_it_said():
    graph = graph_of([ent("Alice", "c1", "person", "old")])
    graph.apply(*rows([ent("Alice", "c1", "person", "new")]))
    assert graph.live.entity("alice")["description"] == "new"


# ---- (b) type = majority vote ------------------------------------------------------------
def test_type_is_the_majority_vote():
    graph = graph_of([ent("Alice", "c1", "person"), ent("Alice", "c2", "organization"),
                      ent("Alice", "c3", "person"), ent("Alice", "c4", "location")])
    assert graph.live.entity("alice")["type"] == "person"


def test_type_tie_goes_to_the_lexically_smallest():
    graph = graph_of([ent("Bob", "c1", "person"), ent("Bob", "c2", "location"),
                      ent("Bob", "c3", "organization"), ent("Bob", "c4", "person"),
                      ent("Bob", "c5", "location")])
    assert graph.live.entity("bob")["type"] == "location"  # person 2, location 2: "location" < "person"


def test_display_name_is_the_most_frequent_spelling():
    graph = graph_of([ent("ACME", "c1"), ent("Acme", "c2"), ent("Acme", "c3")],
                     [rel("acme", "Bob", "c4")])
    view = graph.live.entity("acme")
    assert view["name"] == "Acme"
    assert view["id"] == entity_id("acme")
    tie = graph_of([ent("Zeta", "c1"), ent("ZETA", "c2")])
    assert tie.live.entity("zeta")["name"] == "ZETA"  # tie -> lexically smallest


# ---- (c) relation weight and keywords ----------------------------------------------------------
def test_relation_weight_sums_distinct_chunks_and_keywords_union():
    graph = graph_of([], [
        rel("Alice", "Bob", "c1", "war, peace", weight=2.0),
        rel("Alice", "Bob", "c1", "peace,treaty", weight=5.0),  # same chunk: counted once, max weight
        rel("Bob", "Alice", "c2", "war, alliance", weight=1.5),  # other direction: same relation
        rel("Alice", "Bob", "c3", " alliance ,  ", weight=0.5),
    ])
    assert graph.counts() == {"entities": 2, "relations": 1}
    view = the_relation(graph, "alice", "bob")
    assert view["weight"] == pytest.approx(5.0 + 1.5 + 0.5)
    keywords = view["keywords"].split(", ")
    assert len(keywords) == len(set(keywords))
    assert set(keywords) == {"war", "peace", "treaty", "alliance"}
    assert view["source_ids"] == ["c1", "c2", "c3"]
    assert view["id"] == relation_id("alice", "bob") == relation_id("bob", "alice")
    assert (view["source_key"], view["target_key"]) == ("alice", "bob")
    assert (view["source"], view["target"]) == ("Alice", "Bob")


# ---- (d) descriptions ------------------------------------------------------------------------------
def test_descriptions_deduplicated_in_chunk_order():
    graph = graph_of([
        ent("Eve", "c3", desc="third"), ent("Eve", "c1", desc="first"),
        ent("Eve", "c2", desc="first "), ent("Eve", "c2", desc="second"), ent("Eve", "c4", desc="  "),
    ])
    assert graph.live.entity("eve")["description"] == DESCRIPTION_SEP.join(["first", "second", "third"])
    assert graph.live.entity_fragments("eve") == ["first", "second", "third"]
    assert graph.live.entity("eve")["source_ids"] == ["c1", "c2", "c3", "c4"]


def test_result_does_not_depend_on_arrival_order():
    entities, relations = random_corpus(2)
    expected = graph_of(entities, relations).published.export()
    rng = random.Random(0)
    for _ in range(3):
        # all rows at once, shuffled
        e, r = entities[:], relations[:]
        rng.shuffle(e)
        rng.shuffle(r)
        assert graph_of(e, r).published.export() == expected
        # chunk by chunk, chunks in shuffled order
        chunks = sorted({x.chunk_id for x in entities} | {x.chunk_id for x in relations})
        rng.shuffle(chunks)
        graph = ShardGraph(0, 1)
        for chunk in chunks:
            graph.apply(*rows([x for x in e if x.chunk_id == chunk], [x for x in r if x.chunk_id == chunk]))
        assert graph.published.export() == expected


# ---- (e) endpoints never extracted as entities -----------------------------------------------------
def test_relation_endpoints_become_unknown_entities():
    graph = graph_of([ent("Alice", "c1", "person")], [rel("Alice", "Zed Corp", "c2", weight=2.0)])
    entities = by_key(graph.published.export())
    assert set(entities) == {"alice", "zed corp"}
    zed = entities["zed corp"]
    assert zed["type"] == "unknown"
    assert zed["name"] == "Zed Corp"
    assert zed["description"] == ""
    assert zed["source_ids"] == ["c2"]
    assert zed["degree"] == 1
    assert entities["alice"]["type"] == "person"
    assert entities["alice"]["source_ids"] == ["c1"]
    assert entities["alice"]["degree"] == 1


# ---- (f) removing chunks ------------------------------------------------------------------------
def test_remove_chunks_drops_exactly_their_contributions():
    graph = graph_of(
        [ent("Alice", "c1", desc="from one"), ent("Alice", "c2", desc="from two"), ent("Bob", "c2")],
        [rel("Alice", "Bob", "c2"), rel("Alice", "Carol", "c1", weight=3.0), rel("Alice", "Carol", "c2", weight=1.0)],
    )
    graph.take_changes()
    graph.remove_chunks({"c2"})
    entities = by_key(graph.published.export())
    assert set(entities) == {"alice", "carol"}
    assert entities["alice"]["description"] == "from one"
    assert entities["alice"]["source_ids"] == ["c1"]
    assert entities["alice"]["degree"] == 1
    carol = the_relation(graph, "alice", "carol")
    assert carol["weight"] == 3.0 and carol["source_ids"] == ["c1"]
    assert graph.counts() == {"entities": 2, "relations": 1}

    changes = graph.take_changes()
    assert set(changes["removed"]) == {entity_id("bob"), relation_id("alice", "bob")}
    assert [e["key"] for e in changes["entities"]] == ["alice", "carol"]
    assert [r["id"] for r in changes["relations"]] == [relation_id("alice", "carol")]
    assert graph.take_changes() == {"entities": [], "relations": [], "removed": []}

    graph.remove_chunks({"c1"})
    assert graph.counts() == {"entities": 0, "relations": 0}
    assert graph.held_keys() == []
    assert set(graph.take_changes()["removed"]) == {
        entity_id("alice"), entity_id("carol"), relation_id("alice", "carol")}


def test_remove_then_reapply_restores_the_graph():
    entities, relations = random_corpus(3)
    graph = graph_of(entities, relations)
    expected = graph.published.export()
    gone = {e.chunk_id for e in entities[::3]}
    graph.remove_chunks(gone)
    assert graph.published.export() != expected
    without = graph_of([e for e in entities if e.chunk_id not in gone],
                       [r for r in relations if r.chunk_id not in gone])
    assert graph.published.export() == without.published.export()
    graph.apply(*rows([e for e in entities if e.chunk_id in gone], [r for r in relations if r.chunk_id in gone]))
    assert graph.published.export() == expected


# ---- (g) summaries ------------------------------------------------------------------------------
def test_summaries_replace_long_descriptions():
    graph = graph_of(
        [ent("Alice", f"c{i}", desc=f"Alice fact {i}") for i in range(5)] + [ent("Bob", "c0", desc="short")],
        [rel("Alice", "Bob", f"c{i}", desc=f"story {i}") for i in range(4)],
    )
    pending = graph.pending_summaries(3, 1000, count_tokens)
    assert sorted((p["kind"], p["name"]) for p in pending) == [("entity", "Alice"), ("relation", "Alice - Bob")]
    alice = next(p for p in pending if p["kind"] == "entity")
    assert alice["fragments"] == [f"Alice fact {i}" for i in range(5)]
    assert alice["hash"] == fragments_hash(alice["fragments"])

    graph.add_summaries({p["hash"]: f"summary of {p['name']}" for p in pending})
    assert graph.live.entity("alice")["description"] == "summary of Alice"
    assert the_relation(graph, "alice", "bob")["description"] == "summary of Alice - Bob"
    assert graph.live.entity("bob")["description"] == "short"
    assert graph.pending_summaries(3, 1000, count_tokens) == []

    # a new fragment makes a new description: the old summary no longer applies as it is,
    # the next one starts from it (tests/test_summary_bases.py)
    graph.apply(*rows([ent("Alice", "c9", desc="Alice fact 9")]))
    assert graph.live.entity("alice")["description"].endswith("Alice fact 9")
    [again] = graph.pending_summaries(3, 1000, count_tokens)
    assert again["name"] == "Alice" and again["base"] == "summary of Alice" and again["fragments"] == ["Alice fact 9"]


def test_summaries_by_token_count():
    long_text = "word " * 300
    graph = graph_of([ent("Long", "c1", desc=long_text), ent("Short", "c1", desc="tiny")])
    pending = graph.pending_summaries(8, 100, count_tokens)
    assert [p["name"] for p in pending] == ["Long"]
    assert graph.pending_summaries(8, 1000, count_tokens) == []


# ---- (h) sharding invariance ---------------------------------------------------------------------
def sharded(entities, relations, num_shards: int) -> list[ShardGraph]:
    shards = [ShardGraph(i, num_shards) for i in range(num_shards)]
    for shard, (e_rows, r_rows) in zip(shards, route(entities, relations, num_shards)):
        shard.apply(e_rows, r_rows)
    return shards


def union(shards: list[ShardGraph]) -> dict[str, list[dict[str, Any]]]:
    parts = [s.published.export() for s in shards]
    return {kind: sorted((x for p in parts for x in p[kind]), key=lambda x: x["id"])
            for kind in ("entities", "relations")}


@pytest.mark.parametrize("num_shards", [2, 3, 5])
def test_sharding_does_not_change_the_graph(num_shards):
    entities, relations = random_corpus(4, n_chunks=40)
    single = union(sharded(entities, relations, 1))
    assert single == union([graph_of(entities, [r for r in relations if entity_key(r.source) != entity_key(r.target)])])
    shards = sharded(entities, relations, num_shards)
    assert sum(1 for s in shards if s.counts()["entities"]) > 1, "the data really is spread over shards"
    assert union(shards) == single
    totals = {k: sum(s.counts()[k] for s in shards) for k in ("entities", "relations")}
    assert totals == {"entities": len(single["entities"]), "relations": len(single["relations"])}

    # the same summaries are asked for, once per item
    one = {p["hash"] for p in sharded(entities, relations, 1)[0].pending_summaries(2, 10_000, count_tokens)}
    many = [p["hash"] for s in shards for p in s.pending_summaries(2, 10_000, count_tokens)]
    assert one and set(many) == one

    # and removing chunks everywhere keeps them equal
    gone = {e.chunk_id for e in entities[::4]}
    for s in shards:
        s.remove_chunks(gone)
    ref = sharded(entities, relations, 1)[0]
    ref.remove_chunks(gone)
    assert union(shards) == union([ref])


# ---- (i) source id cap --------------------------------------------------------------------------
def test_max_source_ids_caps_sources_but_not_weight():
    chunks = [f"c{i:02d}" for i in range(10)]
    graph = graph_of([ent("Alice", c) for c in chunks], [rel("Alice", "Bob", c, weight=1.0) for c in chunks],
                     max_source_ids=3)
    assert graph.live.entity("alice")["source_ids"] == ["c00", "c01", "c02"]
    relation = the_relation(graph, "alice", "bob")
    assert relation["source_ids"] == ["c00", "c01", "c02"]
    assert relation["weight"] == 10.0
    assert graph.live.entity("bob")["source_ids"] == ["c00", "c01", "c02"]


# ---- (j) snapshots ------------------------------------------------------------------------------
@pytest.mark.parametrize("num_shards", [1, 3])
def test_snapshot_round_trip(tmp_path, num_shards):
    workspace = Workspace(str(tmp_path / "ws"))
    entities, relations = random_corpus(5)
    shards = sharded(entities, relations, num_shards)
    for shard in shards:
        pending = shard.pending_summaries(2, 10_000, count_tokens)
        shard.add_summaries({p["hash"]: f"summary {p['name']}" for p in pending[::2]})
        save_snapshot(workspace, shard, 1)
    for shard in shards:
        fresh = ShardGraph(shard.shard, num_shards)
        load_snapshot(workspace, fresh, 1)
        assert fresh.published.export() == shard.published.export()
        assert fresh.counts() == shard.counts()
        assert fresh.summaries == shard.summaries
        assert fresh.take_changes() == {"entities": [], "relations": [], "removed": []}
        # and it keeps merging exactly like the original
        more_e, more_r = random_corpus(6, n_chunks=5)
        [(e_rows, r_rows)] = [route(more_e, more_r, num_shards)[shard.shard]]
        original = copy.deepcopy(shard)
        original.apply(copy.deepcopy(e_rows), copy.deepcopy(r_rows))
        fresh.apply(e_rows, r_rows)
        assert fresh.published.export() == original.published.export()
    assert any(s.summaries for s in shards)
    assert any("summary" in e["description"] for s in shards for e in s.published.export()["entities"])


def test_snapshot_of_an_empty_shard(tmp_path):
    workspace = Workspace(str(tmp_path / "ws"))
    save_snapshot(workspace, ShardGraph(1, 2), 1)
    fresh = ShardGraph(1, 2)
    load_snapshot(workspace, fresh, 1)
    assert fresh.published.export() == {"entities": [], "relations": []}
    missing = ShardGraph(0, 2)
    load_snapshot(workspace, missing, 1)  # never saved: stays empty
    assert missing.counts() == {"entities": 0, "relations": 0}


def test_snapshot_keeps_endpoint_names_when_the_larger_key_came_first(tmp_path):
    # "bob" is created before "alice": the relation still has its endpoints in key order
    graph = graph_of([ent("Bob", "c1")], [rel("Alice", "Bob", "c2"), rel("Bob", "alice", "c3")])
    assert graph.held_pairs() == [("alice", "bob")]
    workspace = Workspace(str(tmp_path / "ws"))
    save_snapshot(workspace, graph, 1)
    fresh = ShardGraph(0, 1)
    load_snapshot(workspace, fresh, 1)
    view = the_relation(fresh, "alice", "bob")
    assert (view["source"], view["target"]) == ("Alice", "Bob")
    assert fresh.live.entity("alice")["name"] == "Alice"
    assert fresh.published.export() == graph.published.export()


def test_views_read_between_writes_are_never_stale():
    """Cached views (names, weights, entity and relation views) follow every write."""
    steps = [
        ("apply", rows([ent("Ann", "c1", "person"), ent("Bob", "c1")], [rel("Ann", "Bob", "c1", weight=2.0)])),
        ("apply", rows([ent("ANN", "c2", "place"), ent("ANN", "c3", "place")], [rel("ann", "Bob", "c2", weight=3.0)])),
        ("remove", {"c1"}),
        ("summaries", None),
        ("apply", rows([ent("Cy", "c4")], [rel("Cy", "Ann", "c4"), rel("Bob", "Cy", "c4")])),
        ("remove", {"c4"}),
    ]
    read, unread = ShardGraph(0, 1), ShardGraph(0, 1)
    for action, arg in steps:
        for graph in (read, unread):
            if action == "apply":
                graph.apply(*copy.deepcopy(arg))
            elif action == "remove":
                graph.remove_chunks(set(arg))
            else:
                graph.add_summaries({fragments_hash(graph.live.entity_fragments("ann")): "Ann, summarised."})
        read.published.neighborhood(read.held_keys(), None)  # fills the caches
        read.published.fetch(read.held_keys(), read.held_pairs())
        assert read.published.export() == unread.published.export()
    ann = read.live.entity("ann")
    assert (ann["name"], ann["type"], ann["description"]) == ("ANN", "place", "Ann, summarised.")
    assert read.live.relation("ann", "bob")["weight"] == 3.0


def test_capped_neighborhood_keeps_exactly_the_best_relations():
    """Shard-side cutting returns the same top relations as ranking the whole neighbourhood."""
    from lightrag_ray.core.ranking import rank_local_relations

    rng = random.Random(7)
    names = [f"N{i}" for i in range(60)]
    relations = [rel(rng.choice(names[:5]) if rng.random() < 0.5 else rng.choice(names), rng.choice(names),
                     f"c{i}", weight=float(rng.randint(1, 4))) for i in range(600)]
    graph = ShardGraph(0, 1)
    graph.apply(*rows([], [r for r in relations if r.source != r.target]))
    for trial in range(30):
        keys = [entity_key(n) for n in rng.sample(names, rng.randint(1, 12))]
        limit = rng.randint(1, 25)
        full = rank_local_relations(graph.published.neighborhood(keys, None)["relations"], keys)[:limit]
        capped = graph.published.neighborhood(keys, limit)["relations"]
        assert len(capped) <= limit
        assert rank_local_relations(capped, keys)[:limit] == full, (trial, keys, limit)


# ---- versions: readers see the published graph while a write job is open ------------------
def reads(graph: ShardGraph, keys: list[str]) -> dict[str, Any]:
    """Everything a reader can ask a shard, over ``keys`` (present or not)."""
    pairs = [(a, b) for i, a in enumerate(keys) for b in keys[i + 1:]]
    return {"export": graph.published.export(), "labels": sorted(graph.published.labels()), "all": graph.published.neighborhood(keys, None),
            "capped": graph.published.neighborhood(keys[::2], 3), "fetch": graph.published.fetch(keys, pairs)}


def job_steps(seed: int) -> tuple[Rows, Rows, set[str], dict[str, str]]:
    """A base graph's rows, then a job's: new chunks, removed base chunks, summaries."""
    entities, relations = random_corpus(seed, n_chunks=40)
    chunks = sorted({e.chunk_id for e in entities})
    job = set(chunks[::3])
    base = rows([e for e in entities if e.chunk_id not in job], [r for r in relations if r.chunk_id not in job])
    added = rows([e for e in entities if e.chunk_id in job] + [ent("Zed Newcomer", "chunk-new")],  # surely new,
                 [r for r in relations if r.chunk_id in job] + [rel("Zed Newcomer", "Paris", "chunk-new")])  # on an old one
    removed = set(chunks[1::5]) - job
    known = ShardGraph(0, 1)
    known.apply(*copy.deepcopy(base))
    summaries = {fragments_hash(known.live.entity_fragments(k)): f"{k} in short" for k in known.held_keys()[:4]}
    return base, added, removed, summaries


def run_job(graph: ShardGraph, added: Rows, removed: set[str], summaries: dict[str, str], keys: list[str],
            published: dict[str, Any] | None = None) -> None:
    """The job's writes; when ``published`` is given, readers must see it after every write."""
    for step in (lambda: graph.add_summaries(summaries), lambda: graph.apply(*copy.deepcopy(added)),
                 lambda: graph.remove_chunks(removed)):
        step()
        if published is not None:
            assert reads(graph, keys) == published


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_readers_see_the_published_graph_until_the_job_is_published(seed):
    base, added, removed, summaries = job_steps(seed)
    finished = ShardGraph(0, 1)  # the same writes without a job
    finished.apply(*copy.deepcopy(base))
    keys = finished.held_keys()
    run_job(finished, added, removed, summaries, keys)
    keys = sorted(set(keys) | set(finished.held_keys()))
    graph, unread = ShardGraph(0, 1), ShardGraph(0, 1)
    for each in (graph, unread):
        each.apply(*copy.deepcopy(base))
    before = reads(unread, keys)  # graph's caches stay empty: every published view is derived during the job
    graph.begin()
    run_job(graph, added, removed, summaries, keys, published=before)
    published = {kind: len(items) for kind, items in graph.published.export().items()}
    assert graph.counts() == finished.counts() != published  # the writer sees its writes
    assert graph.published.export() == before["export"] != finished.published.export()
    graph.publish()
    assert reads(graph, keys) == reads(finished, keys)


@pytest.mark.parametrize("seed", [21, 22])
def test_a_rolled_back_job_leaves_the_published_graph_and_marks_what_it_touched(seed):
    base, added, removed, summaries = job_steps(seed)
    graph = ShardGraph(0, 1)
    graph.apply(*copy.deepcopy(base))
    graph.take_changes()
    keys = sorted(set(graph.held_keys()) | {row["key"] for row in added[0]})
    before, old_keys = reads(graph, keys), set(graph.held_keys())
    graph.begin()
    run_job(graph, added, removed, summaries, keys, published=before)
    new_keys = set(graph.held_keys()) - old_keys
    graph.rollback()
    assert reads(graph, keys) == before
    assert graph.live.entity(keys[0]) == graph.published.entity(keys[0]) and graph.live is graph.published
    changes = graph.take_changes()  # the job's items: current views, or removed if the job made them
    assert new_keys and {entity_id(k) for k in new_keys} <= set(changes["removed"]) and changes["entities"]
    assert all(e == graph.live.entity(e["key"]) for e in changes["entities"])
    # the graph is whole again: the same job run afterwards ends where it would have
    run_job(graph, added, removed, summaries, keys)
    finished = ShardGraph(0, 1)
    finished.apply(*copy.deepcopy(base))
    run_job(finished, added, removed, summaries, keys)
    assert reads(graph, keys) == reads(finished, keys)
