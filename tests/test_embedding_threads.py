"""The query-side embedder runs on ``embedding.query_threads`` CPU threads, the indexing
embedders on ``embedding.cpu_threads``: each thread encodes batches of its own with one
torch thread (real MiniLM, no Ray)."""

from __future__ import annotations

import numpy as np
import torch

from lightrag_ray.config import EmbeddingConfig
from lightrag_ray.models.embedding import make_embedder, make_query_embedder

TEXTS = [("Tiny Tim " * n).strip() for n in (1, 40, 3, 90, 7, 2, 55, 12, 1, 30, 4, 200, 9)]


def test_query_embedder_uses_query_threads_and_indexing_embedder_cpu_threads():
    config = EmbeddingConfig(cpu_threads=2, query_threads=1, batch_size=4)
    before = torch.get_num_threads()
    try:
        query = make_query_embedder(config)
        assert query.purpose == "query"  # its calls counted as metrics (MeteredEmbedder)
        assert query.embedder.threads == 1 and query.embedder.pool is None and torch.get_num_threads() == 1
        indexing = make_embedder(config)
        assert indexing.threads == 2 and indexing.pool is not None
        assert torch.get_num_threads() == 1  # one torch thread per encoding thread
        assert query.embed(["Tiny Tim"]).shape == indexing.embed(["Tiny Tim"]).shape == (1, 384)
    finally:
        torch.set_num_threads(before)


def test_threaded_batches_give_each_text_its_own_vector_in_input_order():
    config = EmbeddingConfig(cpu_threads=2, batch_size=4)
    threaded = make_embedder(config)
    vectors = threaded.embed(TEXTS)  # 13 texts of mixed lengths: 4 batches sorted by length, 2 threads
    one_by_one = np.stack([threaded.embed([text])[0] for text in TEXTS])
    assert vectors.shape == (len(TEXTS), 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, one_by_one, atol=1e-5)
    assert len({tuple(np.round(v, 4)) for v in vectors}) == len(set(TEXTS))  # distinct texts, distinct vectors
