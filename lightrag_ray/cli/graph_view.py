"""One self-contained interactive HTML page of the knowledge graph (pyvis + a side panel).

The page embeds vis-network (pyvis ``cdn_resources="in_line"``) and needs no network: the
Bootstrap tags pyvis' template always adds (used only by its menus) are removed. Clicking a
node shows its type, description and source chunk texts in a side panel; clicking an edge
shows the relation. All text reaches the page either through JSON with ``<``, ``>`` and
``&`` escaped (so ``</script>`` in a name cannot end a script) or through ``html.escape``;
the panel script writes it with ``textContent`` only. Node tooltips are set from that JSON
too, because pyvis switches to an ``innerHTML`` popup when a node title contains "href".
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import re
from pathlib import Path
from typing import Any

from pyvis.network import Network

PANEL_WIDTH = 380
MAX_CHUNKS = 3
_FIXED_COLORS = {"person": "#4e79a7", "organization": "#f28e2b", "location": "#59a14f",
                 "event": "#e15759", "concept": "#b07aa1", "object": "#edc948",
                 "other": "#9c9c9c", "unknown": "#bab0ac"}
_PALETTE = ["#76b7b2", "#ff9da7", "#9c755f", "#8cd17d", "#f1ce63", "#86bcb6", "#d37295",
            "#a0cbe8", "#ffbe7d", "#d4a6c8", "#499894", "#b6992d", "#79706e", "#e19d9a"]
_OPTIONS: dict[str, Any] = {
    "physics": {"solver": "forceAtlas2Based", "stabilization": {"iterations": 250},
                "forceAtlas2Based": {"gravitationalConstant": -70, "springLength": 110,
                                     "avoidOverlap": 0.3}},
    "interaction": {"hover": True, "tooltipDelay": 120},
    "layout": {"randomSeed": 7},
    "nodes": {"shape": "dot", "font": {"size": 14, "strokeWidth": 3, "strokeColor": "#ffffff"}},
    "edges": {"color": {"color": "#b5b5b5", "highlight": "#444444", "hover": "#777777"},
              "smooth": {"type": "continuous"},
              "font": {"size": 11, "color": "#666666", "strokeWidth": 3, "align": "middle"}},
}
_STYLE = """<style>
body{margin:0;font-family:system-ui,sans-serif}
#mynetwork{border:none!important}
.vis-tooltip{white-space:pre-wrap!important;max-width:420px;font-family:system-ui,sans-serif!important;font-size:13px!important}
#gv-panel{position:fixed;top:0;right:0;bottom:0;width:%dpx;overflow-y:auto;box-sizing:border-box;
 padding:12px 14px;border-left:1px solid #ddd;background:#fafafa;font-size:13px}
#gv-panel h1{font-size:16px;margin:0 0 4px} #gv-panel h2{font-size:18px;margin:12px 0 2px;word-break:break-word}
#gv-panel h3{font-size:13px;margin:14px 0 4px;color:#444}
.gv-counts,.gv-meta,.gv-src{color:#666} .gv-src{margin-top:8px;font-weight:600}
.gv-legend{margin:8px 0;line-height:1.8} .gv-legend span.i{margin-right:10px;white-space:nowrap}
.gv-dot{display:inline-block;width:11px;height:11px;border-radius:50%%;margin-right:4px;vertical-align:-1px}
#gv-detail p{white-space:pre-wrap;word-break:break-word}
#gv-detail pre{white-space:pre-wrap;word-break:break-word;background:#fff;border:1px solid #e3e3e3;
 padding:6px;margin:2px 0;font-size:12px;max-height:260px;overflow-y:auto}
</style>""" % PANEL_WIDTH
_SCRIPT = """<script>
(function () {
  var GV = JSON.parse(document.getElementById("gv-data").textContent);
  var panel = document.getElementById("gv-detail");
  function add(tag, text, cls) {
    var el = document.createElement(tag); el.textContent = text;
    if (cls) { el.className = cls; } panel.appendChild(el); return el;
  }
  function reset() { panel.replaceChildren(); add("p", "Click a node or an edge for details.", "gv-meta"); }
  function showNode(id) {
    var n = GV.nodes[id]; if (!n) { return reset(); }
    panel.replaceChildren(); add("h2", n.name);
    add("div", n.type + " \\u00b7 degree " + n.degree, "gv-meta");
    add("p", n.description || "(no description)");
    add("h3", "Source chunks (" + n.chunks.length + " of " + n.n_sources + ")");
    n.chunks.forEach(function (cid) {
      var c = GV.chunks[cid];
      add("div", (c.file_path || "(no file)") + " \\u00b7 chunk " + c.order, "gv-src");
      add("pre", c.text);
    });
  }
  function showEdge(id) {
    var e = GV.edges[id]; if (!e) { return reset(); }
    panel.replaceChildren(); add("h2", e.source + " \\u2014 " + e.target);
    add("div", "weight " + e.weight + " \\u00b7 " + e.keywords, "gv-meta");
    add("p", e.description || "(no description)");
  }
  nodes.update(Object.keys(GV.nodes).map(function (id) { return {id: id, title: GV.nodes[id].tip}; }));
  network.on("click", function (p) {
    if (p.nodes.length) { showNode(p.nodes[0]); } else if (p.edges.length) { showEdge(p.edges[0]); } else { reset(); }
  });
  reset();
})();
</script>"""


def type_color(entity_type: str) -> str:
    """Stable colour of an entity type: fixed for the default types, else hashed."""
    key = (entity_type or "unknown").strip().lower()
    if key in _FIXED_COLORS:
        return _FIXED_COLORS[key]
    return _PALETTE[int(hashlib.md5(key.encode("utf-8")).hexdigest(), 16) % len(_PALETTE)]


def _trim(text: Any, limit: int) -> str:
    text = str(text or "").strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def script_json(data: Any) -> str:
    """JSON safe to put inside a <script> element (no ``<``, ``>``, ``&`` left raw)."""
    text = json.dumps(data, ensure_ascii=False, sort_keys=True)
    for raw, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                     ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, esc)
    return text


def _inject(page: str, marker: str, text: str) -> str:
    """Insert ``text`` before the only ``marker`` of the page (fail loudly if pyvis changed)."""
    if page.count(marker) != 1:
        raise RuntimeError(f"unexpected pyvis template: {marker!r} found {page.count(marker)} times")
    return page.replace(marker, text + marker)


def write_graph_html(entities: list[dict], relations: list[dict], chunks: dict[str, dict],
                     path: str | Path, *, max_nodes: int = 300,
                     title: str = "lightrag-ray knowledge graph") -> Path:
    """Write an interactive page of the ``max_nodes`` highest-degree entities and their relations."""
    ranked = sorted(entities, key=lambda e: (-int(e.get("degree") or 0), str(e.get("name", ""))))
    shown: dict[str, dict] = {}
    for entity in ranked:
        if len(shown) >= max_nodes:
            break
        shown.setdefault(str(entity["key"]), entity)
    net = Network(height="100vh", width=f"calc(100% - {PANEL_WIDTH}px)", cdn_resources="in_line")
    net.options = _OPTIONS
    data: dict[str, Any] = {"nodes": {}, "edges": {}, "chunks": {}}
    type_counts: dict[str, int] = {}
    for key, e in shown.items():
        etype, degree = str(e.get("type") or "unknown"), int(e.get("degree") or 0)
        type_counts[etype] = type_counts.get(etype, 0) + 1
        net.add_node(key, label=str(e.get("name") or key), color=type_color(etype),
                     size=min(10 + 4 * math.sqrt(degree), 48))
        sources = [c for c in e.get("source_ids") or [] if c in chunks]
        sources.sort(key=lambda c: (str(chunks[c].get("file_path") or ""), chunks[c].get("order") or 0, c))
        for cid in sources[:MAX_CHUNKS]:
            data["chunks"][cid] = {k: chunks[cid].get(k) for k in ("text", "file_path", "order")}
        data["nodes"][key] = {
            "name": str(e.get("name") or key), "type": etype, "degree": degree,
            "description": str(e.get("description") or ""), "n_sources": len(e.get("source_ids") or []),
            "chunks": sources[:MAX_CHUNKS], "tip": f"{etype}\n{_trim(e.get('description'), 400)}".strip(),
        }
    for r in relations:
        a, b = str(r["source_key"]), str(r["target_key"])
        rid = str(r.get("id") or f"{a}|{b}")
        if a == b or a not in shown or b not in shown or rid in data["edges"]:
            continue
        keywords = [k.strip() for k in str(r.get("keywords") or "").split(",") if k.strip()]
        weight = float(r.get("weight") or 0.0)
        # Appended directly: Network.add_edge rescans every edge (quadratic on large graphs).
        net.edges.append({"from": a, "to": b, "id": rid, "label": _trim(", ".join(keywords[:2]), 30),
                          "width": 1 + min(1.5 * math.log1p(max(weight, 0.0)), 7),
                          "title": _trim(r.get("description"), 600)})
        data["edges"][rid] = {"source": str(r.get("source") or a), "target": str(r.get("target") or b),
                              "keywords": ", ".join(keywords), "weight": weight,
                              "description": str(r.get("description") or "")}
    page = net.generate_html()
    page = re.sub(r"\s*<link\s[^>]*bootstrap[^>]*>", "", page)
    page = re.sub(r"\s*<script\s[^>]*bootstrap[^>]*>\s*</script>", "", page)
    page = re.sub(r"<center>\s*<h1>\s*</h1>\s*</center>|<!--\s*<link.*?-->", "", page, flags=re.S)
    legend = "".join(f'<span class="i"><span class="gv-dot" style="background:{type_color(t)}"></span>'
                     f"{html.escape(t)} ({n})</span>" for t, n in sorted(type_counts.items()))
    panel = (f'<div id="gv-panel"><h1>{html.escape(title)}</h1><div class="gv-counts">'
             f"{len(shown)} of {len(entities)} entities \u00b7 {len(data['edges'])} of "
             f'{len(relations)} relations shown</div><div class="gv-legend">{legend}</div>'
             f'<div id="gv-detail"></div></div>\n'
             f'<script type="application/json" id="gv-data">{script_json(data)}</script>\n')
    page = _inject(page, "</head>", f"<title>{html.escape(title)}</title>\n{_STYLE}\n")
    page = _inject(page, "</body>", panel + _SCRIPT + "\n")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out
