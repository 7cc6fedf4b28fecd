"""The two versions of a shard's graph: the live one the writer changes, and the published
one readers see (pure Python, no Ray).

While no write job is open they are the same. While one is open, ``PublishedState`` keeps
the pre-job data of every node and edge the job touched (``None``: it did not exist) and
answers from that, and from the live graph for everything else; so its cost grows with
what the job touched, not with the graph, and reads outside jobs pay nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

import networkx as nx

Pair = tuple[str, str]
Data = dict[str, Any]  # node: mentions, owned; edge: mentions, weight
Links = dict[str, str]  # an entity's aliases: other entity key -> reason (core.alias_rules)


def pair(a: str, b: str) -> Pair:
    """An undirected edge as (smaller key, larger key)."""
    return (a, b) if a < b else (b, a)


class LiveState:
    """The graph as the writer has it now."""

    def __init__(self, graph: nx.Graph, summaries: dict[str, str], aliases: dict[str, Links]) -> None:
        self.graph = graph
        self.summaries = summaries
        self.alias_links = aliases

    def node(self, key: str) -> Data | None:
        return self.graph.nodes.get(key)

    def edge(self, a: str, b: str) -> Data | None:
        return self.graph.get_edge_data(a, b)

    def neighbors(self, key: str) -> Collection[str]:
        return self.graph.adj[key] if key in self.graph else ()

    def keys(self) -> Iterable[str]:
        return self.graph.nodes

    def pairs(self) -> Iterable[Pair]:
        return (pair(a, b) for a, b in self.graph.edges)

    def summary(self, digest: str) -> str | None:
        return self.summaries.get(digest)

    def aliases(self, key: str) -> Links:
        return self.alias_links.get(key, {})


class PublishedState:
    """The graph as of the last publish, while a write job changes the live one."""

    def __init__(self, live: LiveState) -> None:
        self.live = live
        self.nodes: dict[str, Data | None] = {}  # pre-job data of touched nodes
        self.edges: dict[Pair, Data | None] = {}  # pre-job data of touched edges
        self.touched: dict[str, set[str]] = {}  # key -> other endpoints of its touched edges
        self.new_summaries: set[str] = set()
        self.bases: dict[str, Any] = {}  # item id -> pre-job SummaryBase (None: it had none)
        self.alias_links: dict[str, Links | None] = {}  # pre-job aliases of touched keys (None: it had none)

    # ---- called by the writer before it changes an item -----------------------------------
    def remember_node(self, key: str) -> None:
        if key not in self.nodes:
            data = self.live.node(key)
            self.nodes[key] = None if data is None else {"mentions": dict(data["mentions"]), "owned": data["owned"]}

    def remember_edge(self, a: str, b: str) -> None:
        edge = pair(a, b)
        if edge not in self.edges:
            data = self.live.edge(a, b)
            self.edges[edge] = None if data is None else {"mentions": dict(data["mentions"]), "weight": data["weight"]}
            self.touched.setdefault(a, set()).add(b)
            self.touched.setdefault(b, set()).add(a)

    def remember_base(self, item: str, base: Any) -> None:
        self.bases.setdefault(item, base)

    def remember_aliases(self, key: str) -> None:
        if key not in self.alias_links:
            links = self.live.alias_links.get(key)
            self.alias_links[key] = None if links is None else dict(links)

    # ---- the published graph ----------------------------------------------------------------
    def node(self, key: str) -> Data | None:
        return self.nodes[key] if key in self.nodes else self.live.node(key)

    def edge(self, a: str, b: str) -> Data | None:
        edge = pair(a, b)
        return self.edges[edge] if edge in self.edges else self.live.edge(a, b)

    def neighbors(self, key: str) -> Collection[str]:
        others = self.touched.get(key)
        if not others:
            return self.live.neighbors(key)
        kept = [o for o in self.live.neighbors(key) if o not in others]
        return kept + [o for o in others if self.edges[pair(key, o)] is not None]

    def keys(self) -> Iterable[str]:
        yield from (k for k in self.live.keys() if k not in self.nodes or self.nodes[k] is not None)
        yield from (k for k, data in self.nodes.items() if data is not None and self.live.node(k) is None)

    def pairs(self) -> Iterable[Pair]:
        yield from (e for e in self.live.pairs() if e not in self.edges or self.edges[e] is not None)
        yield from (e for e, data in self.edges.items() if data is not None and self.live.edge(*e) is None)

    def summary(self, digest: str) -> str | None:
        return None if digest in self.new_summaries else self.live.summary(digest)

    def aliases(self, key: str) -> Links:
        return (self.alias_links[key] or {}) if key in self.alias_links else self.live.aliases(key)
