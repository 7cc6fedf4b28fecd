"""Input files -> document rows, with a clear error row for every file or record that fails."""

from __future__ import annotations

import io
import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lightrag_ray.core.ids import doc_id
from lightrag_ray.index.documents import SUPPORTED_SUFFIXES, list_input_files, parse_file

ROW_KEYS = {"doc_id", "file_path", "text", "error"}


def one_doc(path: str, data: bytes) -> dict:
    rows = parse_file(path, data)
    assert len(rows) == 1
    assert set(rows[0]) == ROW_KEYS
    return rows[0]


def ok(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["error"] is None]


def errors(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["error"] is not None]


# ---- plain text ---------------------------------------------------------------------
def test_utf8_text():
    text = "Grüße aus Köln — 東京 🙂\nsecond line\n"
    row = one_doc("notes/a.txt", text.encode("utf-8"))
    assert row["error"] is None
    assert row["text"] == text
    assert row["file_path"] == "notes/a.txt"
    assert row["doc_id"] == doc_id(text)


def test_utf8_with_bom_is_the_same_document():
    text = "Same words, with or without a byte order mark."
    plain = one_doc("a.md", text.encode("utf-8"))
    bom = one_doc("b.md", b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert bom["error"] is None
    assert bom["text"] == text  # the BOM is not part of the text
    assert bom["doc_id"] == plain["doc_id"]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_utf16_with_bom(encoding):
    text = "UTF-16 text: naïve café, 日本"
    data = text.encode(encoding)
    if encoding == "utf-16-be":
        data = b"\xfe\xff" + data
    row = one_doc("w.txt", data)
    assert row["error"] is None
    assert row["text"] == text
    assert row["doc_id"] == doc_id(text)


@pytest.mark.parametrize(
    "data",
    [b"", b"   \n\t \r\n", b"\xef\xbb\xbf", b"\xef\xbb\xbf  \n", b"\xff\xfe", " \n".encode("utf-16")],
    ids=["empty", "whitespace", "utf8-bom-only", "utf8-bom-whitespace", "utf16-bom-only", "utf16-whitespace"],
)
def test_empty_files_are_errors(data):
    row = one_doc("empty.txt", data)
    assert row["error"] is not None
    assert "empty" in row["error"]
    assert row["text"] == ""
    assert row["file_path"] == "empty.txt"


def test_binary_file_is_an_error():
    data = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00" + bytes(range(256))
    row = one_doc("picture.txt", data)
    assert "binary" in row["error"]
    assert row["text"] == ""


def test_latin1_file_is_an_error_that_says_how_to_fix_it():
    data = "Café, naïve, Müller".encode("latin-1")
    row = one_doc("old.txt", data)
    assert "UTF-8" in row["error"]
    assert "iconv" in row["error"] or "re-encode" in row["error"]
    assert "byte 3" in row["error"]  # where the first bad byte is


def test_error_rows_have_distinct_stable_ids():
    a1 = one_doc("a.txt", b"")
    a2 = one_doc("a.txt", b"  ")
    b = one_doc("b.txt", b"")
    assert a1["doc_id"] == a2["doc_id"]
    assert a1["doc_id"] != b["doc_id"]


def test_same_content_twice_gives_the_same_doc_id():
    data = b"The same text in two files."
    first = one_doc("dir1/x.txt", data)
    second = one_doc("dir2/y.md", data)
    assert first["doc_id"] == second["doc_id"]
    assert first["file_path"] != second["file_path"]
    other = one_doc("dir1/x.txt", b"The same text in two files!")
    assert other["doc_id"] != first["doc_id"]
    # the same text as a JSON record is the same document as well
    record = parse_file("r.json", json.dumps(["The same text in two files."]).encode())
    assert record[0]["doc_id"] == first["doc_id"]


# ---- JSON -----------------------------------------------------------------------------
def test_json_list_of_strings():
    rows = parse_file("list.json", json.dumps(["first doc", "second doc", "third"]).encode())
    assert [r["text"] for r in rows] == ["first doc", "second doc", "third"]
    assert [r["file_path"] for r in rows] == ["list.json#0", "list.json#1", "list.json#2"]
    assert not errors(rows)
    assert len({r["doc_id"] for r in rows}) == 3


def test_json_list_of_objects_with_text_and_title():
    records = [
        {"title": "Paris", "text": "Paris is the capital of France."},
        {"title": "Rome", "text": "Rome is the capital of Italy.", "year": 2020},
        {"text": "No title here."},
        {"name": "Content field", "content": "Text under another field name."},
    ]
    rows = parse_file("data/cities.json", json.dumps(records).encode())
    assert not errors(rows)
    assert [r["file_path"] for r in rows] == [
        "data/cities.json#Paris", "data/cities.json#Rome", "data/cities.json#2", "data/cities.json#Content field",
    ]
    assert rows[0]["text"] == "Paris is the capital of France."
    assert rows[3]["text"] == "Text under another field name."
    assert rows[0]["doc_id"] == doc_id("Paris is the capital of France.")


def test_json_dict_of_title_to_sentences():
    corpus = {
        "Alan Turing": ["Alan Turing was a mathematician.", " He worked at Bletchley Park."],
        "Ada Lovelace": ["Ada Lovelace wrote the first program."],
    }
    rows = parse_file("corpus.json", json.dumps(corpus).encode())
    assert not errors(rows)
    assert [r["file_path"] for r in rows] == ["corpus.json#Alan Turing", "corpus.json#Ada Lovelace"]
    assert rows[0]["text"] == "Alan Turing was a mathematician. He worked at Bletchley Park."


def test_single_json_object_with_text():
    rows = parse_file("one.json", json.dumps({"id": "d1", "text": "Only one."}).encode())
    assert len(rows) == 1
    assert rows[0]["text"] == "Only one."
    assert rows[0]["file_path"] == "one.json#d1"


def test_record_without_text_is_an_error_row_and_others_survive():
    records = [{"title": "Good", "text": "Good text."}, {"title": "Bad", "summary": "no text field"}, "Also good."]
    rows = parse_file("mixed.json", json.dumps(records).encode())
    assert len(rows) == 3
    assert [r["text"] for r in ok(rows)] == ["Good text.", "Also good."]
    [bad] = errors(rows)
    assert bad["file_path"] == "mixed.json#1"  # its position in the file
    assert "no text field" in bad["error"]
    assert "text" in bad["error"]  # it names the fields it looked for


def test_record_with_empty_text_is_an_error_row():
    rows = parse_file("e.json", json.dumps(["fine", "   ", {"text": ""}]).encode())
    assert [r["text"] for r in ok(rows)] == ["fine"]
    assert len(errors(rows)) == 2
    assert all("empty" in r["error"] for r in errors(rows))


def test_invalid_json_is_one_error_row():
    row = one_doc("broken.json", b'[{"text": "unterminated')
    assert row["error"].startswith("cannot parse broken.json")


def test_deeply_nested_json_is_an_error_not_a_crash():
    row = one_doc("deep.json", b"[" * 200_000)
    assert "cannot parse" in row["error"]


def test_empty_json_list_is_an_error_row():
    row = one_doc("none.json", b"[]")
    assert "no documents" in row["error"]


def test_real_hotpotqa_corpus(shared_data):
    path = shared_data / "hotpotqa" / "hotpotqa_train_corpus.json"
    corpus = json.loads(path.read_text(encoding="utf-8"))
    rows = parse_file(str(path), path.read_bytes())
    assert len(rows) == 994
    assert not errors(rows)
    assert [r["file_path"] for r in rows] == [f"{path}#{title}" for title in corpus]
    first_title = next(iter(corpus))
    assert rows[0]["text"] == "".join(corpus[first_title])
    assert all(r["text"].strip() for r in rows)
    assert all(r["doc_id"] == doc_id(r["text"]) for r in rows)


# ---- JSON Lines -------------------------------------------------------------------------
def test_jsonl_with_one_bad_line():
    lines = [
        json.dumps({"id": "a", "text": "Line one."}),
        "",
        '{"id": "b", "text": "broken',
        json.dumps("Line three as a bare string."),
        json.dumps({"id": "c", "body": "Line four."}),
    ]
    rows = parse_file("in.jsonl", "\n".join(lines).encode())
    assert len(rows) == 4  # the blank line is skipped
    assert [r["text"] for r in ok(rows)] == ["Line one.", "Line three as a bare string.", "Line four."]
    assert [r["file_path"] for r in ok(rows)] == ["in.jsonl#a", "in.jsonl#2", "in.jsonl#c"]
    [bad] = errors(rows)
    assert bad["file_path"] == "in.jsonl#1"
    assert "JSON" in bad["error"]


def test_ndjson_record_without_text():
    data = b'{"text": "ok"}\n{"other": 1}\n'
    rows = parse_file("x.ndjson", data)
    assert [r["text"] for r in ok(rows)] == ["ok"]
    assert len(errors(rows)) == 1 and "no text field" in errors(rows)[0]["error"]


# ---- Parquet ------------------------------------------------------------------------
def parquet_bytes(rows: list[dict]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    return sink.getvalue()


def test_parquet_rows():
    data = parquet_bytes(
        [
            {"id": "p1", "text": "Parquet document one.", "n": 1},
            {"id": "p2", "text": "Parquet document two.", "n": 2},
            {"id": "p3", "text": None, "n": 3},
        ]
    )
    rows = parse_file("table.parquet", data)
    assert [r["text"] for r in ok(rows)] == ["Parquet document one.", "Parquet document two."]
    assert [r["file_path"] for r in ok(rows)] == ["table.parquet#p1", "table.parquet#p2"]
    [bad] = errors(rows)
    assert bad["file_path"] == "table.parquet#2"  # its row number


def test_parquet_with_list_of_sentences():
    rows = parse_file("s.parquet", parquet_bytes([{"title": "T", "context": ["One.", " Two."]}]))
    assert rows[0]["text"] == "One. Two."
    assert rows[0]["file_path"] == "s.parquet#T"


def test_corrupt_parquet_is_one_error_row():
    row = one_doc("bad.parquet", b"PAR1 this is not parquet PAR1")
    assert "cannot parse bad.parquet" in row["error"]


@pytest.mark.parametrize("suffix", SUPPORTED_SUFFIXES)
def test_never_raises_on_random_bytes(suffix):
    rng = random.Random(suffix)
    prefixes = [b"", b"\xff\xfe", b"\xef\xbb\xbf", b"PAR1", b"[", b"{", b'{"text": ']
    for trial in range(300):
        body = bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 1, 5, 64, 700])))
        data = rng.choice(prefixes) + body
        rows = parse_file(f"f{suffix}", data)
        assert rows, "at least one row (a document or an error)"
        for row in rows:
            assert set(row) == ROW_KEYS
            assert row["doc_id"].startswith("doc-")
            assert (row["error"] is None) == bool(row["text"].strip())


# ---- listing input files --------------------------------------------------------------
def test_list_input_files(tmp_path):
    files = {
        "a.txt": "a", "b.md": "b", "sub/c.json": "[]", "sub/deeper/d.jsonl": "", "sub/deeper/e.parquet": "",
        "UPPER.TXT": "u", "skip.png": "", "skip.py": "", "sub/skip.csv": "", "noext": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = list_input_files([str(tmp_path)])
    expected = sorted(
        str(tmp_path / n) for n in
        ["a.txt", "b.md", "sub/c.json", "sub/deeper/d.jsonl", "sub/deeper/e.parquet", "UPPER.TXT"]
    )
    assert found.files == expected
    unsupported = ["noext", "skip.png", "skip.py", "sub/skip.csv"]
    assert [e["file_path"] for e in found.errors] == sorted(str(tmp_path / n) for n in unsupported)
    assert found.errors[1]["error"].startswith("unsupported file type .png: convert it to text (.txt .md")


def test_list_input_files_single_file_and_duplicates(tmp_path):
    (tmp_path / "x.txt").write_text("x")
    (tmp_path / "y.txt").write_text("y")
    single = str(tmp_path / "x.txt")
    assert list_input_files([single]).files == [single]
    # a file named twice, or also inside a listed folder, is listed once
    assert list_input_files([single, str(tmp_path), single]).files == [single, str(tmp_path / "y.txt")]


def test_list_input_files_with_file_uri(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("a")
    (tmp_path / "docs" / "b.bin").write_text("b")
    found = list_input_files([f"file://{tmp_path}/docs"])
    assert found.files == [f"file://{tmp_path}/docs/a.txt"]
    assert [e["file_path"] for e in found.errors] == [f"file://{tmp_path}/docs/b.bin"]


def test_list_input_files_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope"):
        list_input_files([str(tmp_path / "nope")])


def test_list_input_files_empty_folder(tmp_path):
    assert list_input_files([str(tmp_path)]).files == []
