"""Build the query context within token budgets (pure functions, no Ray).

The context has three sections: graph entities, graph relations and numbered source
passages, followed by a reference list that maps each number to its file and chunk.
Each section is cut to its budget: lines are counted one by one, plus a bound on what the
line breaks can add, and a section is counted whole only when that bound could pass its
budget, so budgets hold for the text as the LLM counts it.
"""

from __future__ import annotations

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
    """What retrieval found and the text handed to the LLM."""

    entities: list[dict[str, Any]] = field(default_factory=list)
    relations: list[dict[str, Any]] = field(default_factory=list)
    chunks: list[dict[str, Any]] = field(default_factory=list)
    references: list[dict[str, Any]] = field(default_factory=list)
    text: str = ""
    sections: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


ENTITY_HEADER = "Entities (knowledge graph):"
RELATION_HEADER = "Relations (knowledge graph):"
PASSAGE_HEADER = "Source passages:"
REFERENCE_HEADER = "References:"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def entity_line(entity: dict[str, Any]) -> str:
    return f"- {entity['name']} ({entity['type']}): {_one_line(entity['description'])}"


def relation_line(relation: dict[str, Any]) -> str:
    keywords = f" [{relation['keywords']}]" if relation.get("keywords") else ""
    return f"- {relation['source']} <-> {relation['target']}{keywords}: {_one_line(relation['description'])}"


def passage_block(number: int, chunk: dict[str, Any]) -> str:
    return f"[{number}] {chunk['file_path']} ({chunk['chunk_id']})\n{chunk['text'].strip()}"


def reference_line(number: int, chunk: dict[str, Any]) -> str:
    return f"[{number}] {chunk['file_path']} ({chunk['chunk_id']})"


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
    """The longest prefix of ``items`` whose rendered section stays within ``budget`` tokens,
    the section's text and a bound on its tokens (at most ``budget``).

    Lines are counted one by one; the whole text is counted again only when the joins could
    push it past the budget (see JOIN_EXCESS)."""
    kept: list[Any] = []
    lines = [header]
    used = count_tokens(header, encoding)
    for item in items:
        line = render(item)
        cost = line_tokens(line, encoding)
        if used + cost > budget:
            break
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
    """A bound on the tokens a passage block and its reference line add, each after a line
    break. With the chunk's ``text_tokens`` (stored at indexing) the text is not counted again:
    a line break before a stripped text is one token, and the block's inner break adds at most
    JOIN_EXCESS."""
    reference = count_tokens("\n" + reference_line(number, chunk), encoding)  # also the block's first line
    if chunk.get("text_tokens") is None:
        block = count_tokens("\n" + passage_block(number, chunk), encoding)
    else:
        block = reference + int(chunk["text_tokens"]) + 1 + JOIN_EXCESS
    return block + reference + 2 * JOIN_EXCESS


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

    numbered = list(enumerate(chunks, start=1))
    # Passages and their references must fit together; each passage costs its block + reference line.
    kept_c: list[tuple[int, dict[str, Any]]] = []
    used = count_tokens(PASSAGE_HEADER + "\n\n" + REFERENCE_HEADER, encoding) + 2 * JOIN_EXCESS
    for number, chunk in numbered:
        cost = passage_cost(number, chunk, encoding)
        if used + cost > left:
            break
        kept_c.append((number, chunk))
        used += cost

    def render_passages(items: list[tuple[int, dict[str, Any]]]) -> str:
        if not items:
            return ""
        passages = "\n".join([PASSAGE_HEADER, *(passage_block(n, c) for n, c in items)])
        refs = "\n".join([REFERENCE_HEADER, *(reference_line(n, c) for n, c in items)])
        return passages + "\n\n" + refs

    passage_text = render_passages(kept_c)

    sections = {"entities": entity_text, "relations": relation_text, "passages": passage_text}
    text = "\n\n".join(part for part in sections.values() if part)
    references = [
        {"ref": n, "chunk_id": c["chunk_id"], "file_path": c["file_path"], "doc_id": c.get("doc_id", "")}
        for n, c in kept_c
    ]
    chunks_out = [{**c, "ref": n} for n, c in kept_c]
    return QueryContext(kept_e, kept_r, chunks_out, references, text, sections)
