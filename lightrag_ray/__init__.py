"""lightrag-ray: LightRAG (graph-based retrieval-augmented generation) on Ray.

The public API, loaded on first use so that importing a pure-logic module (e.g.
``lightrag_ray.core.chunking``) never starts Ray or loads a model::

    from lightrag_ray import LocalSession, QueryParam, index_paths, load_settings

    settings = load_settings(overrides={"workspace": "ws"})
    report = index_paths(["docs/"], settings)
    with LocalSession(settings) as session:
        context = session.retrieve("Who founded Acme?", QueryParam(mode="local"))

Layers (imports only point down; ``tests/test_layers.py`` keeps it so): ``config`` <
``core`` < ``models`` / ``ray_runtime`` < ``storage`` < ``index`` / ``query`` < ``service``
< ``serve`` < ``cli``.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "Settings": "lightrag_ray.config",
    "load_settings": "lightrag_ray.config",
    "index_paths": "lightrag_ray.service.indexing",
    "IndexReport": "lightrag_ray.index.pipeline",
    "LocalSession": "lightrag_ray.service.session",
    "QueryEngine": "lightrag_ray.query.engine",
    "QueryParam": "lightrag_ray.query.params",
    "QueryResult": "lightrag_ray.query.engine",
    "QueryContext": "lightrag_ray.core.context",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'lightrag_ray' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
