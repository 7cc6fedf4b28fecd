"""Incremental summaries at fragment level (no Ray): a summarised item is summarised again
from its last summary plus the new fragments; deletion, rollback and snapshots."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from lightrag_ray.core.graph.shard_graph import ShardGraph
from lightrag_ray.core.graph.summary_bases import base_of, summary_input
from lightrag_ray.core.tokenizer import count_tokens
from lightrag_ray.index.summaries import level_messages, summarize
from lightrag_ray.storage.graph.snapshot import load_snapshot, save_snapshot, snapshot_folder
from lightrag_ray.storage.workspace import Workspace
from tests.test_merge import ent, graph_of, rel, rows

LIMITS = {"language": "English", "target_tokens": 100, "max_input_tokens": 4000}


def summarise_all(graph: ShardGraph, max_fragments: int = 3) -> list[dict[str, Any]]:
    """Answer every pending summary with a text naming its inputs; the pending items."""
    pending = graph.pending_summaries(max_fragments, 10_000, count_tokens)
    graph.add_summaries({p["hash"]: f"S({p['base']}+{len(p['fragments'])})" for p in pending})
    return pending


def alice(graph: ShardGraph) -> dict[str, Any]:
    [item] = [p for p in graph.pending_summaries(3, 10_000, count_tokens) if p["name"] == "Alice"]
    return item


def test_summary_input_uses_the_base_only_while_all_its_fragments_remain():
    summaries = {base_of(["a", "b"]).digest: "AB"}
    base = base_of(["a", "b"])
    assert summary_input(["a", "x", "b", "y"], base, summaries) == ("AB", ["x", "y"])
    assert summary_input(["a", "x", "y"], base, summaries) == ("", ["a", "x", "y"])  # "b" was removed
    assert summary_input(["a", "b"], base, summaries) == ("", ["a", "b"])  # nothing new
    assert summary_input(["a", "b", "x"], None, summaries) == ("", ["a", "b", "x"])
    assert summary_input(["a", "b", "x"], base, {}) == ("", ["a", "b", "x"])  # summary gone (rolled back)
    assert summary_input(["a", "b", "x"], base, {base.digest: ""}) == ("", ["a", "b", "x"])  # empty answer


def test_a_new_mention_is_summarised_from_the_last_summary_and_the_new_fragments_only():
    graph = graph_of([ent("Alice", f"c{i}", desc=f"Alice fact {i}") for i in range(5)],
                     [rel("Alice", "Bob", f"c{i}", desc=f"story {i}") for i in range(4)])
    first = summarise_all(graph)
    assert {p["base"] for p in first} == {""} and len(first) == 2
    graph.take_changes()

    graph.apply(*rows([ent("Alice", "c7", desc="Alice fact 7")]))
    item = alice(graph)
    assert (item["base"], item["fragments"]) == ("S(+5)", ["Alice fact 7"])
    summarise_all(graph)
    assert graph.live.entity("alice")["description"] == "S(S(+5)+1)"

    # the next one starts from the newest summary; the untouched relation is not asked for
    graph.apply(*rows([ent("Alice", "c8", desc="Alice fact 8"), ent("Alice", "c25", desc="Alice fact 2 again")]))
    pending = graph.pending_summaries(3, 10_000, count_tokens)
    assert [(p["name"], p["base"], p["fragments"]) for p in pending] == [
        ("Alice", "S(S(+5)+1)", ["Alice fact 2 again", "Alice fact 8"])]
    # same graph, same prompt input; an answered one is not asked again
    assert copy.deepcopy(graph).pending_summaries(3, 10_000, count_tokens) == pending
    summarise_all(graph)
    assert graph.pending_summaries(3, 10_000, count_tokens) == []


def test_after_a_deletion_the_item_is_summarised_from_its_remaining_fragments():
    secret = "Alice fact from the deleted document"
    graph = graph_of([ent("Alice", f"c{i}", desc=f"Alice fact {i}") for i in range(4)]
                     + [ent("Alice", "gone", desc=secret)])
    summarise_all(graph)
    graph.apply(*rows([ent("Alice", "c5", desc="Alice fact 5")]))
    summarise_all(graph)  # a chain of summaries that all saw the secret
    graph.take_changes()

    graph.remove_chunks({"gone"})
    graph.take_changes()
    graph.apply(*rows([ent("Alice", "c6", desc="Alice fact 6")]))
    item = alice(graph)
    assert item["base"] == "" and item["fragments"] == [f"Alice fact {i}" for i in (0, 1, 2, 3, 5, 6)]
    prompts = level_messages("entity", "Alice", item["fragments"], base=item["base"], **LIMITS)
    assert all(secret not in m["content"] for messages in prompts for m in messages)
    # the fresh summary is the base from now on
    summarise_all(graph)
    graph.apply(*rows([ent("Alice", "c9", desc="Alice fact 9")]))
    assert alice(graph)["base"] == "S(+6)"


def test_a_rolled_back_job_restores_the_summaries_and_their_bases():
    graph = graph_of([ent("Alice", f"c{i}", desc=f"Alice fact {i}") for i in range(5)])
    summarise_all(graph)
    graph.take_changes()
    before = (dict(graph.summaries), dict(graph.summary_bases))

    graph.begin()
    graph.apply(*rows([ent("Alice", "c7", desc="Alice fact 7")]))
    summarise_all(graph)
    assert graph.live.entity("alice")["description"] == "S(S(+5)+1)" and graph.summary_bases != before[1]
    graph.rollback()

    assert (graph.summaries, graph.summary_bases) == before
    assert graph.live.entity("alice")["description"] == "S(+5)"
    graph.apply(*rows([ent("Alice", "c7", desc="Alice fact 7")]))  # the job again: the same prompt
    assert (alice(graph)["base"], alice(graph)["fragments"]) == ("S(+5)", ["Alice fact 7"])


def test_snapshots_keep_the_bases_and_older_snapshots_load_without_them(tmp_path):
    workspace = Workspace(str(tmp_path / "ws"))
    graph = graph_of([ent("Alice", f"c{i}", desc=f"Alice fact {i}") for i in range(5)],
                     [rel("Alice", "Bob", f"c{i}", desc=f"story {i}") for i in range(4)])
    summarise_all(graph)
    save_snapshot(workspace, graph, 1)
    fresh = ShardGraph(0, 1)
    load_snapshot(workspace, fresh, 1)
    assert fresh.summary_bases == graph.summary_bases and len(fresh.summary_bases) == 2
    fresh.apply(*rows([ent("Alice", "c7", desc="Alice fact 7")]))
    assert alice(fresh)["base"] == "S(+5)"

    workspace.delete_file(workspace.path("graph", snapshot_folder(0, 1), "base-0000000001", "summary_bases.arrow"))
    old = ShardGraph(0, 1)
    load_snapshot(workspace, old, 1)
    assert old.published.export() == graph.published.export() and old.summary_bases == {}
    old.apply(*rows([ent("Alice", "c7", desc="Alice fact 7")]))
    assert alice(old)["base"] == "" and len(alice(old)["fragments"]) == 6


def test_prompts_update_the_base_in_one_request_or_map_reduce_when_too_long():
    [one] = level_messages("entity", "Alice", ["Alice fact 7", "Alice fact 8"], base="Alice in short.", **LIMITS)
    text = one[0]["content"]
    assert "Alice in short." in text and "- Alice fact 7\n- Alice fact 8" in text

    long_facts = [f"Alice long fact {i}: " + "word " * 60 for i in range(6)]
    groups = level_messages("entity", "Alice", long_facts, base="Alice in short.",
                            **{**LIMITS, "max_input_tokens": 150})
    assert len(groups) > 1 and "Alice in short." in groups[0][0]["content"]
    assert all("Alice in short." not in g[0]["content"] for g in groups[1:])

    class Client:
        def __init__(self) -> None:
            self.prompts: list[str] = []

        async def complete(self, messages: list[dict[str, str]], call: object = None) -> str:
            self.prompts.append(messages[0]["content"])
            return f"answer {len(self.prompts)}"

    client = Client()
    assert asyncio.run(summarize(client, "entity", "Alice", ["Alice fact 7"], "Alice in short.", **LIMITS)) == "answer 1"
    assert len(client.prompts) == 1
    client = Client()
    asyncio.run(summarize(client, "entity", "Alice", long_facts, "Alice in short.", **{**LIMITS, "max_input_tokens": 150}))
    assert len(client.prompts) > len(groups) and sum("Alice in short." in p for p in client.prompts) == 1
