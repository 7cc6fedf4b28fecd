"""Repartition a workspace's graph over another number of shards, from its files alone.

Every shard's committed state is read (base and deltas folded), its rows are routed again by
the stable hash of their keys (an entity to its owner, a relation to the shards of both ends,
alias links to the shard of their entity, summary bases to their item's owner), and each new
shard is written as a complete base of the next graph version in its own folders
(``shard-KKKK-of-NNNN`` names the count). The manifest, written last, is the commit point: a
reshard killed before it leaves the old layout valid and the new folders ignored (they are
cleared by the next attempt); after it, the old folders are deleted. Ids do not depend on the
shard count, so the vectors stay as they are.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lightrag_ray.core.ids import entity_id, relation_id, shard_of
from lightrag_ray.core.graph.summary_bases import SummaryBase
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.graph.snapshot import Base, committed_state, snapshot_folder, write_base
from lightrag_ray.storage.workspace import Workspace


def _route(table: pa.Table, column: str, num_shards: int) -> list[pa.Table]:
    """``table``'s rows per new shard, by the hash of ``column``."""
    shards = pa.array([shard_of(key, num_shards) for key in table[column].to_pylist()], pa.int64())
    return [table.filter(pc.equal(shards, i)) for i in range(num_shards)]


def _read_all(workspace: Workspace, num_shards: int, version: int) -> Base:
    """The whole graph at ``version``: each relation's rows once (its owner's copy)."""
    entities, relations, aliases = [], [], []
    summaries: dict[str, str] = {}
    bases: dict[str, SummaryBase | None] = {}
    for shard in range(num_shards):
        state = committed_state(workspace, snapshot_folder(shard, num_shards), version)
        entities.append(state.entities)
        owned = pa.array([shard_of(a, num_shards) == shard for a in state.relations["key_a"].to_pylist()], pa.bool_())
        relations.append(state.relations.filter(owned))
        aliases.append(state.aliases)
        summaries.update(state.summaries)
        bases.update(state.bases)
    return Base(pa.concat_tables(entities), pa.concat_tables(relations), summaries, bases, pa.concat_tables(aliases))


def reshard(workspace: Workspace, num_shards: int) -> manifests.Manifest:
    """Move the graph of ``workspace`` to ``num_shards`` shards (see the module doc); returns
    the new manifest. Nothing may write to the workspace meanwhile."""
    manifest = manifests.load(workspace)
    old = manifest.num_shards
    if old is None:
        raise ValueError(f"{workspace.uri} has no graph yet; set graph.num_shards before its first index run")
    if old == num_shards:
        return manifest
    version = manifest.graph_version + 1
    for shard in range(num_shards):  # leftovers of an attempt that never committed
        if workspace.exists("graph", snapshot_folder(shard, num_shards)):
            workspace.fs.delete_dir(workspace.path("graph", snapshot_folder(shard, num_shards)))
    graph = _read_all(workspace, old, manifest.graph_version)
    entities = _route(graph.entities, "key", num_shards)
    by_a, by_b = _route(graph.relations, "key_a", num_shards), _route(graph.relations, "key_b", num_shards)
    aliases = _route(graph.aliases, "key", num_shards)
    for shard in range(num_shards):
        b_side = by_b[shard]
        a_here = pa.array([shard_of(a, num_shards) == shard for a in b_side["key_a"].to_pylist()], pa.bool_())
        relations = pa.concat_tables([by_a[shard], b_side.filter(pc.invert(a_here))])  # both ends here: once
        owned = {entity_id(key) for key in entities[shard]["key"].to_pylist()}
        owned |= {relation_id(a, b) for a, b in zip(by_a[shard]["key_a"].to_pylist(), by_a[shard]["key_b"].to_pylist())}
        write_base(workspace, snapshot_folder(shard, num_shards), version, Base(
            entities[shard], relations, graph.summaries,
            {item: base for item, base in graph.bases.items() if item in owned}, aliases[shard]))
    manifest = manifest.model_copy(update={"num_shards": num_shards, "graph_version": version})
    manifests.save(workspace, manifest)  # the commit point
    for shard in range(old):
        folder = snapshot_folder(shard, old)
        if workspace.exists("graph", folder):
            workspace.fs.delete_dir(workspace.path("graph", folder))
    return manifest
