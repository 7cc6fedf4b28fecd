"""The type checker over the package (mypy, pinned in the test extras, configured in
pyproject.toml): the graph and vector contracts are typed methods (core.transport), so a call
with the wrong arguments on any transport fails here, before any cluster starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_the_package_type_checks():
    result = _mypy()
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_wrong_call_on_a_transport_is_caught(tmp_path):
    """The check has teeth: contract methods keep their signatures on every transport (the
    writer's router, the awaited reader, the Lite owner's writer, the awaited vector reads)."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from lightrag_ray.storage.graph.writer import GraphRouter\n"
        "from lightrag_ray.storage.graph.reader import ShardReader\n"
        "from lightrag_ray.storage.vector_owner import ActorVectorWriter\n"
        "from lightrag_ray.query.stores import ThreadedVectorIndex\n"
        "async def probe(router: GraphRouter, reader: ShardReader, writer: ActorVectorWriter,\n"
        "                index: ThreadedVectorIndex) -> None:\n"
        "    router.fetch(['a'], [('a', 'b')])\n"
        "    router.fetch('a')\n"                       # line 8: a missing argument
        "    found: dict = await reader.fetch(['a'], [])\n"
        "    reader.apply([], [])\n"                    # line 10: readers only read
        "    writer.upsert('chunks', [{'id': 'x'}])\n"
        "    writer.search('chunks', [[0.0]], 'ten')\n"  # line 12: top_k is an int
        "    hits = await index.search('chunks', [[0.0]], 3, ['id'], 7)\n"
        "    hits.no_such_method()\n",                  # line 14: a list of rows
        encoding="utf-8")
    result = _mypy(str(probe))
    lines = sorted({int(line.split(":")[1]) for line in result.stdout.splitlines() if line.startswith(str(probe))})
    assert lines == [8, 10, 12, 14], result.stdout
