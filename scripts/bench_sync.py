"""Sync benchmark: a corpus indexed, then changed (documents edited, renamed, deleted) and synced
with ``lightrag-ray index --prune`` (method and figures: docs/benchmarks.md, "Sync").

Runs (each an ``index`` CLI subprocess on one Ray cluster, with bench_corpus's corpus, hash
embeddings and Milvus server): initial; re-run with nothing changed; detection
(``--prune --dry-run``); sync; the edited documents alone into an empty workspace; the final
corpus fresh, compared with the synced workspace (graph and vector ids); with ``--s3`` the
final corpus from an S3 server, indexed and re-run.

    PYTHONPATH=. .venv/bin/python scripts/bench_sync.py --chunks 10000 --store server --mode fast --s3 \
        --workdir /tmp/bench_sync --json-out /tmp/bench_sync/fast.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_corpus import (ROOT, HashEmbeddings, MilvusStandalone, RayCluster, ScriptedLLM, driver_env,
                          drop_collections, generate_corpus, graph_differences, load_settings, load_stored,
                          log, machine_info, run_index, start_milvus)
from bench_corpus import index_command as corpus_index_command
from bench_kit import command_line, write_json

from lightrag_ray.config import ChunkingConfig
from lightrag_ray.storage.vectors import KINDS, TEXT_SUFFIX
from tests.s3_server import S3Server


def change_corpus(folder: Path, rng: random.Random, edit: float, rename: float, delete: float) -> dict[str, list[str]]:
    """Edit, rename and delete shares of the .txt files under ``folder``; returns the names."""
    files = sorted(folder.rglob("*.txt"))
    picked = rng.sample(files, round(len(files) * (edit + rename + delete)))
    cut = [round(len(files) * edit), round(len(files) * (edit + rename))]
    changed: dict[str, list[str]] = {"edited": [], "renamed": [], "deleted": []}
    for number, path in enumerate(picked):
        if number < cut[0]:
            text = path.read_text(encoding="utf-8").rstrip()
            head = text[: text.rstrip(".").rfind(". ") + 1] or text
            path.write_text(f"{head} This document was edited in revision {number}.", encoding="utf-8")
            changed["edited"].append(str(path))
        elif number < cut[1]:
            path.rename(path.with_name(f"renamed-{path.name}"))
            changed["renamed"].append(str(path))
        else:
            path.unlink()
            changed["deleted"].append(str(path))
    return changed


def vector_ids(uri: str, prefix: str) -> dict[str, set[str]]:
    """The ids stored in a run's three collections (a Milvus server, or a Lite file)."""
    from pymilvus import MilvusClient

    client = MilvusClient(uri=uri)
    try:
        names = set(client.list_collections())  # a kind's collection: with BM25 text, or dense only
        return {kind: _all_ids(client, next(name for name in (f"{prefix}_{kind}{TEXT_SUFFIX}", f"{prefix}_{kind}")
                                            if name in names)) for kind in KINDS}
    finally:
        client.close()


def _all_ids(client: Any, collection: str) -> set[str]:
    ids: set[str] = set()
    client.load_collection(collection)
    iterator = client.query_iterator(collection, filter='id != ""', output_fields=["id"], batch_size=8192)
    while batch := iterator.next():
        ids.update(row["id"] for row in batch)
    iterator.close()
    return ids


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=10000, help="corpus size in chunks (about one per document)")
    parser.add_argument("--mode", choices=["fast", "llm"], default="fast", help="extraction mode (llm: scripted LLM)")
    parser.add_argument("--store", choices=["server", "lite"], default="server", help="Milvus server or Lite")
    parser.add_argument("--edit", type=float, default=0.01, help="share of documents edited")
    parser.add_argument("--rename", type=float, default=0.005, help="share of documents renamed")
    parser.add_argument("--delete", type=float, default=0.005, help="share of documents deleted")
    parser.add_argument("--s3", action="store_true", help="also time the re-run over the corpus on an S3 server")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray cluster")
    parser.add_argument("--chunk-tokens", type=int, default=ChunkingConfig().chunk_tokens)
    parser.add_argument("--overlap-tokens", type=int, default=ChunkingConfig().overlap_tokens)
    parser.add_argument("--workdir", help="work folder (default: a temporary one, removed)")
    parser.add_argument("--json-out", help="write every figure to this JSON file")
    args = parser.parse_args(argv)
    args.embed_batch, args.set, args.interval, args.dim = 64, [], 1.0, 384  # what bench_corpus's helpers read
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    command = command_line("bench_sync.py", argv)
    workdir = Path(args.workdir).resolve() if args.workdir else Path(tempfile.mkdtemp(prefix="bench_sync_"))
    embeddings = HashEmbeddings(dim=args.dim).start()
    llm = ScriptedLLM(latency_s=0.0).start() if args.mode == "llm" else None
    server = MilvusStandalone(workdir / "milvus") if args.store == "server" else None
    s3 = S3Server(workdir / "s3").start() if args.s3 else None
    if s3 is not None:  # before Ray starts: its workers read the corpus from the S3 server
        os.environ.update(s3.env())
    cluster = None
    runs: dict[str, Any] = {}
    try:
        if server is not None:
            start_milvus(server)
        cluster = RayCluster(1, args.cpus, Path(tempfile.mkdtemp(prefix="bsray_", dir="/tmp")), 2000)
        info = machine_info(cluster)
        corpus = generate_corpus(workdir / "corpus", args.chunks, args.seed, args.chunk_tokens, args.overlap_tokens,
                                 ChunkingConfig().encoding)
        live = workdir / "live"
        shutil.rmtree(live, ignore_errors=True)
        shutil.copytree(corpus.folder, live)

        def store_uri(workspace: str) -> str:
            if server is not None:
                return server.uri
            return load_settings(overrides={"workspace": str(workdir / "ws" / workspace)}, environ={}).milvus_uri()

        def index_command(folder: str, workspace: str, *flags: str) -> list[str]:
            return corpus_index_command(folder, workdir / "ws" / workspace, args, cluster.address, llm, server, *flags)

        def run(label: str, folder: str, workspace: str, *flags: str, env_extra: dict[str, str] | None = None
                ) -> dict[str, Any]:
            prefix = "bs_" + workspace.replace("-", "_")
            if label in ("initial", "edited only", "fresh") or label.startswith("s3 initial"):
                shutil.rmtree(workdir / "ws" / workspace, ignore_errors=True)
                if server is not None:
                    drop_collections(server.uri, prefix)
            command = index_command(folder, workspace, *flags)
            (workdir / "ws").mkdir(parents=True, exist_ok=True)
            env = {**driver_env(args, embeddings, prefix), **(env_extra or {})}
            log(f"{label}: {folder}")
            result = run_index(command, env, workdir / "ws" / f"{workspace}.{label.replace(' ', '_')}.log",
                               args.interval, {}, label)
            result.pop("roles", None)
            runs[label] = result
            return result

        run("initial", str(live), "synced")
        run("re-run, nothing changed", str(live), "synced")
        changed = change_corpus(live, random.Random(args.seed), args.edit, args.rename, args.delete)
        started = time.perf_counter()
        dry = subprocess.run(index_command(str(live), "synced", "--prune", "--dry-run"), capture_output=True,
                             text=True, cwd=ROOT, env=driver_env(args, embeddings, "bs_synced"))
        if dry.returncode:
            raise RuntimeError(f"index --dry-run failed: {dry.stderr[-3000:]}")
        runs["detection"] = {"wall_s": round(time.perf_counter() - started, 2), "exit_code": dry.returncode,
                             "report": {k: v for k, v in json.loads(dry.stdout).items() if isinstance(v, int)}}
        run("sync", str(live), "synced", "--prune")
        edited_only = workdir / "edited_only"
        shutil.rmtree(edited_only, ignore_errors=True)
        edited_only.mkdir()
        for path in changed["edited"]:
            shutil.copy(path, edited_only / Path(path).name)
        run("edited only", str(edited_only), "edited-only")
        run("fresh", str(live), "fresh")
        got = load_stored(load_settings(overrides={"workspace": str(workdir / "ws" / "synced")}, environ={}))
        want = load_stored(load_settings(overrides={"workspace": str(workdir / "ws" / "fresh")}, environ={}))
        problems, _ = graph_differences(got, want)
        same_vectors = vector_ids(store_uri("synced"), "bs_synced") == vector_ids(store_uri("fresh"), "bs_fresh")
        comparison = {"graph_equal": not problems, "differences": problems[:20], "vector_ids_equal": same_vectors}
        if s3 is not None:
            s3.upload(live, "bench", "live")
            run("s3 initial", "s3://bench/live", "s3", env_extra=s3.env())
            run("s3 re-run, nothing changed", "s3://bench/live", "s3", env_extra=s3.env())
    finally:
        if cluster is not None:
            cluster.shutdown()
        for service in (server, llm, s3):
            if service is not None:
                service.stop()
        embeddings.stop()
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)

    print(f"\n## sync of {len(changed['edited'])} edited, {len(changed['renamed'])} renamed, "
          f"{len(changed['deleted'])} deleted of {corpus.documents} documents ({corpus.chunks} chunks): "
          f"{args.mode} mode, Milvus {args.store}\n")
    print("| run | wall s | files read | new docs | replaced | moved | removed | chunks extracted | cached | LLM requests |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, result in runs.items():
        r = result["report"]
        print(f"| {label} | {result['wall_s']} | {r.get('files', '')} | {r.get('docs_new', '')} | "
              f"{r.get('sources_replaced', r.get('replaced', ''))} | {r.get('sources_moved', r.get('moved', ''))} | "
              f"{r.get('sources_removed', r.get('removed', ''))} | {r.get('chunks_extracted', '')} | "
              f"{r.get('chunks_cached', '')} | {r.get('llm_requests', '')} |")
    sync_stages = runs["sync"]["report"].get("stage_seconds", {})
    print(f"\nsync stages (s): {', '.join(f'{k} {v}' for k, v in sync_stages.items())}")
    ratio = runs["sync"]["wall_s"] / runs["edited only"]["wall_s"]
    print(f"sync / edited only: {ratio:.2f}x (target <= 1.5x)")
    print(f"re-run with nothing changed, local: {runs['re-run, nothing changed']['wall_s']} s (target < 15 s)")
    if "s3 re-run, nothing changed" in runs:
        print(f"re-run with nothing changed, S3: {runs['s3 re-run, nothing changed']['wall_s']} s (target < 60 s)")
    print(f"synced vs fresh: graph {'EQUAL' if comparison['graph_equal'] else 'DIFFERENT'}, vector ids "
          f"{'equal' if comparison['vector_ids_equal'] else 'DIFFERENT'}")
    for problem in comparison["differences"][:10]:
        print(f"  {problem[:300]}")
    print(f"\nmachine: {info.get('machine')}; Ray {info.get('ray_cluster')}; command: {command}")
    write_json(args.json_out, {"command": command, "machine": info, "runs": runs,
                               "changed": {k: len(v) for k, v in changed.items()},
                               "comparison": comparison, "sync_over_edited_only": ratio})
    if not comparison["graph_equal"] or not comparison["vector_ids_equal"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
