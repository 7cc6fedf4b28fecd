"""The knowledge-graph HTML page: self-contained, escaped, cut to the top-degree entities."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from lightrag_ray.cli.graph_view import type_color, write_graph_html

EVIL = 'x</script><script>alert("pwned")</script>'
NAMES = ["张三", "北京大学", 'O\'Brien "Bob"', EVIL, "A & B <Co>", "Alpha", "Beta", "Gamma",
         "Delta", "Ωmega"]
TYPES = ["person", "organization", "person", "concept", "organization", "location", "event",
         "other", "concept", "object"]
DEGREES = [5, 4, 4, 3, 3, 2, 2, 1, 1, 0]
PAIRS = [(0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (1, 2), (1, 3), (1, 6), (2, 4), (2, 6), (3, 7),
         (4, 8), (5, 9)]


def _key(i: int) -> str:
    return f"k{i}"


def _graph() -> tuple[list[dict], list[dict], dict[str, dict]]:
    chunks = {f"c{i}": {"text": f"chunk {i} about {NAMES[i]} </script> 文本 & <b>", "file_path":
                        f"docs/{i % 3}.txt", "order": i} for i in range(10)}
    chunks["c_extra"] = {"text": "another passage", "file_path": "docs/0.txt", "order": 99}
    entities = [{"id": f"ent-{i}", "key": _key(i), "name": NAMES[i], "type": TYPES[i],
                 "description": f"{NAMES[i]} is entity {i}.\n<i>second line</i>",
                 "source_ids": [f"c{i}", "c_extra", "missing"] + [f"c{(i + 1) % 10}", f"c{(i + 2) % 10}"],
                 "file_paths": [], "degree": DEGREES[i]} for i in range(10)]
    relations = [{"id": f"rel-{a}-{b}", "source_key": _key(a), "target_key": _key(b),
                  "source": NAMES[a], "target": NAMES[b], "keywords": f"kw{a}{b}, link, </script>",
                  "description": f"{NAMES[a]} relates to {NAMES[b]}", "weight": float(a + b),
                  "source_ids": [f"c{a}"]} for a, b in PAIRS]
    return entities, relations, chunks


def _embedded(page: str) -> dict[str, Any]:
    match = re.search(r'<script type="application/json" id="gv-data">(.*?)</script>', page, re.S)
    assert match
    return json.loads(match.group(1))


def _vis_nodes(page: str) -> list[dict]:
    match = re.search(r"nodes = new vis\.DataSet\((\[.*?\])\);", page, re.S)
    assert match
    return json.loads(match.group(1))


class _Scripts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[tuple[dict, str]] = []
        self.text: list[str] = []
        self._in: dict | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "script":
            self._in = dict(attrs)
            self.scripts.append((self._in, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in is not None:
            self.scripts[-1] = (self._in, self.scripts[-1][1] + data)
        else:
            self.text.append(data)


def _parse(page: str) -> tuple[list[tuple[dict, str]], str]:
    parser = _Scripts()
    parser.feed(page)
    parser.close()
    return parser.scripts, "".join(parser.text)


def _write(tmp_path: Path, **kwargs: Any) -> tuple[Path, str]:
    out = write_graph_html(*_graph(), tmp_path / "sub" / "graph.html", **kwargs)
    return out, out.read_text(encoding="utf-8")


def test_page_is_self_contained_and_has_every_entity(tmp_path: Path) -> None:
    out, page = _write(tmp_path)
    assert out.exists() and out == tmp_path / "sub" / "graph.html"
    assert not re.search(r"<script[^>]*\ssrc=", page)  # vis.js and everything else inline
    assert not re.search(r"<link[^>]*\shref=", page)  # no CDN stylesheet (bootstrap removed)
    assert "vis-network" in page and len(page) > 400_000
    data = _embedded(page)
    assert {n["name"] for n in data["nodes"].values()} == set(NAMES)
    assert sorted(n["label"] for n in _vis_nodes(page)) == sorted(NAMES)
    assert "10 of 10 entities" in page and "13 of 13 relations shown" in page
    assert "张三" in page  # unicode kept as text, not \\u-escaped
    assert 'network.on("click"' in page and 'id="gv-panel"' in page


def test_click_panel_data_has_chunk_texts(tmp_path: Path) -> None:
    entities, _, chunks = _graph()
    data = _embedded(_write(tmp_path)[1])
    node = data["nodes"]["k0"]
    assert node["type"] == "person" and node["description"] == entities[0]["description"]
    assert len(node["chunks"]) == 3 and node["n_sources"] == 5 and "missing" not in node["chunks"]
    # sorted by (file path, order): docs/0.txt c0, docs/0.txt c_extra, docs/1.txt c1
    assert node["chunks"] == ["c0", "c_extra", "c1"]
    for cid in node["chunks"]:
        assert data["chunks"][cid] == chunks[cid]
    assert node["tip"].startswith("person\n" + NAMES[0])
    edge = data["edges"]["rel-0-1"]
    assert edge["keywords"] == "kw01, link, </script>" and edge["description"].startswith("张三")


def test_max_nodes_keeps_highest_degree(tmp_path: Path) -> None:
    _, page = _write(tmp_path, max_nodes=4)
    data = _embedded(page)
    # degrees 5, 4, 4, 3, 3: the tie at 3 is broken by name ("A & B <Co>" < EVIL)
    assert set(data["nodes"]) == {"k0", "k1", "k2", "k4"}
    kept = {_key(a) + _key(b) for a, b in PAIRS if {_key(a), _key(b)} <= set(data["nodes"])}
    edges = json.loads(re.search(r"edges = new vis\.DataSet\((\[.*?\])\);", page, re.S).group(1))
    assert {e["from"] + e["to"] for e in edges} == kept
    assert len(data["edges"]) == len(kept) == 5
    assert f"4 of 10 entities \u00b7 {len(kept)} of 13 relations shown" in page


def test_nodes_styled_by_degree_and_type(tmp_path: Path) -> None:
    nodes = {n["id"]: n for n in _vis_nodes(_write(tmp_path)[1])}
    assert nodes["k0"]["size"] > nodes["k5"]["size"] > nodes["k9"]["size"] == 10
    assert nodes["k0"]["color"] == nodes["k2"]["color"] == type_color("person")
    assert type_color("made-up type") == type_color("Made-up Type ")
    assert type_color("person") != type_color("organization")


def test_script_breaking_text_is_escaped(tmp_path: Path) -> None:
    _, page = _write(tmp_path, title='<b>T</b> & "q"')
    assert EVIL not in page and "x</script>" not in page and 'alert("pwned")' not in page
    assert "<i>second line</i>" not in page and "</script> 文本" not in page
    assert "<b>T</b>" not in page and "&lt;b&gt;T&lt;/b&gt; &amp;" in page
    scripts, text = _parse(page)  # as a browser splits it: a script ends at the first "</script"
    assert len(scripts) == 5  # pyvis utils, vis-network, pyvis graph, our data, our panel
    assert scripts[3][0].get("id") == "gv-data"
    assert {n["name"] for n in json.loads(scripts[3][1])["nodes"].values()} == set(NAMES)
    assert "pwned" not in text and "second line" not in text


@pytest.mark.skipif(not shutil.which("chromium"), reason="chromium not installed")
def test_renders_headless(tmp_path: Path) -> None:
    out, _ = _write(tmp_path)
    dom = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
         "--dump-dom", out.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert "<canvas" in dom and "vis-network" in dom
    assert "Click a node or an edge for details." in dom
