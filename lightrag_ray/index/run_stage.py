"""One step of an indexing run (index.pipeline.IndexRun.stages): its name, what it needs open,
what it reads and writes, when it runs and the work. The run opens a stage's resources the
first time a stage needs them, times the stage, reports it and checks the stop in one loop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

# What a stage may need open (IndexRun._open): the Ray cluster; the embedding actors; the
# workspace's graph shards; where the actors store vectors; the write job that readers of a
# kept graph (the Serve app's) see only once it is published.
Resource = Literal["ray", "embedding", "graph", "vectors", "job"]
RESOURCES: tuple[Resource, ...] = ("ray", "embedding", "graph", "vectors", "job")  # the order they open in


def always() -> bool:
    return True


@dataclass(frozen=True)
class Stage:
    """One step of a run: ``run`` does the work, once ``needs`` are open and if ``when`` holds.
    ``reads``/``writes`` name the tables and stores it uses (documentation, and the order the
    list must keep); ``stoppable``: the run's stop is honoured once it is done; ``releases``:
    resources it ends (the commit publishes the write job)."""

    name: str  # its key in IndexReport.stage_seconds
    run: Callable[[], None]
    needs: tuple[Resource, ...] = ()
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    when: Callable[[], bool] = always
    stoppable: bool = False
    releases: tuple[Resource, ...] = ()

    def opening_order(self) -> list[Resource]:
        """Its needs in the order resources open (the embedding actors load their model while
        the shards load theirs; vectors need the model's dimension; the job the shards)."""
        return [resource for resource in RESOURCES if resource in self.needs]
