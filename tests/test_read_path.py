"""The read path on a real Ray cluster: queries read the shard actors directly, spread over
shard replicas, and a killed shard costs a bounded wait or a clear error, never a hang."""

from __future__ import annotations

import asyncio
import time

import pytest
import ray

from lightrag_ray.config import GraphConfig
from lightrag_ray.core.records import EntityRecord, RelationRecord
from lightrag_ray.query.engine import QueryParam
from lightrag_ray.service.session import LocalSession
from lightrag_ray.storage.graph.actor import shard_actor_name
from lightrag_ray.storage.graph.reader import GraphUnavailableError, ShardReader
from lightrag_ray.storage.graph.writer import GraphRouter
from tests.graph_helpers import shard_ref
from tests.test_query import index_corpus

QUESTIONS = [
    ("Who observed Jupiter?", "local"), ("Who observed Jupiter?", "global"), ("Where is the bakery?", "hybrid"),
    ("What did the Nordic Star carry?", "mix"), ("Which telescope?", "naive"),
]


@pytest.fixture(scope="module")
def indexed(ray_cluster, llm_server, tmp_path_factory):
    """Settings of a workspace indexed once, with two replicas per shard."""
    return index_corpus(tmp_path_factory.mktemp("read_path"), llm_server.url,
                        graph={"num_shards": 2, "replicas": 2, "read_timeout_s": 4})


def _contexts(session: LocalSession, wait_s: float = 180) -> list[dict]:
    """The contexts of QUESTIONS, once every shard answers within the read timeout (on a
    busy machine, shards just started from their snapshots may not yet: up to ``wait_s``)."""
    async def all_questions() -> list[dict]:
        answers = []
        for question, mode in QUESTIONS:
            context, _, _ = await session.engine.retrieve(question, QueryParam(mode=mode))
            answers.append(context.to_dict())
        return answers

    deadline = time.monotonic() + wait_s
    while True:
        try:
            return asyncio.run(all_questions())
        except GraphUnavailableError:
            if time.monotonic() > deadline:
                raise


def _replica(settings, shard: int, replica: int):
    name = shard_actor_name(settings.workspace, shard, settings.graph.num_shards, replica)
    return ray.get_actor(name, namespace=settings.ray.namespace)


def test_replicas_hold_the_same_graph_and_answers_do_not_depend_on_them(indexed, llm):
    one = indexed.model_copy(update={"graph": indexed.graph.model_copy(update={"replicas": 1})})
    with LocalSession(one) as session:
        single = _contexts(session)
    assert any(c["entities"] for c in single) and any(c["chunks"] for c in single)
    with LocalSession(indexed) as session:
        for shard in range(2):
            views = [ray.get(shard_ref(_replica(indexed, shard, r), "export"))[1] for r in range(2)]
            assert views[0] == views[1] and views[0]["entities"]
        assert _contexts(session) == single
        for shard in range(2):  # first replicas gone for good: the second ones answer alone
            ray.kill(_replica(indexed, shard, 0), no_restart=True)
        assert _contexts(session, wait_s=0) == single  # at once: no retry hides a failover that waits


def test_a_killed_shard_costs_a_bounded_wait_or_a_clear_error(indexed, llm):
    one = indexed.model_copy(update={"graph": indexed.graph.model_copy(update={"replicas": 1})})
    timeout = one.graph.read_timeout_s
    with LocalSession(one) as session:
        expected = _contexts(session)[0]
        question, mode = QUESTIONS[0]

        async def one_query() -> tuple[str, float]:
            started = time.monotonic()
            try:
                context, _, _ = await session.engine.retrieve(question, QueryParam(mode=mode))
            except GraphUnavailableError as exc:
                assert "did not answer within" in str(exc)
                return "unavailable", time.monotonic() - started
            assert context.to_dict() == expected
            return "answered", time.monotonic() - started

        async def batch() -> list[tuple[str, float]]:
            return list(await asyncio.wait_for(asyncio.gather(*(one_query() for _ in range(4))), timeout + 30))

        async def kill_then_query_until_answered() -> list[tuple[str, float]]:
            """Queries in flight while both shards die (Ray restarts them from their snapshots),
            then batches until the restarted shards answer: no deadline on the restart itself,
            which takes longer on a busy machine, only on each query."""
            in_flight = asyncio.ensure_future(batch())
            for shard in range(2):
                ray.kill(_replica(one, shard, 0), no_restart=False)
            results = await in_flight
            deadline = time.monotonic() + 180
            while results[-1][0] != "answered":
                assert time.monotonic() < deadline, results
                results += await batch()
            return results

        results = asyncio.run(kill_then_query_until_answered())
        assert all(seconds < timeout + 10 for _, seconds in results), results  # bounded: never a hang
        assert _contexts(session)[0] == expected


def test_readers_keep_the_published_graph_of_a_writer_that_dies_mid_job(ray_cluster, tmp_path):
    """The served owner's shards outlive it: a job it left open stays unseen by readers, and
    the owner that replaces it undoes the job (its re-run merges it again)."""
    workspace, config = str(tmp_path / "ws"), GraphConfig(num_shards=2)
    first = GraphRouter(workspace, config, keep_alive=True)
    first.apply([EntityRecord("Ann", "person", "Ann paints.", "c1", "a.txt")], [])
    published = first.export()
    ray.get([shard_ref(shard, "begin") for copies in first.shards for shard in copies])  # it opens a job, and dies in it
    first.apply([EntityRecord("Bob", "person", "Bob sings.", "c2", "b.txt")],
                [RelationRecord("Ann", "Bob", "friends", "Ann knows Bob.", "c2", 1.0)])
    assert first.counts() == {"entities": 2, "relations": 1}  # the writer's own view
    reader = ShardReader(workspace, config.num_shards)
    seen = asyncio.run(reader.neighborhood(["ann", "bob"]))
    assert [e["name"] for e in seen["entities"]] == ["Ann"] and seen["relations"] == []
    assert first.export() == published and first.labels() == ["Ann"]
    successor = GraphRouter(workspace, config, keep_alive=True)
    try:
        assert successor.counts() == {"entities": 1, "relations": 0} and successor.export() == published
    finally:
        successor.close()
