"""The alias pass: after a run has merged its entities, link the new ones to their name
variants on every shard (core.alias_rules), in three parallel rounds over the shards.

1. Each shard gives the entities it gained since the last pass.
2. Each shard gives its entities that share a block key with them (at most MAX_BLOCK + 1 per
   block: bigger blocks are skipped anyway).
3. The links the rules find (and the unlinkings of names that became ambiguous) go to the
   shards of both ends.

The work is bounded by the new entities times MAX_BLOCK, whatever the size of the graph.
"""

from __future__ import annotations

from typing import Any

from lightrag_ray.core.alias_rules import MAX_BLOCK, Name, block_keys, find_aliases


def link_aliases(router: Any, everything: bool = False) -> int:
    """Link the entities created since the last pass (``everything``: all of them, for a
    workspace built before aliases existed) to their variants (``router``: a GraphRouter);
    returns how many links were made or removed (each end counts once)."""
    if everything:
        router.relink_all()
    new = [Name.of(row) for row in router.new_names()]
    if not new:
        return 0
    blocks = sorted({block for name in new for block in block_keys(name.key)})
    members = {block: [Name.of(row) for row in found] for block, found in router.block_members(blocks, MAX_BLOCK).items()}
    verdicts = find_aliases({name.key for name in new}, members)
    if not verdicts:
        return 0
    return router.set_aliases([(a, b, reason) for (a, b), reason in sorted(verdicts.items())])
