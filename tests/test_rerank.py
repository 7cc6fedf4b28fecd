"""Rerankers (issue 45): the HTTP reranker against the scripted rerank server over real HTTP, the
query engine ordering every mode's final passages by its scores (in-memory stores), and a tiny
cross-encoder served by the Reranker deployment scoring as the model does in-process."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lightrag_ray.config import RerankConfig
from lightrag_ray.models.rerank import CrossEncoderReranker, HttpReranker, RerankError, make_reranker, result_scores
from lightrag_ray.query.engine import QueryParam
from lightrag_ray.query.params import RETRIEVAL_MODES
from tests.scripted_rerank import ScriptedRerank, score
from tests.test_query_engine import _engine

pytestmark = pytest.mark.timeout(120)

QUESTION = "Who walks with a crutch, Tiny Tim or Ebenezer Scrooge?"
DOCUMENTS = ["Bob Cratchit works for Ebenezer Scrooge.", "Tiny Tim walks with a crutch.", "Fred invites Scrooge."]


def _http(server: ScriptedRerank, **overrides: Any) -> HttpReranker:
    fields: dict[str, Any] = {"backend": "http", "base_url": server.url, "model": "scripted-rerank",
                              "api_key": "rerank-key", "backoff_s": 0.01, "timeout_s": 5.0, **overrides}
    return HttpReranker(RerankConfig(**fields))


def _scores(reranker: Any, query: str = QUESTION, documents: list[str] = DOCUMENTS) -> list[float]:
    async def run() -> list[float]:
        try:
            return await reranker.scores(query, documents)
        finally:
            await reranker.aclose()

    return asyncio.run(run())


# ---- the HTTP reranker ---------------------------------------------------------------

def test_http_scores_come_in_the_documents_order_from_one_request(reranker):
    assert _scores(_http(reranker)) == [score(QUESTION, d) for d in DOCUMENTS]  # the server answers best first
    assert reranker.requests == 1 and reranker.authorizations == ["Bearer rerank-key"]
    assert reranker.bodies == [{"model": "scripted-rerank", "query": QUESTION, "documents": DOCUMENTS, "top_n": 3}]
    assert _scores(_http(reranker), documents=[]) == [] and reranker.requests == 1  # nothing to ask


def test_a_malformed_answer_is_a_clear_error(reranker):
    reranker.fail_next("malformed")
    with pytest.raises(RerankError, match=r"rerank answer has a bad result \(wanted an index below 3 and a numeric "
                       rf"relevance_score\): .*\(from {reranker.url}/rerank\)"):
        _scores(_http(reranker))
    assert reranker.requests == 1  # a bad answer is not asked again


@pytest.mark.parametrize(("body", "message"), [
    ({"data": []}, "has no results list"),
    ([1, 2], "has no results list"),
    ({"results": [{"index": 0, "relevance_score": 0.5}]}, r"scores 1 of 2 documents \(missing: \[1\]\)"),
    ({"results": [{"index": 0, "relevance_score": True}, {"index": 1, "relevance_score": 1}]}, "bad result"),
    ({"results": [{"index": "1", "relevance_score": 0.1}, {"index": 0, "relevance_score": 1}]}, "bad result"),
])
def test_answers_that_are_not_a_ranking_are_refused(body, message):
    with pytest.raises(RerankError, match=message):
        result_scores(body, 2)
    assert result_scores({"results": [{"index": 1, "relevance_score": 2}, {"index": 0, "relevance_score": 0.5}]},
                         2) == [0.5, 2.0]


def test_429_then_an_answer_is_retried(reranker):
    reranker.fail_next("429")
    assert _scores(_http(reranker)) == [score(QUESTION, d) for d in DOCUMENTS]
    assert reranker.requests == 2


def test_a_late_answer_times_out_and_is_asked_again(reranker):
    reranker.late_s = 1.0
    reranker.fail_next("late")
    assert _scores(_http(reranker, timeout_s=0.3)) == [score(QUESTION, d) for d in DOCUMENTS]
    assert reranker.requests == 2


def test_server_errors_past_the_retries_fail(reranker):
    reranker.fail_next("500", times=2)
    with pytest.raises(RerankError, match=r"rerank request failed after 2 attempts: HTTP 500: internal error"):
        _scores(_http(reranker, max_retries=1))
    assert reranker.requests == 2


def test_make_reranker_follows_the_backend(reranker):
    assert make_reranker(RerankConfig()) is None
    assert isinstance(make_reranker(RerankConfig(backend="http", model="m", base_url=reranker.url)), HttpReranker)
    with pytest.raises(ValueError, match="rerank.model is required with rerank.backend http"):
        RerankConfig(backend="http")


# ---- the query engine ----------------------------------------------------------------

def _retrieve(engine, **param: Any) -> tuple[list[str], dict[str, str]]:
    context, _, _ = asyncio.run(engine.retrieve(QUESTION, QueryParam(**param)))
    return [chunk["text"] for chunk in context.chunks], {"rerank": context.retrieval["rerank"]}


@pytest.mark.parametrize("mode", RETRIEVAL_MODES)
def test_every_mode_orders_its_final_passages_by_the_rerankers_scores(reranker, mode):
    engine, _ = _engine(reranker=_http(reranker))
    kept, off = _retrieve(engine, mode=mode, enable_rerank=False)
    assert off == {"rerank": "off"} and reranker.requests == 0
    ranked, note = _retrieve(engine, mode=mode)
    assert note == {"rerank": "reranked by scripted-rerank"} and reranker.requests == 1
    assert ranked == sorted(kept, key=lambda text: -score(QUESTION, text)) != kept
    assert reranker.bodies[0]["documents"] == kept  # the passages as retrieval ordered them


def test_without_a_reranker_passages_keep_their_order():
    engine, _ = _engine()
    kept, off = _retrieve(engine, mode="mix", enable_rerank=False)
    assert _retrieve(engine, mode="mix") == (kept, {"rerank": "no reranker configured"})
    assert off == {"rerank": "off"}


def test_a_failing_reranker_leaves_the_retrieval_order_and_says_why(reranker):
    engine, _ = _engine(reranker=_http(reranker, max_retries=0))
    kept, _ = _retrieve(engine, mode="naive", enable_rerank=False)
    reranker.fail_next("500")
    texts, note = _retrieve(engine, mode="naive")
    assert texts == kept
    assert note["rerank"].startswith("failed, retrieval order kept: rerank request failed after 1 attempts: HTTP 500")


# ---- the cross-encoder and its deployment ------------------------------------------------

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted({w.strip(",.?").lower() for text in
                                                                [QUESTION, *DOCUMENTS] for w in text.split()})]


def tiny_cross_encoder(folder: Path) -> str:
    """A randomly initialised one-layer BERT cross-encoder (one relevance label) saved to ``folder``."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    folder.mkdir()
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    torch.manual_seed(45)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=37, num_labels=1, max_position_embeddings=64, initializer_range=0.5)
    BertForSequenceClassification(config).save_pretrained(folder)
    BertTokenizer(str(folder / "vocab.txt")).save_pretrained(folder)
    return str(folder)


def test_the_reranker_deployment_scores_as_the_cross_encoder_does(ray_cluster, tmp_path):
    from ray import serve
    from sentence_transformers import CrossEncoder

    from lightrag_ray.serve.deployments import HandleReranker, ingress_reranker, reranker_deployment
    from tests.net_helpers import free_port

    config = RerankConfig(backend="cross-encoder", model=tiny_cross_encoder(tmp_path / "model"), num_cpus=0.2)
    expected = CrossEncoder(config.model, device="cpu").predict([(QUESTION, d) for d in DOCUMENTS])
    assert np.ptp(expected) > 0.05  # scores that tell the documents apart
    local = make_reranker(config)
    assert isinstance(local, CrossEncoderReranker) and np.allclose(_scores(local), expected)
    serve.start(http_options={"host": "127.0.0.1", "port": free_port()})
    try:
        free_cpus = ray_cluster.available_resources()["CPU"]
        handle = serve.run(reranker_deployment(config), name="reranker_probe", route_prefix=None)
        assert ray_cluster.available_resources()["CPU"] == pytest.approx(free_cpus - 0.2)  # rerank.num_cpus
        served = ingress_reranker(config, handle)
        assert isinstance(served, HandleReranker) and served.model == config.model
        assert np.allclose(_scores(served), expected)
    finally:
        serve.shutdown()
