"""Prompt texts, written for lightrag-ray.

The extraction output format is LightRAG's record format so that models tuned on it
work unchanged: one record per line, fields separated by ``<|#|>``, the answer ended
by ``<|COMPLETE|>``. Each prompt opens with a distinct heading (``*_HEADING``) so logs,
and the scripted test LLM, can tell the kinds of request apart.
"""

from __future__ import annotations

FIELD_SEP = "<|#|>"
COMPLETE = "<|COMPLETE|>"

EXTRACT_HEADING = "## Knowledge graph extraction"
GLEAN_HEADING = "## Missed records"
SUMMARY_HEADING = "## Description merge"

_EXTRACT_SYSTEM = f"""{EXTRACT_HEADING}
You read a passage and write down the entities it names and the relations it states
between them, so that they can be merged into a knowledge graph.

Entities: things the passage names that a reader could ask about, of one of these
types: {{entity_types}} (use "other" when none fits). For each, write one line:
entity{FIELD_SEP}<name>{FIELD_SEP}<type>{FIELD_SEP}<what the passage says about it>

Relations: pairs of entities from your list that the passage connects. For each pair,
write one line:
relation{FIELD_SEP}<source name>{FIELD_SEP}<target name>{FIELD_SEP}<a few comma-separated theme keywords>{FIELD_SEP}<how they are connected, according to the passage>

Rules:
- Use the names as the passage writes them, in title case for proper names.
- Descriptions rely only on the passage, in {{language}}, one or two sentences each.
- No headings, numbering or commentary; write {COMPLETE} on the last line.
"""

_EXTRACT_USER = """Passage:
<input_text>
{text}
</input_text>
Write the records now."""

_GLEAN_USER = f"""{GLEAN_HEADING}
Read the passage again. Write only entities and relations you did not list yet,
in the same line format. If nothing is missing, write just {COMPLETE}."""

_SUMMARY_USER = f"""{SUMMARY_HEADING}
Several passages describe the {{kind}} "{{name}}". Merge these descriptions into one
coherent description in {{language}} of at most {{max_tokens}} tokens. Keep every
distinct fact, resolve contradictions by stating both, and do not invent anything.
Reply with the description only.

Descriptions:
{{fragments}}"""

_SUMMARY_UPDATE_USER = f"""{SUMMARY_HEADING}
The {{kind}} "{{name}}" has this description so far:
<current_description>
{{summary}}
</current_description>
New passages add the descriptions listed below. Rewrite the description in {{language}}
so that it also covers them, in at most {{max_tokens}} tokens. Keep every distinct fact,
old and new, resolve contradictions by stating both, and do not invent anything.
Reply with the description only.

New descriptions:
{{fragments}}"""


def extraction_messages(text: str, entity_types: list[str], language: str) -> list[dict[str, str]]:
    """Chat messages asking for the entity/relation records of one chunk."""
    system = _EXTRACT_SYSTEM.format(entity_types=", ".join(entity_types), language=language)
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": _EXTRACT_USER.format(text=text)},
    ]


def gleaning_messages(previous: list[dict[str, str]], previous_answer: str) -> list[dict[str, str]]:
    """The conversation continued with one 'anything missed?' turn."""
    return [
        *previous,
        {"role": "assistant", "content": previous_answer},
        {"role": "user", "content": _GLEAN_USER},
    ]


def summary_messages(
    kind: str, name: str, fragments: list[str], language: str, max_tokens: int
) -> list[dict[str, str]]:
    """Chat messages asking to merge description fragments of one entity or relation."""
    content = _SUMMARY_USER.format(
        kind=kind, name=name, language=language, max_tokens=max_tokens, fragments=_listed(fragments)
    )
    return [{"role": "user", "content": content}]


def summary_update_messages(
    kind: str, name: str, summary: str, fragments: list[str], language: str, max_tokens: int
) -> list[dict[str, str]]:
    """Chat messages asking to extend an existing summary with new description fragments."""
    content = _SUMMARY_UPDATE_USER.format(
        kind=kind, name=name, summary=summary, language=language, max_tokens=max_tokens, fragments=_listed(fragments)
    )
    return [{"role": "user", "content": content}]


def _listed(fragments: list[str]) -> str:
    return "\n".join(f"- {fragment}" for fragment in fragments)


KEYWORDS_HEADING = "## Query keywords"
ANSWER_HEADING = "## Answer from the knowledge base"

_KEYWORDS_USER = f"""{KEYWORDS_HEADING}
Find the search keywords of the question below, at two levels:
- "high_level_keywords": the themes, concepts or kinds of relation the question is about;
- "low_level_keywords": the specific names, objects, places or terms it mentions.
Use the question's own language. Reply with one JSON object and nothing else, e.g.
{{{{"high_level_keywords": ["economic policy"], "low_level_keywords": ["central bank", "Japan"]}}}}

Question: {{question}}"""

_ANSWER_SYSTEM = f"""{ANSWER_HEADING}
Answer the user's question using only the knowledge base context below: entities and
relations from a knowledge graph, and source passages numbered by file.
- Say so plainly when the context does not contain the answer; never invent facts.
- Cite the passages you rely on with their file's number in square brackets, e.g. [2].
- End with a "References" list of the cited numbers and their sources.
- Write in the language of the question.{{response_type}}{{instructions}}

Knowledge base context:
{{context}}"""


def keywords_messages(question: str) -> list[dict[str, str]]:
    """Chat messages asking for high- and low-level keywords of a question as JSON."""
    return [{"role": "user", "content": _KEYWORDS_USER.format(question=question)}]


def answer_messages(
    question: str, context: str, history: list[dict[str, str]] | None = None, response_type: str = "",
    instructions: str = "",
) -> list[dict[str, str]]:
    """System prompt with the context (and the caller's ``instructions``), the conversation
    so far, then the question."""
    style = f"\n- Answer format: {response_type}." if response_type else ""
    extra = f"\n\nInstructions from the application:\n{instructions}" if instructions else ""
    system = _ANSWER_SYSTEM.format(context=context, response_type=style, instructions=extra)
    return [{"role": "system", "content": system}, *(history or []), {"role": "user", "content": question}]
