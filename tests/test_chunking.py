"""Token-window chunking: sizes, overlap, coverage, ids, and offline tiktoken."""

from __future__ import annotations

import hashlib
import math
import random
import socket

import pytest
import tiktoken
import tiktoken.load
import tiktoken.registry

from lightrag_ray.core import tokenizer
from lightrag_ray.core.chunking import chunk_text
from lightrag_ray.core.ids import doc_id
from lightrag_ray.core.tokenizer import count_tokens, get_encoding

WORDS = (
    "river stone cloud apple garden window silver market travel winter summer paper music "
    "engine forest ocean bridge castle dragon yellow purple orange doctor teacher history "
    "science number letter rabbit mountain village street school church flower planet"
).split()

SIZES = [(50, 10), (64, 0), (13, 12), (200, 50), (7, 3)]


def prose(n_words: int, seed: int = 0) -> str:
    """English-like text: sentences of common words."""
    rng = random.Random(seed)
    sentences = []
    while n_words > 0:
        length = min(n_words, rng.randint(4, 14))
        words = [rng.choice(WORDS) for _ in range(length)]
        sentences.append(" ".join(words).capitalize() + rng.choice([".", ",", ";", "!"]))
        n_words -= length
    return " ".join(sentences)


def comma_words(n_words: int, seed: int = 1) -> str:
    """Words joined by commas, each word and comma one token: any token window decodes to
    text that encodes back to exactly that window (no whitespace for strip() to eat)."""
    enc = get_encoding()
    comma = enc.encode(",")
    vocab = [w for w in WORDS if len(enc.encode(w)) == 1 and enc.encode("," + w) == comma + enc.encode(w)]
    assert len(vocab) >= 10
    rng = random.Random(seed)
    return ",".join(rng.choice(vocab) for _ in range(n_words))


@pytest.mark.parametrize("size, overlap", SIZES)
def test_every_chunk_fits_the_window(size, overlap):
    enc = get_encoding()
    text = prose(1500)
    tokens = enc.encode(text)
    rows = chunk_text("doc-x", text, chunk_tokens=size, overlap_tokens=overlap)
    assert len(rows) > 1
    for row in rows:
        assert 0 < row["tokens"] <= size
        # the chunk is a window of at most `size` tokens of the re-tokenised document
        start = row["order"] * (size - overlap)
        window = tokens[start : start + size]
        assert len(window) == row["tokens"]
        assert row["text"] == enc.decode(window).strip()
        # re-tokenising the stored text alone may cost one token more than the window:
        # strip() turns " garden" (1 token) into "garden" ("g" + "arden"); never more
        assert len(enc.encode(row["text"], disallowed_special=())) <= size + 1
        assert row["text"] == row["text"].strip()
        assert row["doc_id"] == "doc-x"
    assert [row["order"] for row in rows] == list(range(len(rows)))
    # all windows but the last are full
    assert all(row["tokens"] == size for row in rows[:-1])


@pytest.mark.parametrize("size, overlap", SIZES)
def test_overlap_and_coverage_on_token_ids(size, overlap):
    enc = get_encoding()
    text = comma_words(700)
    tokens = enc.encode(text)
    assert enc.decode(tokens) == text
    rows = chunk_text("doc-y", text, chunk_tokens=size, overlap_tokens=overlap)
    windows = [enc.encode(row["text"]) for row in rows]
    # precondition of this text: each chunk re-encodes to the window it was cut from
    assert [len(w) for w in windows] == [row["tokens"] for row in rows]
    for left, right in zip(windows, windows[1:]):
        if overlap:
            assert left[-overlap:] == right[:overlap]
    # the windows, minus their overlaps, are exactly the document's tokens
    rebuilt = list(windows[0])
    for window in windows[1:]:
        rebuilt.extend(window[overlap:])
    assert rebuilt == tokens
    step = size - overlap
    assert len(rows) == max(1, math.ceil((len(tokens) - overlap) / step))


def test_whole_text_is_covered_in_order():
    text = prose(3000, seed=3)
    rows = chunk_text("doc-z", text, chunk_tokens=40, overlap_tokens=8)
    assert text.startswith(rows[0]["text"])
    assert text.endswith(rows[-1]["text"])
    position = 0
    for left, right in zip(rows, rows[1:]):
        start = text.find(left["text"], position)
        assert start >= 0, "every chunk is a piece of the document"
        end = start + len(left["text"])
        nxt = text.find(right["text"], start + 1)
        assert start < nxt <= end, "neighbouring chunks overlap: no text falls between them"
        position = start + 1
    words = text.split()
    covered = " ".join(row["text"] for row in rows).split()
    assert set(words) <= set(covered)


def test_short_text_is_one_chunk():
    rows = chunk_text("doc-s", "  Hello world.  ", chunk_tokens=100, overlap_tokens=10, file_path="a.txt")
    assert len(rows) == 1
    row = rows[0]
    assert row["text"] == "Hello world."
    assert row["file_path"] == "a.txt"
    assert row["order"] == 0
    assert row["tokens"] == count_tokens("  Hello world.  ")
    assert row["text_tokens"] == count_tokens("Hello world.")  # the stored (stripped) text's own count
    assert set(row) == {"chunk_id", "doc_id", "order", "tokens", "text_tokens", "text", "file_path"}


def test_ids_are_deterministic():
    text = prose(800, seed=5)
    first = chunk_text(doc_id(text), text, chunk_tokens=60, overlap_tokens=10)
    second = chunk_text(doc_id(text), text, chunk_tokens=60, overlap_tokens=10)
    assert [r["chunk_id"] for r in first] == [r["chunk_id"] for r in second]
    assert first == second
    ids = [r["chunk_id"] for r in first]
    assert len(set(ids)) == len(ids)
    assert all(i.startswith("chunk-") for i in ids)
    other = chunk_text("doc-other", text, chunk_tokens=60, overlap_tokens=10)
    assert not set(ids) & {r["chunk_id"] for r in other}
    assert [r["text"] for r in other] == [r["text"] for r in first]


def test_repeated_text_inside_a_document_gets_distinct_ids():
    text = " ".join(["Alpha beta gamma delta."] * 200)
    rows = chunk_text("doc-r", text, chunk_tokens=10, overlap_tokens=0)
    ids = [r["chunk_id"] for r in rows]
    assert len(set(r["text"] for r in rows)) < len(rows)  # some texts repeat ...
    assert len(set(ids)) == len(ids)  # ... but ids never do


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t"])
def test_empty_text_gives_no_chunks(text):
    assert chunk_text("doc-e", text) == []


@pytest.mark.parametrize("size, overlap", [(100, 100), (100, 150), (1, 1)])
def test_overlap_not_below_size_is_rejected(size, overlap):
    with pytest.raises(ValueError, match="overlap"):
        chunk_text("doc-v", "some text", chunk_tokens=size, overlap_tokens=overlap)


def test_special_token_text_is_plain_text():
    rows = chunk_text("doc-sp", "before <|endoftext|> after", chunk_tokens=50, overlap_tokens=5)
    assert rows[0]["text"] == "before <|endoftext|> after"


def test_three_megabyte_document():
    text = prose(600_000, seed=7)
    while len(text.encode()) < 3_000_000:
        text += " " + prose(50_000, seed=len(text))
    n_tokens = count_tokens(text)
    rows = chunk_text("doc-big", text)  # defaults: 1200 tokens, 100 overlap
    step = 1200 - 100
    assert (n_tokens - 1200) / step <= len(rows) <= n_tokens / step + 1
    assert all(r["tokens"] == 1200 for r in rows[:-1])
    assert len({r["chunk_id"] for r in rows}) == len(rows)
    assert text.startswith(rows[0]["text"]) and text.endswith(rows[-1]["text"])


BPE_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
CL100K_SHA1 = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_tiktoken_loads_offline_from_the_packaged_file(tmp_path, monkeypatch, no_network):
    monkeypatch.setenv("LIGHTRAG_RAY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "placeholder")  # restored after the test ...
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")  # ... but unset while it runs
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})  # make tiktoken build it again
    tokenizer.get_encoding.cache_clear()
    try:
        assert hashlib.sha1(BPE_URL.encode()).hexdigest() == CL100K_SHA1
        tokenizer._install_packaged_bpe("cl100k_base")
        cache = tmp_path / "cache" / "tiktoken"
        assert tokenizer.os.environ["TIKTOKEN_CACHE_DIR"] == str(cache)
        target = cache / CL100K_SHA1
        assert target.is_file()
        assert [p.name for p in cache.iterdir()] == [CL100K_SHA1]  # no temporary files left
        # the file is the one tiktoken expects (it checks this sha256 itself)
        assert hashlib.sha256(target.read_bytes()).hexdigest() == (
            "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
        )
        mtime = target.stat().st_mtime_ns
        tokenizer._install_packaged_bpe("cl100k_base")  # second call: already there
        assert target.stat().st_mtime_ns == mtime

        enc = get_encoding("cl100k_base")
        assert enc.encode("hello world") == [15339, 1917]
        assert enc.decode(enc.encode("Offline tokenisation works.")) == "Offline tokenisation works."
        assert count_tokens("hello world") == 2
        assert tiktoken.registry.ENCODINGS["cl100k_base"] is enc  # built now, from the tmp cache
    finally:
        tokenizer.get_encoding.cache_clear()
