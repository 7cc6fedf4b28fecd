"""`lightrag-ray reshard`: a workspace's graph moved to another number of shards, from its files
(storage.graph.reshard), crash-safe, with the same graph and the same answers after it."""

from __future__ import annotations

import pytest

from lightrag_ray.core.graph.shard_graph import ShardGraph
from lightrag_ray.core.tokenizer import count_tokens
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.graph import reshard as reshard_module
from lightrag_ray.storage.graph.snapshot import load_snapshot, save_snapshot, snapshot_folder
from lightrag_ray.storage.workspace import Workspace
from lightrag_ray.core.records import EntityRecord
from lightrag_ray.index.stages.aliases import link_aliases
from tests.memory_stores import MemoryGraph
from tests.test_merge import random_corpus, sharded, union


def _saved(workspace: Workspace, shards: list[ShardGraph], version: int) -> None:
    for shard in shards:
        save_snapshot(workspace, shard, version)
    manifests.save(workspace, manifests.Manifest(num_shards=len(shards), graph_version=version))


def _loaded(workspace: Workspace) -> list[ShardGraph]:
    count = manifests.load(workspace).num_shards
    shards = [ShardGraph(i, count) for i in range(count)]
    for shard in shards:
        load_snapshot(workspace, shard)
    return shards


@pytest.mark.parametrize(("before", "after"), [(2, 5), (3, 1), (1, 4)])
def test_the_graph_is_the_same_over_another_number_of_shards(tmp_path, before, after):
    entities, relations = random_corpus(8, n_chunks=40)
    shards = sharded(entities, relations, before)
    for shard in shards:  # summaries and their bases travel with their items
        pending = shard.pending_summaries(2, 10_000, count_tokens)
        shard.add_summaries({p["hash"]: f"summary of {p['name']}" for p in pending[::2]})
    workspace = Workspace(str(tmp_path / "ws"))
    _saved(workspace, shards, 3)
    expected = union(shards)

    manifest = reshard_module.reshard(workspace, after)
    assert (manifest.num_shards, manifest.graph_version) == (after, 4)
    moved = _loaded(workspace)
    assert union(moved) == expected
    assert {k: sum(s.counts()[k] for s in moved) for k in ("entities", "relations")} == \
        {k: sum(s.counts()[k] for s in shards) for k in ("entities", "relations")}
    bases = {item: base for s in shards for item, base in s.summary_bases.items()}
    assert {item: base for s in moved for item, base in s.summary_bases.items()} == bases and bases
    assert not any(workspace.exists("graph", snapshot_folder(i, before)) for i in range(before))  # old layout gone


def test_alias_links_move_with_their_entities(tmp_path):
    graph = MemoryGraph(num_shards=3)
    graph.apply([EntityRecord(n, "person", f"{n} is here.", "c1", "c1.txt")
                 for n in ("Jacob Marley", "Marley", "Ebenezer Scrooge", "Scrooge")], [])
    assert link_aliases(graph) == 4
    shards = graph.shards
    workspace = Workspace(str(tmp_path / "ws"))
    _saved(workspace, shards, 1)
    links = {(key, other): reason for s in shards for key, found in s.aliases.links.items() for other, reason in found.items()}
    assert links
    reshard_module.reshard(workspace, 2)
    moved = _loaded(workspace)
    assert {(key, other): reason for s in moved for key, found in s.aliases.links.items()
            for other, reason in found.items()} == links
    assert all(s.live.owns(key) for s in moved for key in s.aliases.links)


def test_a_reshard_killed_before_its_commit_leaves_the_old_layout_and_can_run_again(tmp_path, monkeypatch):
    entities, relations = random_corpus(9)
    shards = sharded(entities, relations, 2)
    workspace = Workspace(str(tmp_path / "ws"))
    _saved(workspace, shards, 1)
    expected = union(shards)

    def killed(*_args):
        raise KeyboardInterrupt  # the process dies between the new files and the manifest

    with monkeypatch.context() as patched:
        patched.setattr(reshard_module.manifests, "save", killed)
        with pytest.raises(KeyboardInterrupt):
            reshard_module.reshard(workspace, 4)
    assert manifests.load(workspace).num_shards == 2
    assert union(_loaded(workspace)) == expected  # the old layout is whole
    reshard_module.reshard(workspace, 4)  # and the reshard runs again from scratch
    assert manifests.load(workspace).num_shards == 4 and union(_loaded(workspace)) == expected


QUESTIONS = ["What did Maria Lopez do?", "Who bakes bread in Naples?", "Where did the Nordic Star sail?"]


def _contexts(settings) -> list[dict]:
    import asyncio

    from lightrag_ray.query.engine import QueryParam
    from lightrag_ray.service.session import LocalSession

    no_llm = settings.model_copy(update={"llm": settings.llm.model_copy(update={"backend": "none"})})
    with LocalSession(no_llm) as session:
        return [asyncio.run(session.engine.retrieve(question, QueryParam(mode=mode)))[0].to_dict()
                for question in QUESTIONS for mode in ("local", "global", "mix", "walk")]


@pytest.mark.integration
def test_the_cli_reshards_a_workspace_and_queries_answer_the_same(ray_cluster, llm_server, tmp_path):
    from tests.test_cli import run_cli
    from tests.test_query import index_corpus

    settings = index_corpus(tmp_path, llm_server.url, graph={"num_shards": 2})
    before = _contexts(settings)
    assert any(c["entities"] for c in before) and any(c["chunks"] for c in before)
    done = run_cli("reshard", "--workspace", settings.workspace, "--shards", "8", "--json")
    assert done.returncode == 0, done.stderr
    assert '"shards_before": 2' in done.stdout and '"shards": 8' in done.stdout
    assert _contexts(settings) == before  # the manifest's count wins over the settings' 2
    refused = run_cli("reshard", "--workspace", str(tmp_path / "nowhere"), "--shards", "3")
    assert refused.returncode != 0 and "not a lightrag-ray workspace" in refused.stderr
