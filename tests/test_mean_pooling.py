"""Plain mean-pooling sentence-transformers models load straight on transformers and give
the vectors sentence-transformers gives; other layouts still go through sentence-transformers
(real packaged MiniLM, no Ray)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from lightrag_ray.config import EmbeddingConfig
from lightrag_ray.models.embedding import SentenceTransformerEncoder, load_encoder, make_query_embedder, resolve_model_path
from lightrag_ray.models.mean_pooling import MeanPoolingEncoder, is_mean_pooling_model
from tests.monitoring_helpers import counted

MINILM = resolve_model_path("all-MiniLM-L6-v2")
TEXTS = [
    "Ebenezer Scrooge", "  Tiny Tim, with padding around it \n", "", "MARLEY was DEAD: to begin with.",
    "莱昂德罗·内托是巴西足球运动员", "ghost " * 400,  # past the 256-token limit: truncated alike
    "Bob Cratchit keeps the fire small", "Fezziwig's ball",
]


@pytest.fixture(scope="module")
def library_vectors() -> np.ndarray:
    return SentenceTransformer(MINILM, device="cpu").encode(TEXTS, normalize_embeddings=True, batch_size=3)


def test_packaged_minilm_loads_on_transformers_with_the_library_vectors(library_vectors):
    encoder = load_encoder(MINILM, "cpu")
    assert isinstance(encoder, MeanPoolingEncoder) and encoder.dim == 384 and encoder.max_length == 256
    vectors = encoder.encode(TEXTS, batch_size=3)  # batches sorted by length, rows back in input order
    assert vectors.shape == (len(TEXTS), 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors, library_vectors, atol=2e-5)
    np.testing.assert_allclose(encoder.encode(TEXTS[5:6])[0], vectors[5], atol=1e-5)  # alone = in a batch


def copy_model(tmp_path: Path, pooling: dict[str, bool] | None = None, modules: list[dict] | None = None) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(MINILM, folder)
    if pooling is not None:
        config = folder / "1_Pooling" / "config.json"
        config.write_text(json.dumps({**json.loads(config.read_text()), **pooling}))
    if modules is not None:
        (folder / "modules.json").write_text(json.dumps(modules))
    return folder


def test_other_pooling_goes_through_sentence_transformers(tmp_path, library_vectors):
    cls = copy_model(tmp_path, pooling={"pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True})
    assert not is_mean_pooling_model(str(cls))
    encoder = load_encoder(str(cls), "cpu")
    assert isinstance(encoder, SentenceTransformerEncoder)
    vectors = encoder.encode(TEXTS[:2])
    assert vectors.shape == (2, 384)
    assert np.abs(vectors - library_vectors[:2]).max() > 0.05  # CLS pooling honoured: not the mean vectors


def test_only_the_plain_layout_counts_as_mean_pooling(tmp_path):
    assert is_mean_pooling_model(MINILM)
    assert not is_mean_pooling_model(str(tmp_path))  # no modules.json: a bare transformers directory
    assert not is_mean_pooling_model("sentence-transformers/all-MiniLM-L6-v2")  # a hub name, not a directory
    extra = json.loads((Path(MINILM) / "modules.json").read_text()) + [
        {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}]
    assert not is_mean_pooling_model(str(copy_model(tmp_path, modules=extra)))


def test_both_encoders_count_the_tokens_the_model_reads_and_queries_record_them(tmp_path, recorded):
    """The tokens the model reads: special tokens included, past 256 truncated, the same through
    transformers and sentence-transformers; a query embedder records texts and tokens as metrics."""
    mean, library = load_encoder(MINILM, "cpu"), SentenceTransformerEncoder(MINILM, "cpu")
    assert mean.count_tokens(["Fezziwig's ball"]) == library.count_tokens(["Fezziwig's ball"]) > 4
    assert mean.count_tokens(["ghost " * 400]) == 256
    assert mean.count_tokens(TEXTS) == library.count_tokens(TEXTS)
    embedder = make_query_embedder(EmbeddingConfig(model="all-MiniLM-L6-v2", query_threads=1))
    assert embedder.embed(TEXTS).shape == (len(TEXTS), 384)
    assert counted(recorded, "embedding_texts", purpose="query") == len(TEXTS)
    assert counted(recorded, "embedding_tokens", purpose="query") == mean.count_tokens(TEXTS)
