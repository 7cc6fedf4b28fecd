"""The sharded knowledge graph: merge rules, shard actors, router."""
