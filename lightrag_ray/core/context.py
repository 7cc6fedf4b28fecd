"""Build the query context within token budgets (pure functions, no Ray).

The context has three sections: graph entities, graph relations and source passages,
followed by a reference list. As in LightRAG, references are per file: passages of one file
share its number, the files most passages come from numbered first (see file_references).
Each graph section keeps the lines that fit its budget, in rank order; passages are kept
as a prefix of their ranking. Lines are counted one by one, plus a bound on what the
line breaks can add, and a section is counted whole only when that bound could pass its
budget, so budgets hold for the text as the LLM counts it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

from lightrag_ray.core.tokenizer import count_tokens


@dataclass
class Budgets:
    """Token budgets, LightRAG-like defaults."""

    max_entity_tokens: int = 6000
    max_relation_tokens: int = 8000
    max_total_tokens: int = 30000


@dataclass
class QueryContext:
    """What retrieval found and the text handed to the LLM: the items kept (each passage with
    its file's ``reference_id``), the per-file references, in ``found``, how many entities,
    relations and chunks there were before the budgets cut them, and in ``retrieval``, how the
    passages were found and ordered (e.g. ``rerank``: whether a reranker ordered them)."""

    entities: list[dict[str, Any]] = field(default_factory=list)
    relations: list[dict[str, Any]] = field(default_factory=list)
    chunks: list[dict[str, Any]] = field(default_factory=list)
    references: list[dict[str, str]] = field(default_factory=list)
    text: str = ""
    sections: dict[str, str] = field(default_factory=dict)
    found: dict[str, int] = field(default_factory=dict)
    retrieval: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


ENTITY_HEADER = "Entities (knowledge graph):"
RELATION_HEADER = "Relations (knowledge graph):"
PASSAGE_HEADER = "Source passages:"
REFERENCE_HEADER = "References:"
UNKNOWN_SOURCE = "unknown_source"  # LightRAG's file_path of an item without a file; it gets no reference


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def entity_line(entity: dict[str, Any]) -> str:
    return f"- {entity['name']} ({entity['type']}): {_one_line(entity['description'])}"


def relation_line(relation: dict[str, Any]) -> str:
    keywords = f" [{relation['keywords']}]" if relation.get("keywords") else ""
    return f"- {relation['source']} <-> {relation['target']}{keywords}: {_one_line(relation['description'])}"


def passage_head(reference_id: int | str, chunk: dict[str, Any]) -> str:
    """A passage's first line: its file's reference number (none without one), file and chunk id."""
    label = f"[{reference_id}] " if reference_id else ""
    return f"{label}{chunk['file_path']} ({chunk['chunk_id']})"


def passage_block(reference_id: int | str, chunk: dict[str, Any]) -> str:
    return f"{passage_head(reference_id, chunk)}\n{chunk['text'].strip()}"


def reference_line(reference_id: int | str, file_path: str) -> str:
    return f"[{reference_id}] {file_path}"


def has_reference(file_path: str) -> bool:
    """Whether passages of ``file_path`` get a reference (LightRAG: not without a file)."""
    return bool(file_path) and file_path != UNKNOWN_SOURCE


def file_references(chunks: list[dict[str, Any]]) -> dict[str, str]:
    """LightRAG's reference numbers ("1", "2", ...), one per file of ``chunks``: the files most
    passages come from first, ties in order of first appearance."""
    counts = Counter(c["file_path"] for c in chunks if has_reference(c["file_path"]))
    ranked = sorted(counts, key=lambda path: -counts[path])  # stable: ties keep their first appearance
    return {path: str(number) for number, path in enumerate(ranked, start=1)}


# Counted whole, ``a + "\n" + b`` has at most one token more than ``a`` and ``"\n" + b``
# counted apart (BPE merges a line's last characters with the line break; checked for
# cl100k_base and o200k_base in tests/test_context.py): a bound that spares re-counting.
JOIN_EXCESS = 1


# Entity and relation lines recur across queries (popular items, one question in several
# modes); their counts are cached by content, so a changed description is counted afresh.
LINE_CACHE_SIZE = 8192


@lru_cache(maxsize=LINE_CACHE_SIZE)
def line_tokens(line: str, encoding: str) -> int:
    """Tokens ``line`` adds after a line break."""
    return count_tokens("\n" + line, encoding)


def _fit(header: str, items: list[Any], render, budget: int, encoding: str) -> tuple[list[Any], str, int]:
    """The ``items`` in rank order that fit in ``budget`` tokens, each kept while it fits (one
    too long for what is left is skipped: in fast mode a hub's joined description can outgrow
    the whole budget), the section's text and a bound on its tokens (at most ``budget``).

    Lines are counted one by one; the whole text is counted again only when the joins could
    push it past the budget (see JOIN_EXCESS)."""
    kept: list[Any] = []
    lines = [header]
    used = count_tokens(header, encoding)
    for item in items:
        line = render(item)
        cost = line_tokens(line, encoding)
        if used + cost > budget:
            continue
        kept.append(item)
        lines.append(line)
        used += cost
    text = "\n".join(lines)
    if used + JOIN_EXCESS * len(kept) <= budget:
        return (kept, text, used + JOIN_EXCESS * len(kept)) if kept else ([], "", 0)
    while kept and (used := count_tokens(text, encoding)) > budget:
        kept.pop()
        lines.pop()
        text = "\n".join(lines)
    return (kept, text, used) if kept else ([], "", 0)


def passage_cost(number: int, chunk: dict[str, Any], encoding: str) -> int:
    """A bound on the tokens a passage block adds after a line break, numbered ``number`` or
    less (a label's tokens never shrink as its number grows). With the chunk's ``text_tokens``
    (stored at indexing) the text is not counted again: a line break before a stripped text is
    one token, and the block's inner break adds at most JOIN_EXCESS."""
    if chunk.get("text_tokens") is None:
        block = count_tokens("\n" + passage_block(number, chunk), encoding)
    else:
        block = count_tokens("\n" + passage_head(number, chunk), encoding) + int(chunk["text_tokens"]) + 1 + JOIN_EXCESS
    return block + JOIN_EXCESS


def _fit_passages(chunks: list[dict[str, Any]], budget: int, encoding: str) -> list[dict[str, Any]]:
    """The longest prefix of ``chunks`` whose passages and reference list stay within ``budget``:
    each passage costs its block, the first passage of a file also the file's reference line,
    all numbered ``len(chunks)``, which no reference number exceeds."""
    number = len(chunks)
    kept: list[dict[str, Any]] = []
    files: set[str] = set()
    used = count_tokens(PASSAGE_HEADER + "\n\n" + REFERENCE_HEADER, encoding) + 2 * JOIN_EXCESS
    for chunk in chunks:
        path = chunk["file_path"]
        new_file = has_reference(path) and path not in files
        cost = passage_cost(number, chunk, encoding)
        if new_file:
            cost += line_tokens(reference_line(number, path), encoding) + JOIN_EXCESS
        if used + cost > budget:
            break
        kept.append(chunk)
        used += cost
        if new_file:
            files.add(path)
    return kept


def _render_passages(chunks: list[dict[str, Any]], references: list[dict[str, str]]) -> str:
    if not chunks:
        return ""
    passages = "\n".join([PASSAGE_HEADER, *(passage_block(c["reference_id"], c) for c in chunks)])
    refs = "\n".join([REFERENCE_HEADER, *(reference_line(r["reference_id"], r["file_path"]) for r in references)])
    return passages + "\n\n" + refs


def build_context(
    entities: list[dict[str, Any]],
    relations: list[dict[str, Any]],
    chunks: list[dict[str, Any]],
    budgets: Budgets,
    *,
    reserved_tokens: int = 0,
    encoding: str = "cl100k_base",
) -> QueryContext:
    """Cut ranked entities, relations and chunks to the budgets and render the context.

    ``reserved_tokens`` (prompt, question, history) count against ``max_total_tokens``;
    passages and their reference list get what the graph sections leave.
    """
    total = budgets.max_total_tokens - reserved_tokens
    kept_e, entity_text, entity_tokens = _fit(
        ENTITY_HEADER, entities, entity_line, min(budgets.max_entity_tokens, total), encoding)
    left = total - entity_tokens
    kept_r, relation_text, relation_tokens = _fit(
        RELATION_HEADER, relations, relation_line, min(budgets.max_relation_tokens, left), encoding
    )
    left -= relation_tokens + 4  # blank lines between sections

    kept_c = _fit_passages(chunks, left, encoding)
    numbers = file_references(kept_c)
    chunks_out = [{**c, "reference_id": numbers.get(c["file_path"], "")} for c in kept_c]
    references = [{"reference_id": number, "file_path": path} for path, number in numbers.items()]
    sections = {"entities": entity_text, "relations": relation_text, "passages": _render_passages(chunks_out, references)}
    text = "\n\n".join(part for part in sections.values() if part)
    found = {"entities": len(entities), "relations": len(relations), "chunks": len(chunks)}
    return QueryContext(kept_e, kept_r, chunks_out, references, text, sections, found)
