"""What a Ray cluster started by lightrag_ray gives its workers and keeps (run by
tests/test_local_cluster.py in a fresh process, as the CLI would start one): a plain task and a
graph shard's calls are run, then the GCS's timeline is read. Prints a JSON line: the timeline's
event names and the malloc settings a worker sees."""

from __future__ import annotations

import json
import os
import sys
import time

import ray

from lightrag_ray.config import Settings
from lightrag_ray.ray_runtime import ensure_ray
from lightrag_ray.storage.graph.actor import GraphShard


@ray.remote(num_cpus=0.1)
def plain_task() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name.startswith("MALLOC_")}


def main(workspace: str) -> None:
    ensure_ray(Settings(workspace=workspace, ray={"address": "local"}))
    shard = GraphShard.options(num_cpus=0.1).remote(workspace, 0, 1, 100)
    malloc, *_ = ray.get([plain_task.remote(), *(shard.ping.remote() for _ in range(3))])
    time.sleep(3)  # task events reach the GCS once a second
    names = sorted({str(event.get("name")) for event in ray.timeline()})
    ray.shutdown()
    print(json.dumps({"names": names, "malloc": malloc}))


if __name__ == "__main__":
    main(sys.argv[1])
