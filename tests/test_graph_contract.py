"""The graph contract (core.graph.contract): one declaration per shard operation, from which the
shard actor, the writer's router, the readers and the in-memory fake all take it."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from lightrag_ray.core.graph import contract
from lightrag_ray.core.graph.contract import LIVE, READ, WRITE, GraphOperations, Operation, declare, operation, withdraw
from lightrag_ray.core.graph.routing import every_shard, total
from lightrag_ray.core.records import EntityRecord, RelationRecord
from tests.memory_stores import MemoryGraph

THROWAWAY = "throwaway_owned_entities_named"


def _owned_named(graph, prefix):
    """How many entities this shard owns whose display name starts with ``prefix``."""
    return sum(1 for name in graph.published.labels() if name.startswith(prefix))


@pytest.fixture
def throwaway():
    """A read operation declared here only, in the contract, for the length of one test."""
    declare(Operation(THROWAWAY, READ, every_shard, total, run=_owned_named))
    yield operation(THROWAWAY)
    withdraw(THROWAWAY)


def _records():
    entities = [EntityRecord(name, "person", f"{name} lives here.", "c1") for name in ("Alice", "Albert", "Bob", "Carol")]
    relations = [RelationRecord("Alice", "Bob", "friends", "knows", "c1", 1.0)]
    return entities, relations


def test_an_operation_declared_once_is_callable_from_the_fake(throwaway):
    graph = MemoryGraph(num_shards=3)
    graph.apply(*_records())
    assert asyncio.run(getattr(graph, THROWAWAY)("Al")) == 2
    assert {call[0] for call in graph.calls} == {THROWAWAY}


@pytest.mark.integration
def test_an_operation_declared_once_is_callable_from_the_writer_and_a_reader(ray_cluster, tmp_path, throwaway):
    from lightrag_ray.config import GraphConfig
    from lightrag_ray.storage.graph.reader import ShardReader
    from lightrag_ray.storage.graph.writer import GraphRouter

    config = GraphConfig(num_shards=3)
    router = GraphRouter(str(tmp_path / "ws"), config, "contract-test")
    try:
        router.apply(*_records())
        assert getattr(router, THROWAWAY)("Al") == 2
        reader = ShardReader(str(tmp_path / "ws"), 3, namespace="contract-test")
        assert asyncio.run(getattr(reader, THROWAWAY)("Al")) == 2
        assert asyncio.run(getattr(reader, THROWAWAY)("Bo")) == 1
    finally:
        router.close()


def test_readers_get_only_read_operations():
    from lightrag_ray.storage.graph.reader import ShardReader

    reader = ShardReader("/nowhere", 2)
    assert callable(reader.fetch)
    with pytest.raises(AttributeError):
        reader.apply  # type: ignore[attr-defined]  # noqa: B018 - the attribute lookup is what is tested
    with pytest.raises(AttributeError, match="writer"):
        asyncio.run(reader.run(GraphOperations.apply, [], []))
    with pytest.raises(AttributeError, match="no operation"):
        operation("no_such_operation")


def test_every_operation_runs_on_a_shard_graph_and_writes_are_replayed():
    from lightrag_ray.core.graph.shard_graph import ShardGraph
    from lightrag_ray.core.graph.views import ShardView

    for op in contract.OPERATIONS.values():
        if op.run is None:  # the method of its name: of the published view for reads, else of the ShardGraph
            target = ShardView if op.access is READ else ShardGraph
            assert callable(getattr(target, op.name, None)), op.name
        assert op.access.replayed == (op.access is WRITE)
    assert operation("apply").access is WRITE and operation("counts").access is LIVE


def test_a_name_is_declared_once():
    with pytest.raises(ValueError, match="twice"):
        declare(Operation("fetch", READ))


def test_the_contract_documents_each_operation():
    undocumented = [op.name for op in contract.OPERATIONS.values() if not op.doc]
    assert not undocumented
    assert inspect.getdoc(contract)


def test_readers_filter_passages_by_version_from_a_job_until_its_old_vectors_are_deleted():
    """``read_version``: the published graph version, and whether readers must keep to the chunk
    vectors visible at it: from ``begin`` until the writer ``settle``s after publishing (its old
    rows deleted); a rolled-back job leaves readers filtering until a job settles. A commit
    outside a job (an indexing run's own shards) has no readers to wait for."""
    graph = MemoryGraph(num_shards=2)

    def version() -> dict:
        return asyncio.run(graph.read_version())

    assert version() == {"version": 0, "settled": True}
    for shard in graph.shards:
        shard.mark_saved(1)  # a run's commit, no job open
    assert version() == {"version": 1, "settled": True}
    graph.begin()
    assert version() == {"version": 1, "settled": False}
    for shard in graph.shards:
        shard.mark_saved(2)  # the job's commit: readers still see version 1
    assert version() == {"version": 1, "settled": False}
    graph.publish()
    assert version() == {"version": 2, "settled": False}  # the old rows are not deleted yet
    graph.settle()
    assert version() == {"version": 2, "settled": True}
    graph.begin()
    graph.rollback()
    assert version() == {"version": 2, "settled": False}  # vectors the undone job stored may be left
    graph.begin()
    graph.publish()
    graph.settle()
    assert version() == {"version": 2, "settled": True}
    assert graph.calls[-1] == ("read_version", 0)  # one shard answers
