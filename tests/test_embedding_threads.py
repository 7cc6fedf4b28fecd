"""The query-side embedder runs on ``embedding.query_threads`` CPU threads, the indexing
embedders on ``embedding.cpu_threads`` (real MiniLM, no Ray)."""

from __future__ import annotations

import torch

from lightrag_ray.config import EmbeddingConfig
from lightrag_ray.models.embedding import make_embedder, make_query_embedder


def test_query_embedder_uses_query_threads_and_indexing_embedder_cpu_threads():
    config = EmbeddingConfig(cpu_threads=2, query_threads=1)
    before = torch.get_num_threads()
    try:
        query = make_query_embedder(config)
        assert torch.get_num_threads() == 1
        indexing = make_embedder(config)
        assert torch.get_num_threads() == 2
        assert query.embed(["Tiny Tim"]).shape == indexing.embed(["Tiny Tim"]).shape == (1, 384)
    finally:
        torch.set_num_threads(before)
