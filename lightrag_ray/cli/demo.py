"""`lightrag-ray demo`: index a bundled book without an LLM, show the graph, answer questions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightrag_ray.cli.graph_view import write_graph_html
from lightrag_ray.config import Settings
from lightrag_ray.index.progress import print_progress
from lightrag_ray.service.indexing import index_paths
from lightrag_ray.query.engine import QueryParam, QueryResult
from lightrag_ray.service.session import LocalSession
from lightrag_ray.storage.workspace import Workspace

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "christmas_carol.txt"  # lightrag_ray/data
QUESTIONS = (
    "Who is Jacob Marley and what does his ghost tell Scrooge?",
    "How does Bob Cratchit's family celebrate Christmas?",
)


def _say(text: str = "") -> None:
    print(text, flush=True)


def _demo_settings(settings: Settings) -> Settings:
    """Fast (no-LLM) extraction; an LLM, if configured, is used for answers only."""
    return settings.model_copy(update={"extraction": settings.extraction.model_copy(update={"mode": "fast"})})


def _short(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _print_answer(question: str, result: QueryResult, generated: bool) -> None:
    _say(f"\nQ: {question}")
    if generated:
        _say(f"A: {result.answer}")
    else:
        _say("A (context only: no LLM configured; top graph facts and the passages an LLM would cite):")
        for entity in result.context.entities[:5]:
            _say(f"   * {entity['name']} ({entity['type']}): {_short(entity['description'])}")
        for relation in result.context.relations[:3]:
            _say(f"   * {relation['source']} <-> {relation['target']}: {_short(relation['description'])}")
    _say("   References:")
    for chunk in result.context.chunks[:4]:
        _say(f"   [{chunk['reference_id']}] {Path(chunk['file_path']).name} ({chunk['chunk_id']}): {_short(chunk['text'], 140)}")


async def _answer(session: LocalSession, question: str) -> QueryResult:
    """The default mode's answer (its context, without an LLM): graph facts and passages."""
    return await session.engine.query(question, QueryParam(chunk_top_k=8), generate=session.llm is not None)


def run_demo(settings: Settings, html: str | None = None) -> dict[str, Any]:
    """Index the sample, print what was built, answer QUESTIONS and write the graph page."""
    settings = _demo_settings(settings)
    _say(f"Indexing {SAMPLE.name} into {settings.workspace} (fast mode: no LLM calls)...")
    report = index_paths([str(SAMPLE)], settings, progress=print_progress)
    _say(f"Built: {report.docs_new + report.docs_skipped} document, {_chunk_count(settings)} chunks, "
         f"{report.entities} entities, {report.relations} relations "
         f"(graph version {report.graph_version}, {report.seconds:.0f} s)")
    with LocalSession(settings) as session:
        graph = session.graph.export()
        top = sorted(graph["entities"], key=lambda e: (-e["degree"], e["name"]))[:10]
        _say("Top entities by degree: " + ", ".join(f"{e['name']} ({e['degree']})" for e in top))
        results = []
        for question in QUESTIONS:
            result = session.run(_answer(session, question))
            _print_answer(question, result, generated=session.llm is not None)
            results.append(result)
    chunks = {row["chunk_id"]: row for row in Workspace(settings.workspace).read_rows("chunks")}
    page = write_graph_html(graph["entities"], graph["relations"], chunks,
                            html or str(Path(settings.workspace) / "graph.html"))
    _say(f"\nGraph view: {page}  (open it in a browser; click a node to read its source passages)")
    return {"report": report, "top_entities": top, "results": results, "html": str(page)}


def _chunk_count(settings: Settings) -> int:
    return len({row["chunk_id"] for row in Workspace(settings.workspace).read_rows("chunks")})
