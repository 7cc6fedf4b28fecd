"""build_context keeps every budget exactly, counted as the LLM will count it (whole text)."""

from __future__ import annotations

import random

import pytest

from lightrag_ray.core.context import (
    JOIN_EXCESS,
    Budgets,
    build_context,
    file_references,
    passage_block,
    passage_cost,
    reference_line,
)
from lightrag_ray.core.tokenizer import count_tokens

WORDS = "Scrooge counting-house Marley's ghost: chains, 7 years; £20 — Tiny Tim (crutch) 'God bless us' \n".split(" ")


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def test_sections_and_total_stay_within_their_budgets():
    rng = random.Random(3)
    for trial in range(300):
        entities = [{"name": _text(rng, 2), "type": "person", "description": _text(rng, rng.randint(5, 80))}
                    for _ in range(rng.randint(0, 40))]
        relations = [{"source": _text(rng, 2), "target": _text(rng, 2), "keywords": _text(rng, 3),
                      "description": _text(rng, rng.randint(5, 60))} for _ in range(rng.randint(0, 40))]
        files = rng.randint(1, 6)  # passages share files: references are per file
        chunks = [{"chunk_id": f"chunk-{i}", "file_path": f"f{rng.randrange(files)}.txt", "text": _text(rng, rng.randint(20, 300))}
                  for i in range(rng.randint(0, 15))]
        budgets = Budgets(rng.randint(20, 900), rng.randint(20, 900), rng.randint(200, 3000))
        reserved = rng.randint(0, 150)
        context = build_context(entities, relations, chunks, budgets, reserved_tokens=reserved)
        sections = context.sections
        assert count_tokens(sections["entities"]) <= budgets.max_entity_tokens, trial
        assert count_tokens(sections["relations"]) <= budgets.max_relation_tokens, trial
        assert count_tokens(context.text) <= budgets.max_total_tokens - reserved, trial
        assert len(context.entities) == max(0, sections["entities"].count("\n- "))
        # passages are kept as a prefix of the ranked list, each with its file's reference
        kept = chunks[:len(context.chunks)]
        numbers = file_references(kept)
        assert context.chunks == [{**c, "reference_id": numbers[c["file_path"]]} for c in kept]
        assert context.references == [{"reference_id": n, "file_path": f} for f, n in numbers.items()]
        assert context.found == {"entities": len(entities), "relations": len(relations), "chunks": len(chunks)}


def test_a_graph_line_longer_than_the_budget_is_skipped_and_the_lines_after_it_are_kept():
    """A hub's joined fast-mode description (28k characters for "American" on HotpotQA) must not
    empty the whole entity section."""
    hub = {"name": "American", "type": "proper_noun", "description": "An American film. " * 2000}
    specific = [{"name": f"Person {i}", "type": "person", "description": f"Person {i} sailed."} for i in range(3)]
    relations = [{"source": "A", "target": "B", "keywords": "k", "description": "word " * 5000},
                 {"source": "A", "target": "C", "keywords": "k", "description": "A met C."}]
    context = build_context([specific[0], hub, *specific[1:]], relations, [], Budgets(500, 500, 3000))
    assert [e["name"] for e in context.entities] == ["Person 0", "Person 1", "Person 2"]
    assert [r["target"] for r in context.relations] == ["C"] and "American" not in context.text


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_a_line_break_adds_at_most_join_excess_tokens_to_the_parts_counted_apart(encoding):
    """The bound build_context relies on to count lines one by one (JOIN_EXCESS)."""
    pieces = [*"abXY \t\n\r.,;:'\"-()[]{}09£€$%&*/\\<>", "'s", "'ll", "’", "中文", "。", "，", "😀", "é", " \n", "\n\n", "- ", "[1] "]
    rng = random.Random(7)
    worst = 0
    for _ in range(20000):
        a = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        b = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        worst = max(worst, count_tokens(a + "\n" + b, encoding) - count_tokens(a, encoding) - count_tokens("\n" + b, encoding))
    assert worst == JOIN_EXCESS  # reached (so the bound is needed) and never passed


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_apassage_costs_at_most_its_bound_from_the_stored_text_tokens(encoding):
    rng = random.Random(11)
    for trial in range(300):
        text = _text(rng, rng.randint(1, 200)).strip() or "x"
        chunk = {"chunk_id": f"chunk-{trial}", "file_path": f"dir/file {trial}.txt", "text": text}
        number = trial + 1
        counted = passage_cost(number, chunk, encoding)
        stored = passage_cost(number, {**chunk, "text_tokens": count_tokens(text, encoding)}, encoding)
        exact = count_tokens("\n" + passage_block(number, chunk), encoding)
        assert exact <= counted <= stored <= exact + 3 * JOIN_EXCESS + 1, trial
        smaller = count_tokens("\n" + passage_block(rng.randint(1, number), chunk), encoding)
        assert smaller <= exact  # a bound for any smaller reference number


def test_references_are_per_file_most_passages_first_as_lightrag_numbers_them():
    paths = ["a.txt", "b.txt", "b.txt", "c.txt", "a.txt", "b.txt", "", "unknown_source", "d.txt"]
    chunks = [{"chunk_id": f"chunk-{i}", "file_path": path, "text": f"passage {i}"} for i, path in enumerate(paths)]
    assert file_references(chunks) == {"b.txt": "1", "a.txt": "2", "c.txt": "3", "d.txt": "4"}
    context = build_context([], [], chunks, Budgets(100, 100, 5000))
    assert [c["reference_id"] for c in context.chunks] == ["2", "1", "1", "3", "2", "1", "", "", "4"]
    assert context.references == [{"reference_id": "1", "file_path": "b.txt"}, {"reference_id": "2", "file_path": "a.txt"},
                                  {"reference_id": "3", "file_path": "c.txt"}, {"reference_id": "4", "file_path": "d.txt"}]
    refs = context.sections["passages"].split("References:\n")[1]
    assert refs.splitlines() == [reference_line(r["reference_id"], r["file_path"]) for r in context.references]
    assert "\n[1] b.txt (chunk-1)\npassage 1" in context.text and "\nunknown_source (chunk-7)\npassage 7" in context.text


def test_passages_fill_the_same_budget_with_stored_or_counted_text_tokens():
    rng = random.Random(5)
    chunks = [{"chunk_id": f"chunk-{i}", "file_path": f"f{i}.txt", "text": _text(rng, rng.randint(50, 300)).strip()}
              for i in range(12)]
    stored = [{**c, "text_tokens": count_tokens(c["text"])} for c in chunks]
    for total in range(400, 4000, 150):
        budgets = Budgets(500, 500, total)
        counted_context = build_context([], [], chunks, budgets)
        stored_context = build_context([], [], stored, budgets)
        assert count_tokens(stored_context.text) <= total
        assert len(counted_context.chunks) - 1 <= len(stored_context.chunks) <= len(counted_context.chunks)


def test_line_counts_are_cached_by_content_and_a_changed_line_is_counted_afresh():
    from lightrag_ray.core.context import entity_line, line_tokens

    entity = {"name": "Jacob Marley", "type": "person", "description": "Scrooge's late partner, in chains."}
    budgets = Budgets(1000, 1000, 5000)
    line_tokens.cache_clear()
    first = build_context([entity], [], [], budgets)
    again = build_context([dict(entity)], [], [], budgets)
    assert line_tokens.cache_info().hits == 1 and again.text == first.text
    changed = {**entity, "description": "Scrooge's late partner, who walks the earth in chains he forged in life."}
    assert line_tokens(entity_line(changed), "cl100k_base") == count_tokens("\n" + entity_line(changed))
    assert build_context([changed], [], [], budgets).text != first.text
    assert (line_tokens.cache_info().misses, line_tokens.cache_info().hits) == (2, 2)  # the rebuild found the changed line
