"""Shard persistence: a full snapshot (base) plus one delta per committed write job.

    graph/shard-KKKK-of-NNNN/
        base-VVVVVVVVVV/            entities, relations, summaries, summary_bases, aliases (.arrow),
                                    then complete.json, written last: a base without it is ignored
        delta-VVVVVVVVVV.arrow      the (item, chunk) entries, summaries, bases and alias links one job changed
        entities.parquet, ...       an older workspace's snapshot: a base of version 0

V is the manifest's graph version that the job commits (``manifest.json`` is written after
every shard's files, so it is the commit point). A shard loads the newest complete base whose
version is at most the manifest's, then the deltas after it up to that version, in order:
files of a job that never committed are never read, and the job's rerun replaces them.
Every file is written under a temporary name and renamed. Files are Arrow IPC with zstd:
at 100k entities a shard's base reads in 0.2 s (Parquet: 1.7 s) and is half the size. Compaction folds the deltas into a
new base from the files alone (``compact``), so it can run in a thread beside the writer.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.feather as feather
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from lightrag_ray.core.graph.aliases import ALIAS_COLUMNS
from lightrag_ray.core.graph.mentions import ENTITY_SCHEMA, RELATION_SCHEMA
from lightrag_ray.core.graph.shard_graph import GraphRows, ShardGraph
from lightrag_ray.core.graph.summary_bases import SummaryBase
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.workspace import Workspace

DELTA_SCHEMA = pa.schema([("kind", pa.string()), *RELATION_SCHEMA, ("type", pa.string()), ("name", pa.string())])
SUMMARY_SCHEMA = pa.schema([("hash", pa.string()), ("summary", pa.string())])
BASE_SCHEMA = pa.schema([("item", pa.string()), ("digest", pa.string()), ("covered", pa.list_(pa.string()))])
ALIAS_SCHEMA = pa.schema([(name, pa.string()) for name in ALIAS_COLUMNS])
TABLES = ("entities", "relations", "summaries", "summary_bases", "aliases")
BASE_FILES = tuple(f"{name}.arrow" for name in TABLES)
LEGACY_FILES = tuple(f"{name}.parquet" for name in TABLES)  # an older workspace's snapshot
COMPLETE = "complete.json"
MAX_DELTAS = 64  # past this many deltas a shard compacts whatever their size (each costs a file open)


def snapshot_folder(shard: int, num_shards: int) -> str:
    return f"shard-{shard:04d}-of-{num_shards:04d}"


class ShardFiles(NamedTuple):
    """What a shard folder holds: complete bases and deltas by version (path, bytes), and
    base folders and temporary files a killed writer left."""

    bases: dict[int, tuple[str, int]]
    deltas: dict[int, tuple[str, int]]
    incomplete: dict[int, str]
    temporary: list[tuple[int, str]]  # (version, path) of unfinished delta writes

    def newest_base(self, version: int) -> int | None:
        """Version of the newest complete base at or below ``version``."""
        return max((v for v in self.bases if v <= version), default=None)

    def deltas_after(self, base: int | None, version: int) -> list[int]:
        """Versions of the deltas to apply on top of ``base``, up to ``version``, in order."""
        return sorted(v for v in self.deltas if (base is None or v > base) and v <= version)


def list_files(workspace: Workspace, folder: str) -> ShardFiles:
    """Scan a shard folder (an older workspace's top-level snapshot counts as base 0)."""
    root = workspace.path("graph", folder)
    if not workspace.exists("graph", folder):
        return ShardFiles({}, {}, {}, [])
    infos = workspace.fs.get_file_info(pafs.FileSelector(root, recursive=True))
    names = {info.path[len(root) + 1:]: info for info in infos}
    bases, deltas, incomplete = {}, {}, {}
    for name, info in names.items():
        if name.startswith("delta-") and name.endswith(".arrow"):
            deltas[int(name[6:-6])] = (info.path, info.size)
        elif name.startswith("base-") and "/" not in name and info.type == pafs.FileType.Directory:
            if f"{name}/{COMPLETE}" in names:
                bases[int(name[5:])] = (info.path, sum(names[f"{name}/{f}"].size for f in BASE_FILES + LEGACY_FILES
                                                        if f"{name}/{f}" in names))
            else:
                incomplete[int(name[5:])] = info.path
    if "entities.parquet" in names and 0 not in bases:
        bases[0] = (root, sum(names[f].size for f in LEGACY_FILES if f in names))
    temporary = [(int(name[6:16]), info.path) for name, info in names.items()
                 if name.startswith("delta-") and ".tmp-" in name and "/" not in name]
    return ShardFiles(bases, deltas, incomplete, temporary)


# ---- rows <-> Arrow ---------------------------------------------------------------------------
def _summary_tables(summaries: dict[str, str], bases: dict[str, SummaryBase | None]) -> tuple[pa.Table, pa.Table]:
    return (pa.table({"hash": list(summaries), "summary": list(summaries.values())}, schema=SUMMARY_SCHEMA),
            pa.Table.from_pylist([{"item": item, "digest": base.digest, "covered": list(base.covered)}
                                  for item, base in bases.items() if base is not None], schema=BASE_SCHEMA))


def _base_tables(state: Base) -> tuple[pa.Table, ...]:
    """The tables of a base, in BASE_FILES order."""
    return (state.entities, state.relations, *_summary_tables(state.summaries, state.bases), state.aliases)


def _rows(state: Base) -> GraphRows:
    aliases = {name: state.aliases[name].to_pylist() for name in state.aliases.column_names}
    return GraphRows(state.entities, state.relations, state.summaries, state.bases, aliases)


# ---- base ------------------------------------------------------------------------------------
def _write_table(workspace: Workspace, table: pa.Table, path: str) -> None:
    sink = pa.BufferOutputStream()
    feather.write_feather(table, sink, compression="zstd")
    workspace.write_bytes(sink.getvalue().to_pybytes(), *path.split("/"))


def _read_table(workspace: Workspace, path: str, schema: pa.Schema) -> pa.Table:
    if workspace.fs.get_file_info(path).type == pafs.FileType.NotFound:
        return schema.empty_table()
    with workspace.fs.open_input_file(path) as src:
        table = pq.read_table(src) if path.endswith(".parquet") else feather.read_table(src)
    return table.select(schema.names).cast(schema)


class Base(NamedTuple):
    """A base's tables, summaries and summary bases."""

    entities: pa.Table
    relations: pa.Table
    summaries: dict[str, str]
    bases: dict[str, SummaryBase | None]
    aliases: pa.Table  # ALIAS_SCHEMA (a base written before aliases existed: none)


def _write_base(workspace: Workspace, folder: str, version: int, tables: tuple[pa.Table, ...]) -> None:
    """Write base-V: its files, then the marker that makes it visible."""
    root = f"graph/{folder}/base-{version:010d}"
    for name, table in zip(BASE_FILES, tables):
        _write_table(workspace, table, f"{root}/{name}")
    workspace.write_bytes(json.dumps({"version": version, "entities_rows": tables[0].num_rows,
                                      "relations_rows": tables[1].num_rows}).encode(), *f"{root}/{COMPLETE}".split("/"))


def _read_base(workspace: Workspace, path: str | None) -> Base:
    if path is None:
        return Base(ENTITY_SCHEMA.empty_table(), RELATION_SCHEMA.empty_table(), {}, {}, ALIAS_SCHEMA.empty_table())
    suffix = "parquet" if workspace.fs.get_file_info(f"{path}/entities.parquet").type == pafs.FileType.File else "arrow"
    summaries = _read_table(workspace, f"{path}/summaries.{suffix}", SUMMARY_SCHEMA)
    bases = _read_table(workspace, f"{path}/summary_bases.{suffix}", BASE_SCHEMA)
    return Base(_read_table(workspace, f"{path}/entities.{suffix}", ENTITY_SCHEMA),
                _read_table(workspace, f"{path}/relations.{suffix}", RELATION_SCHEMA),
                dict(zip(summaries["hash"].to_pylist(), summaries["summary"].to_pylist())),
                {item: SummaryBase(digest, tuple(covered)) for item, digest, covered in zip(
                    bases["item"].to_pylist(), bases["digest"].to_pylist(), bases["covered"].to_pylist())},
                _read_table(workspace, f"{path}/aliases.{suffix}", ALIAS_SCHEMA))


# ---- deltas ----------------------------------------------------------------------------------
COVERED_SEP = "\x1f"  # joins a summary base's fragment keys (hex digests) in a delta row


def _delta_table(rows: GraphRows) -> pa.Table:
    """One file for a change set, one row kind per column set: "e" entity mentions (key in
    key_a), "r" relation mentions, "s" summaries (hash in key_a, text in description), "b"
    summary bases (item in key_a, digest in key_b, covered fragment keys in keywords; no
    digest: the item has none any more), "a" alias links (keys in key_a and key_b, reason in
    description; none: unlinked)."""
    e, r, a = rows.entities.to_pydict(), rows.relations.to_pydict(), rows.aliases
    bases = [(item, base.digest if base else None, COVERED_SEP.join(base.covered) if base else None)
             for item, base in rows.bases.items()]
    kinds = [("e", len(e["key"])), ("r", len(r["key_a"])), ("s", len(rows.summaries)), ("b", len(bases)), ("a", len(a["key"]))]

    def column(**parts: list[Any]) -> list[Any]:
        return [value for kind, n in kinds for value in parts.get(kind, [None] * n)]

    columns = {
        "kind": [kind for kind, n in kinds for _ in range(n)],
        "key_a": column(e=e["key"], r=r["key_a"], s=list(rows.summaries), b=[b[0] for b in bases], a=a["key"]),
        "key_b": column(r=r["key_b"], b=[b[1] for b in bases], a=a["other"]),
        "chunk_id": column(e=e["chunk_id"], r=r["chunk_id"]),
        "keywords": column(r=r["keywords"], b=[b[2] for b in bases]),
        "description": column(e=e["description"], r=r["description"], s=list(rows.summaries.values()), a=a["reason"]),
        "weight": column(r=r["weight"]),
        "file_path": column(e=e["file_path"], r=r["file_path"]),
        "name_a": column(r=r["name_a"]), "name_b": column(r=r["name_b"]),
        "type": column(e=e["type"]), "name": column(e=e["name"]),
    }
    return pa.table(columns, schema=DELTA_SCHEMA)


def _read_delta(workspace: Workspace, path: str) -> Base:
    """A delta as a Base; entity and relation rows with a null description are removals, alias
    rows with a null reason unlinkings."""
    with workspace.fs.open_input_file(path) as src:
        table = feather.read_table(src)

    def of(kind: str) -> pa.Table:
        return table.filter(pc.equal(table["kind"], kind))

    entities = of("e").rename_columns(["key" if c == "key_a" else c for c in table.column_names])
    summaries, bases, aliases = of("s"), of("b"), of("a")
    return Base(entities.select(ENTITY_SCHEMA.names).cast(ENTITY_SCHEMA),
                of("r").select(RELATION_SCHEMA.names).cast(RELATION_SCHEMA),
                dict(zip(summaries["key_a"].to_pylist(), summaries["description"].to_pylist())),
                {item: SummaryBase(digest, tuple(covered.split(COVERED_SEP)) if covered else ()) if digest else None
                 for item, digest, covered in zip(bases["key_a"].to_pylist(), bases["key_b"].to_pylist(),
                                                  bases["keywords"].to_pylist())},
                pa.table([aliases["key_a"], aliases["key_b"], aliases["description"]], schema=ALIAS_SCHEMA))


def _entry_ids(table: pa.Table, keys: tuple[str, ...]) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(*(table[k] for k in keys), "\x1f")


def _fold_rows(base: pa.Table, deltas: list[pa.Table], keys: tuple[str, ...], present: str = "description") -> pa.Table:
    """Base rows with every entry (``keys``: item and chunk) a delta touched replaced by that
    entry in the latest delta that touched it (removed when its row there has no ``present``)."""
    later: set[str] = set()
    kept = []
    for delta in reversed(deltas):
        ids = _entry_ids(delta, keys).to_pylist()
        newest = pa.array([i not in later for i in ids], pa.bool_())
        kept.append(delta.filter(pc.and_(newest, pc.is_valid(delta[present]))))
        later.update(ids)
    if later and base.num_rows:
        stale = pc.is_in(_entry_ids(base, keys), value_set=pa.array(sorted(later), pa.string()))
        if pc.any(stale).as_py():  # only re-indexed or deleted chunks' entries: new chunks' are not in the base
            base = base.filter(pc.invert(stale))  # (a filter copies the whole table: 0.1-0.6 s at 500k rows)
    return pa.concat_tables([base, *reversed(kept)])


def _fold(base: Base, deltas: list[Base]) -> Base:
    summaries, bases = dict(base.summaries), dict(base.bases)
    for delta in deltas:
        summaries.update(delta.summaries)
        for item, value in delta.bases.items():
            if value is None:
                bases.pop(item, None)
            else:
                bases[item] = value
    return Base(_fold_rows(base.entities, [d.entities for d in deltas], ("key", "chunk_id")),
                _fold_rows(base.relations, [d.relations for d in deltas], ("key_a", "key_b", "chunk_id")),
                summaries, bases, _fold_rows(base.aliases, [d.aliases for d in deltas], ("key", "other"), "reason"))


def _state(workspace: Workspace, folder: str, version: int, files: ShardFiles | None = None) -> tuple[Base, int | None, list[int]]:
    """The shard's committed state at ``version``: (folded base, base version, delta versions)."""
    files = files or list_files(workspace, folder)
    base = files.newest_base(version)
    deltas = files.deltas_after(base, version)
    state = _fold(_read_base(workspace, files.bases[base][0] if base is not None else None),
                  [_read_delta(workspace, files.deltas[v][0]) for v in deltas])
    return state, base, deltas


def committed_state(workspace: Workspace, folder: str, version: int) -> Base:
    """A shard folder's committed state at ``version`` (its base and deltas folded), from the files."""
    return _state(workspace, folder, version)[0]


def write_base(workspace: Workspace, folder: str, version: int, state: Base) -> None:
    """Write ``state`` as the complete base of ``version`` in ``folder``."""
    _write_base(workspace, folder, version, _base_tables(state))


# ---- what the shard actor calls ------------------------------------------------------------------
def load_snapshot(workspace: Workspace, shard: ShardGraph, version: int | None = None) -> None:
    """Fill an empty shard with its committed state (``version``: the manifest's graph version)."""
    version = manifests.load(workspace).graph_version if version is None else version
    state, _, _ = _state(workspace, snapshot_folder(shard.shard, shard.num_shards), version)
    shard.load_rows(_rows(state))
    shard.mark_saved(version)


def save_snapshot(workspace: Workspace, shard: ShardGraph, version: int, full_share: float = 0.5) -> str:
    """Write what changed since the last commit as version ``version``: a delta, or a full base
    when there is no base yet or at least ``full_share`` of the items changed. Any other file of
    that version (left by a run that never committed) is removed. Returns "delta", "base" or "none"."""
    folder = snapshot_folder(shard.shard, shard.num_shards)
    files = list_files(workspace, folder)
    has_base = files.newest_base(version - 1) is not None
    changed = shard.changed_rows()
    empty = not (changed.entities.num_rows or changed.relations.num_rows or changed.summaries or changed.bases
                 or changed.aliases["key"])
    kind = "none" if empty and has_base else "base" if not has_base or shard.unsaved_share() >= full_share else "delta"
    stale_base = workspace.path("graph", folder, f"base-{version:010d}")
    if kind != "base" and workspace.fs.get_file_info(stale_base).type != pafs.FileType.NotFound:
        workspace.fs.delete_dir(stale_base)
    if kind != "delta" and version in files.deltas:
        workspace.delete_file(files.deltas[version][0])
    if kind == "base":
        rows = shard.all_rows()
        _write_base(workspace, folder, version, _base_tables(Base(
            rows.entities, rows.relations, rows.summaries, rows.bases, pa.table(rows.aliases, schema=ALIAS_SCHEMA))))
    elif kind == "delta":
        _write_table(workspace, _delta_table(changed), f"graph/{folder}/delta-{version:010d}.arrow")
    return kind


def needs_compaction(workspace: Workspace, folder: str, version: int, ratio: float) -> bool:
    """Whether the deltas on top of the newest base at ``version`` outgrew ``ratio`` x its size
    (or number more than MAX_DELTAS)."""
    files = list_files(workspace, folder)
    base = files.newest_base(version)
    deltas = files.deltas_after(base, version)
    size = sum(files.deltas[v][1] for v in deltas)
    return bool(deltas) and (len(deltas) > MAX_DELTAS or size > ratio * (files.bases[base][1] if base is not None else 0))


def compact(workspace: Workspace, folder: str, version: int) -> None:
    """Fold the committed deltas up to ``version`` into a new base (from the files alone), then
    remove what it replaces. Safe to kill at any point: until its marker is written the new
    base is ignored, and the files it replaces are removed only after."""
    files = list_files(workspace, folder)
    state, base, deltas = _state(workspace, folder, version, files)
    if deltas:
        _write_base(workspace, folder, version, _base_tables(state))
    remove_replaced(workspace, folder, version if deltas else base)


def tidy(workspace: Workspace, folder: str, version: int, ratio: float) -> None:
    """After version ``version`` committed: compact when the deltas outgrew ``ratio`` x the base,
    and remove whatever the newest base replaces."""
    if needs_compaction(workspace, folder, version, ratio):
        compact(workspace, folder, version)
    else:
        remove_replaced(workspace, folder, list_files(workspace, folder).newest_base(version))


def remove_replaced(workspace: Workspace, folder: str, base: int | None) -> None:
    """Delete the bases older than base ``base``, the deltas it covers, an older workspace's
    top-level snapshot, and what killed writers left behind (older unfinished bases,
    temporary files)."""
    if base is None:
        return
    files = list_files(workspace, folder)
    for v, path in files.temporary:
        if v <= base:
            workspace.delete_file(path)
    for v, (path, _) in files.deltas.items():
        if v <= base:
            workspace.delete_file(path)
    for v, path in files.incomplete.items():
        if v < base:
            workspace.fs.delete_dir(path)
    for v, (path, _) in files.bases.items():
        if v < base:
            if v == 0 and path == workspace.path("graph", folder):
                for name in LEGACY_FILES:
                    if workspace.exists("graph", folder, name):
                        workspace.delete_file(workspace.path("graph", folder, name))
            else:
                workspace.fs.delete_dir(path)
