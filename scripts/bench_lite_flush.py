"""Milvus Lite's finishing work: how long the owner of a Lite file takes, once an indexing run's
vectors are in, to flush and index them alone (the run's ``finish vectors`` step).

For each ``--vectors`` N: a fresh Lite file, N random unit vectors (``--dim``) upserted in
batches of ``--batch`` into the entities collection with a 200-character text field (as the
embedding actors send them), then the store closed, which makes milvus-lite flush its
write-ahead log into indexed segments. Prints upsert and close seconds and the close time
per vector, the figure docs/configuration.md quotes for when to use a Milvus server.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lightrag_ray.storage.vectors import MilvusStore  # noqa: E402


def measure(vectors: int, dim: int, batch: int, folder: Path) -> dict[str, float]:
    """Upsert then close one fresh Lite file; seconds of each and ms per vector of the close."""
    store = MilvusStore(str(folder / f"lite-{vectors}.db"), dim, searchable=False)
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    for start in range(0, vectors, batch):
        block = rng.standard_normal((min(vectors, start + batch) - start, dim)).astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        store.upsert("entities", [{"id": f"e{start + i}", "vector": vector, "text": f"{start + i:08d}" * 25}
                                  for i, vector in enumerate(block)])
    upsert_s = time.perf_counter() - started
    started = time.perf_counter()
    store.close()
    close_s = time.perf_counter() - started
    return {"vectors": vectors, "upsert_s": round(upsert_s, 2), "upserts_per_s": round(vectors / upsert_s),
            "close_s": round(close_s, 2), "close_ms_per_vector": round(1000 * close_s / vectors, 3)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--vectors", type=int, nargs="+", default=[20_000, 60_000], help="vectors per file")
    parser.add_argument("--dim", type=int, default=384, help="vector dimension (MiniLM's)")
    parser.add_argument("--batch", type=int, default=64, help="vectors per upsert (an embedding batch)")
    parser.add_argument("--json-out", default=None, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_lite_flush_") as folder:
        rows = [measure(n, args.dim, args.batch, Path(folder)) for n in args.vectors]
    print("| vectors | upsert s | upserts/s | close (flush + index) s | close ms per vector |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['vectors']} | {r['upsert_s']} | {r['upserts_per_s']} | {r['close_s']} | {r['close_ms_per_vector']} |")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=2),
                                       encoding="utf-8")


if __name__ == "__main__":
    main()
