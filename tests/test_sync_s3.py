"""The sync with the corpus and the workspace on object storage: a real S3 server (moto's, on
127.0.0.1) and a Milvus server, as a multi-node deployment runs it. A shorter random sequence
of changes synced with ``--prune`` gives the workspace of a fresh index of the final corpus,
also after a sync killed midway and run again (tests/test_sync.py says what is compared)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

from lightrag_ray.config import Settings
from tests.s3_server import S3Server
from tests.test_sync import KILLED_SYNC, Corpus, assert_same_workspace, contexts, sync, sync_settings


def mirror(folder: Path, server: S3Server, bucket: str, uploaded: dict[str, bytes]) -> str:
    """Make ``s3://bucket/corpus`` hold ``folder``'s files: changed and new ones written, gone
    ones deleted (``uploaded``: what is there now, kept up to date); returns the URI."""
    fs = server.filesystem()
    server.bucket(bucket)
    now = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    for name in set(uploaded) - set(now):
        fs.delete_file(f"{bucket}/corpus/{name}")
    for name, data in now.items():
        if uploaded.get(name) != data:
            with fs.open_output_stream(f"{bucket}/corpus/{name}") as out:
                out.write(data)
    uploaded.clear()
    uploaded.update(now)
    return f"s3://{bucket}/corpus"


def s3_settings(server: S3Server, name: str, milvus_uri: str) -> Settings:
    return sync_settings(server.bucket("workspaces") + f"/{name}",
                         vectors={"uri": milvus_uri, "collection_prefix": f"s3sync_{name}"})


def test_a_sync_on_object_storage_killed_and_run_again_gives_the_workspace_of_a_fresh_index(
        ray_cluster, s3_server, milvus_server, tmp_path):
    rng = random.Random(5)
    corpus = Corpus(tmp_path / "corpus", rng, files=10)
    uploaded: dict[str, bytes] = {}
    uri = mirror(corpus.root, s3_server, "corpus-a", uploaded)
    settings = s3_settings(s3_server, "synced", milvus_server)
    assert sync(settings, uri).docs_new == 10 + 4
    for operation in ("edit", "rename", "records", "append", "delete", "move"):
        corpus.step(operation)
    mirror(corpus.root, s3_server, "corpus-a", uploaded)
    report = sync(settings, uri)
    assert report.sources_replaced and report.sources_moved and report.sources_removed, report.to_dict()
    assert report.files < len(uploaded)  # unchanged objects are not read (size and mtime from the listing)

    for operation in ("edit_middle", "restore", "records"):
        corpus.step(operation)
    mirror(corpus.root, s3_server, "corpus-a", uploaded)
    killed = subprocess.run([sys.executable, "-c", KILLED_SYNC, settings.model_dump_json(), uri, "removal"],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "RAY_ADDRESS": ray_cluster.get_runtime_context().gcs_address})
    assert killed.returncode == -9, killed.stderr[-2000:]
    sync(settings, uri)

    fresh = s3_settings(s3_server, "fresh", milvus_server)
    sync(fresh, uri)
    assert_same_workspace(settings, fresh)
    assert contexts(settings) == contexts(fresh)
