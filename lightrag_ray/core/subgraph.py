"""Subgraph around an entity for graph viewers, in LightRAG Server's ``/graphs`` shape and property names
(``entity_id``, ``entity_type``, ``source_id``/``file_path`` joined with ``<SEP>``, ...); their label search."""

from __future__ import annotations

from typing import Any

from lightrag_ray.core.graph.contract import AwaitedGraph
from lightrag_ray.core.names import entity_key


GRAPH_FIELD_SEP = "<SEP>"  # LightRAG's separator of the ids and paths in one graph property


def _provenance(record: dict[str, Any]) -> dict[str, str]:
    """Source chunk ids and file paths as LightRAG stores them: ``<SEP>``-joined strings."""
    return {"source_id": GRAPH_FIELD_SEP.join(record["source_ids"]),
            "file_path": GRAPH_FIELD_SEP.join(record["file_paths"])}


def entity_properties(entity: dict[str, Any]) -> dict[str, Any]:
    """An entity view's properties as LightRAG's graph stores them."""
    return {"entity_id": entity["name"], "entity_type": entity["type"], "description": entity["description"],
            **_provenance(entity), "degree": entity["degree"]}


def relation_properties(relation: dict[str, Any]) -> dict[str, Any]:
    """A relation view's properties as LightRAG's graph stores them."""
    return {"weight": relation["weight"], "description": relation["description"], "keywords": relation["keywords"],
            **_provenance(relation)}


def _node(entity: dict[str, Any]) -> dict[str, Any]:
    return {"id": entity["name"], "labels": [entity["name"]], "properties": entity_properties(entity)}


def _edge(relation: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    return {
        "id": relation["id"], "type": "DIRECTED", "source": names[relation["source_key"]],
        "target": names[relation["target_key"]], "properties": relation_properties(relation),
    }


def _knowledge_graph(entities: list[dict[str, Any]], relations: list[dict[str, Any]], truncated: bool) -> dict[str, Any]:
    names = {e["key"]: e["name"] for e in entities}
    edges = [r for r in relations if r["source_key"] in names and r["target_key"] in names]
    return {
        "nodes": [_node(e) for e in entities],
        "edges": [_edge(r, names) for r in sorted(edges, key=lambda r: r["id"])],
        "is_truncated": truncated,
    }


async def subgraph(graph: AwaitedGraph, label: str, max_depth: int, max_nodes: int) -> dict[str, Any]:
    """Entities within ``max_depth`` hops of ``label`` (breadth first, at most ``max_nodes``),
    one parallel shard round per hop; ``label="*"`` gives the best-connected entities.
    ``graph``: the awaited READ operations of the graph contract (a ShardReader)."""
    if label == "*":
        whole = await graph.export()
        ranked = sorted(whole["entities"], key=lambda e: (-e["degree"], e["name"]))
        return _knowledge_graph(ranked[:max_nodes], whole["relations"], len(ranked) > max_nodes)
    start = entity_key(label)
    order = [start]
    seen = {start}
    frontier = [start]
    relations: dict[str, dict[str, Any]] = {}
    truncated = False
    for _ in range(max_depth):
        if not frontier:
            break
        found = await graph.neighborhood(frontier)
        frontier = []
        for relation in found["relations"]:
            relations[relation["id"]] = relation
            for key in (relation["source_key"], relation["target_key"]):
                if key in seen:
                    continue
                if len(order) >= max_nodes:
                    truncated = True
                    continue
                seen.add(key)
                order.append(key)
                frontier.append(key)
    entities = (await graph.fetch(order, []))["entities"]
    return _knowledge_graph(entities, list(relations.values()), truncated)


def search_labels(labels: list[str], query: str, limit: int) -> list[str]:
    """Names holding ``query`` (any case): the exact name first, then names starting with it,
    then the others; shorter names first within each group."""
    needle = query.strip().lower()
    hits = [name for name in labels if needle and needle in name.lower()]
    hits.sort(key=lambda name: (name.lower() != needle, not name.lower().startswith(needle), len(name), name))
    return hits[:limit]
