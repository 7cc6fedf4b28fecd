"""Map-reduce summaries of descriptions that grew too long (LightRAG's rule), optionally
starting from the item's previous summary (``base``, see core.graph.summary_bases)."""

from __future__ import annotations

import asyncio
from typing import Any

from lightrag_ray.config import Settings
from lightrag_ray.core import prompts
from lightrag_ray.core.tokenizer import count_tokens
from lightrag_ray.models.llm import LLMClient, Messages
from lightrag_ray.models.usage import LLMCall


def _groups(fragments: list[str], max_input_tokens: int) -> list[list[str]]:
    """Consecutive groups of fragments, each under ``max_input_tokens`` (at least 2 per group)."""
    groups: list[list[str]] = [[]]
    size = 0
    for fragment in fragments:
        tokens = count_tokens(fragment)
        if groups[-1] and size + tokens > max_input_tokens and len(groups[-1]) >= 2:
            groups.append([])
            size = 0
        groups[-1].append(fragment)
        size += tokens
    return groups


def summary_limits(settings: Settings) -> dict[str, Any]:
    """The keyword arguments of ``level_messages`` and ``summarize`` from the settings."""
    graph = settings.graph
    return {"language": settings.extraction.language, "target_tokens": graph.summary_target_tokens,
            "max_input_tokens": graph.summary_max_tokens * 4}


def level_messages(
    kind: str, name: str, fragments: list[str], *, base: str = "", language: str, target_tokens: int,
    max_input_tokens: int,
) -> list[Messages]:
    """The prompts of one map-reduce level: one per group of fragments that fits a prompt.
    With a ``base`` summary, the first group is that summary updated with the first fragments."""
    groups = _groups([base, *fragments] if base else fragments, max_input_tokens)
    return [
        prompts.summary_update_messages(kind, name, base, group[1:], language, target_tokens)
        if base and i == 0 else prompts.summary_messages(kind, name, group, language, target_tokens)
        for i, group in enumerate(groups)
    ]


async def summarize(
    client: LLMClient, kind: str, name: str, fragments: list[str], base: str = "", call: LLMCall | None = None,
    **limits: Any,
) -> str:
    """One description from many (and the previous summary ``base``, if any): summarise
    groups that fit a prompt, then their summaries (``limits``: see ``summary_limits``; ``call``
    adds up the calls' usage)."""
    while True:
        answers = await asyncio.gather(*(client.complete(messages, call=call) for messages in
                                         level_messages(kind, name, fragments, base=base, **limits)))
        fragments, base = [answer.strip() for answer in answers], ""
        if len(fragments) == 1:
            return fragments[0]
