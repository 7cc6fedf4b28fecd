"""Query keywords: parse the LLM's JSON answer, or derive keywords without an LLM."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
_LIST = r'"{key}"\s*:\s*\[(.*?)\]'
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


@dataclass
class Keywords:
    """High-level (themes) and low-level (names, terms) keywords of a question, and the LLM's
    answer they were parsed from ("" when no LLM was asked)."""

    high: list[str] = field(default_factory=list)
    low: list[str] = field(default_factory=list)
    answer: str = field(default="", compare=False, repr=False)


def _clean(values: object) -> list[str]:
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list):
        return []
    return list(dict.fromkeys(str(v).strip() for v in values if str(v).strip()))


def parse_keywords(text: str) -> Keywords:
    """Keywords from an LLM answer: JSON (fenced, with prose around it, or broken) -> lists.

    Never raises; unusable answers give empty lists.
    """
    match = _OBJECT.search(text or "")
    if match:
        try:
            data = json.loads(match.group(0))
            if isinstance(data, dict):
                return Keywords(_clean(data.get("high_level_keywords")), _clean(data.get("low_level_keywords")))
        except json.JSONDecodeError:
            pass
    found = {}
    for key in ("high_level_keywords", "low_level_keywords"):
        lst = re.search(_LIST.format(key=key), text or "", re.DOTALL)
        found[key] = _clean(_QUOTED.findall(lst.group(1))) if lst else []
    return Keywords(found["high_level_keywords"], found["low_level_keywords"])


def keywords_without_llm(question: str) -> Keywords:
    """Keywords when no LLM is configured: names found by fast extraction, the question as theme."""
    from lightrag_ray.core.fast_extraction import fast_extract

    names = [e.name for e in fast_extract(question, "query").entities]
    return Keywords(high=[question], low=names or [question])
