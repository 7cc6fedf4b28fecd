"""build_context keeps every budget exactly, counted as the LLM will count it (whole text)."""

from __future__ import annotations

import random

from lightrag_ray.core.context import Budgets, build_context
from lightrag_ray.core.tokenizer import count_tokens

WORDS = "Scrooge counting-house Marley's ghost: chains, 7 years; £20 — Tiny Tim (crutch) 'God bless us' \n".split(" ")


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def test_sections_and_total_stay_within_their_budgets():
    rng = random.Random(3)
    for trial in range(40):
        entities = [{"name": _text(rng, 2), "type": "person", "description": _text(rng, rng.randint(5, 80))}
                    for _ in range(rng.randint(0, 40))]
        relations = [{"source": _text(rng, 2), "target": _text(rng, 2), "keywords": _text(rng, 3),
                      "description": _text(rng, rng.randint(5, 60))} for _ in range(rng.randint(0, 40))]
        chunks = [{"chunk_id": f"chunk-{i}", "file_path": f"f{i}.txt", "text": _text(rng, rng.randint(20, 300))}
                  for i in range(rng.randint(0, 15))]
        budgets = Budgets(rng.randint(20, 900), rng.randint(20, 900), rng.randint(200, 3000))
        reserved = rng.randint(0, 150)
        context = build_context(entities, relations, chunks, budgets, reserved_tokens=reserved)
        sections = context.sections
        assert count_tokens(sections["entities"]) <= budgets.max_entity_tokens, trial
        assert count_tokens(sections["relations"]) <= budgets.max_relation_tokens, trial
        assert count_tokens(context.text) <= budgets.max_total_tokens - reserved, trial
        assert len(context.entities) == max(0, sections["entities"].count("\n- "))
        # passages are kept as a prefix of the ranked list, numbered in order
        assert context.chunks == [{**c, "ref": n} for n, c in enumerate(chunks[:len(context.chunks)], start=1)]
