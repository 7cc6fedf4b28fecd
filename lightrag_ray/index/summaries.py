"""Map-reduce summaries of descriptions that grew too long (LightRAG's rule)."""

from __future__ import annotations

import asyncio

from lightrag_ray.core import prompts
from lightrag_ray.core.tokenizer import count_tokens
from lightrag_ray.models.llm import LLMClient


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


async def summarize(
    client: LLMClient, kind: str, name: str, fragments: list[str], *,
    language: str, target_tokens: int, max_input_tokens: int,
) -> str:
    """One description from many: summarise groups that fit a prompt, then their summaries."""
    while True:
        groups = _groups(fragments, max_input_tokens)
        answers = await asyncio.gather(
            *(
                client.complete(prompts.summary_messages(kind, name, group, language, target_tokens))
                for group in groups
            )
        )
        fragments = [answer.strip() for answer in answers]
        if len(fragments) == 1:
            return fragments[0]
