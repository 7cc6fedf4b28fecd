"""`lightrag-ray demo` end to end, as a user runs it (joined to the session's Ray cluster)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from lightrag_ray.storage.workspace import Workspace


def test_demo_builds_answers_with_references_and_writes_the_graph_page(ray_cluster, tmp_path):
    workspace = tmp_path / "demo"
    env = {**os.environ, "RAY_ADDRESS": ray_cluster.get_runtime_context().gcs_address,
           "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1"}
    env = {k: v for k, v in env.items() if not k.startswith("LIGHTRAG_RAY__")}  # no LLM configured
    result = subprocess.run([sys.executable, "-m", "lightrag_ray.cli.main", "demo", "--workspace", str(workspace)],
                            capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout

    built = re.search(r"Built: 1 document, (\d+) chunks, (\d+) entities, (\d+) relations", out)
    assert built and all(int(n) > 0 for n in built.groups()), out
    assert re.search(r"Top entities by degree: .*Scrooge", out)
    assert out.count("\nQ: ") == 2 and out.count("context only: no LLM configured") == 2
    for answer in out.split("\nQ: ")[1:]:  # the default mode (walk) answers with graph facts, not passages alone
        facts = re.findall(r"^   \* (.+?)(?: \(\w+\))?: ", answer, re.MULTILINE)
        assert facts and any(" <-> " in fact for fact in facts), answer
    assert re.search(r"^   \* Jacob Marley\b", out.split("\nQ: ")[1], re.MULTILINE)  # the first question's subject

    stored = {row["chunk_id"] for row in Workspace(str(workspace)).read_rows("chunks")}
    cited = re.findall(r"\[(\d+)\] christmas_carol\.txt \((chunk-[0-9a-f]{32})\)", out)
    assert len(cited) >= 4 and {chunk for _, chunk in cited} <= stored
    assert {n for n, _ in cited} == {"1"}  # references are per file: the one book is reference 1

    page_path = re.search(r"Graph view: (\S+)", out).group(1)
    page = open(page_path, encoding="utf-8").read()
    data = json.loads(re.search(r'<script type="application/json" id="gv-data">(.*?)</script>', page, re.S).group(1))
    names = {node["name"] for node in data["nodes"].values()}
    assert {"Scrooge", "Bob Cratchit"} <= names and len(names) > 50
    assert "vis-network" in page and not re.search(r"<script[^>]+src=", page)  # renders offline
