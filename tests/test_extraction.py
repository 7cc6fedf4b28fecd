"""Unit tests for lightrag_ray.core.parsing: name normalisation and the answer parser."""

from __future__ import annotations

import logging
import random
import time

import pytest

from lightrag_ray.core.names import MAX_NAME_LEN, entity_key, normalize_name
from lightrag_ray.core.parsing import parse_extraction
from lightrag_ray.core.prompts import COMPLETE, FIELD_SEP
from lightrag_ray.core.records import EntityRecord, Extraction, RelationRecord


def rec(*fields: str) -> str:
    """One record line in LightRAG's current format."""
    return FIELD_SEP.join(fields)


def names(result: Extraction) -> list[str]:
    return [e.name for e in result.entities]


def pairs(result: Extraction) -> list[tuple[str, str]]:
    return [(r.source, r.target) for r in result.relations]


# ---------------------------------------------------------------- normalize_name / entity_key


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("Scrooge", "Scrooge"),
        ("  Scrooge \n", "Scrooge"),
        ('"Scrooge"', "Scrooge"),
        ("'Scrooge'", "Scrooge"),
        ("**Scrooge**", "Scrooge"),
        ("`Scrooge`", "Scrooge"),
        ("<Scrooge>", "Scrooge"),
        ('  "**<Scrooge>**" ', "Scrooge"),
        ("(Scrooge)", "Scrooge"),
        ("[Scrooge]", "Scrooge"),
        ("Ebenezer    Scrooge", "Ebenezer Scrooge"),
        ("Ebenezer\t\nScrooge", "Ebenezer Scrooge"),
        ("ebenezer scrooge", "Ebenezer Scrooge"),
        ("new york city", "New York City"),
        ("jean-luc picard", "Jean-Luc Picard"),
        ("3rd street", "3rd Street"),
        ("NASA", "NASA"),
        ("iPhone", "iPhone"),
        ("LightRAG", "LightRAG"),
        ("McDonald's", "McDonald's"),
        ("Apple (company)", "Apple (company)"),
        ("(A) and (B)", "(A) and (B)"),
        ("1984", "1984"),
        ("史高治", "史高治"),
        ("  「史高治」 ", "史高治"),
        ("北京 大学", "北京 大学"),
        ("café society", "café society"),  # not ASCII: left as written
        ("", ""),
        ('  "" ** ', ""),
    ],
)
def test_normalize_name(raw: str, expected: str) -> None:
    assert normalize_name(raw) == expected


@pytest.mark.parametrize(
    "raw", ["scrooge", '"**Ebenezer  Scrooge**"', "iPhone", "史高治", "(a)"]
)
def test_normalize_name_is_idempotent(raw: str) -> None:
    once = normalize_name(raw)
    assert normalize_name(once) == once


def test_normalize_name_replaces_control_characters() -> None:
    assert normalize_name("Scro\x00oge\x07") == "Scro oge"


def test_entity_key_identifies_case_and_wrapping_variants() -> None:
    assert entity_key("scrooge") == entity_key("Scrooge") == entity_key('  "SCROOGE" ')
    assert entity_key("Ebenezer  scrooge") == entity_key("ebenezer Scrooge")
    assert entity_key("LightRAG") == entity_key("lightrag") == "lightrag"
    assert entity_key("Scrooge") != entity_key("Marley")


def test_entity_key_chinese_and_fullwidth() -> None:
    assert entity_key("史高治") == "史高治"
    assert entity_key(" 《三国演义》") == entity_key("《三国演义》")
    assert entity_key("ＮＡＳＡ") == entity_key("nasa")
    assert entity_key("史高治") != entity_key("马利")


# ---------------------------------------------------------------- format a: record lines


def test_record_format_basic() -> None:
    text = "\n".join([
        rec("entity", "Scrooge", "person", "A miser who hates Christmas."),
        rec("entity", "Marley", "person", "Scrooge's dead partner."),
        rec("relation", "Scrooge", "Marley", "partnership, business", "They were partners."),
        COMPLETE,
    ])
    result = parse_extraction(text, "chunk-1", "carol.txt")
    assert result.entities == [
        EntityRecord("Scrooge", "person", "A miser who hates Christmas.", "chunk-1", "carol.txt"),
        EntityRecord("Marley", "person", "Scrooge's dead partner.", "chunk-1", "carol.txt"),
    ]
    assert result.relations == [
        RelationRecord("Scrooge", "Marley", "partnership, business", "They were partners.",
                       "chunk-1", 1.0, "carol.txt"),
    ]
    assert result.dropped == 0


def test_record_format_file_path_defaults_to_empty() -> None:
    result = parse_extraction(rec("entity", "Scrooge", "person", "x"), "c")
    assert result.entities[0].file_path == ""
    assert result.entities[0].chunk_id == "c"


def test_spaces_around_delimiters_and_tag_case() -> None:
    text = ("ENTITY  <|#|>  Scrooge <|#|> Person <|#|>  A miser.  \n"
            "Relation <|#|> Scrooge <|#|> Bob <|#|> work <|#|> Employs Bob.")
    result = parse_extraction(text, "c")
    assert names(result) == ["Scrooge"]
    assert result.entities[0].type == "person"
    assert result.entities[0].description == "A miser."
    assert pairs(result) == [("Scrooge", "Bob")]
    assert result.dropped == 0


def test_surrounding_quotes_and_parentheses() -> None:
    text = "\n".join([
        '"' + rec("entity", "Scrooge", "person", "A miser.") + '"',
        "(" + rec("entity", "Marley", "person", "A ghost.") + ")",
        rec('"entity"', '"Bob"', '"person"', '"A clerk."'),
        "(" + rec("relation", "Scrooge", "Bob", "work", "Employs Bob.") + ")",
    ])
    result = parse_extraction(text, "c")
    assert [(e.name, e.type, e.description) for e in result.entities] == [
        ("Scrooge", "person", "A miser."),
        ("Marley", "person", "A ghost."),
        ("Bob", "person", "A clerk."),
    ]
    assert [(r.keywords, r.description) for r in result.relations] == [("work", "Employs Bob.")]
    assert result.dropped == 0


def test_numbering_bullets_and_code_fences() -> None:
    text = "\n".join([
        "Here are the records:",
        "```text",
        "1. " + rec("entity", "Scrooge", "person", "A miser."),
        "2) " + rec("entity", "Marley", "person", "A ghost."),
        "- " + rec("entity", "Bob", "person", "A clerk."),
        "* " + rec("relation", "Scrooge", "Bob", "work", "Employs Bob."),
        "```",
    ])
    result = parse_extraction(text, "c")
    assert names(result) == ["Scrooge", "Marley", "Bob"]
    assert pairs(result) == [("Scrooge", "Bob")]
    assert result.dropped == 0


def test_records_separated_by_double_hash_on_one_line() -> None:
    text = "##".join([
        rec("entity", "Scrooge", "person", "A miser."),
        rec("entity", "Marley", "person", "A ghost."),
        rec("relation", "Scrooge", "Marley", "partners", "Partners."),
    ]) + "##" + COMPLETE
    result = parse_extraction(text, "c")
    assert names(result) == ["Scrooge", "Marley"]
    assert pairs(result) == [("Scrooge", "Marley")]
    assert result.dropped == 0


def test_records_separated_by_double_hash_and_newlines() -> None:
    text = rec("entity", "Scrooge", "person", "A miser.") + "\n##\n" + rec(
        "entity", "Marley", "person", "A ghost.")
    assert names(parse_extraction(text, "c")) == ["Scrooge", "Marley"]


@pytest.mark.parametrize("delimiter", ["<|#|>", "<|#>", "<#|>", "<|##|>", "|#|", " <|#|> "])
def test_delimiter_variants(delimiter: str) -> None:
    text = (delimiter.join(["entity", "Scrooge", "person", "A miser."]) + "\n"
            + delimiter.join(["relation", "Scrooge", "Marley", "partners", "Partners."]))
    result = parse_extraction(text, "c")
    assert [(e.name, e.type, e.description) for e in result.entities] == [
        ("Scrooge", "person", "A miser.")]
    assert [(r.source, r.target, r.keywords, r.description) for r in result.relations] == [
        ("Scrooge", "Marley", "partners", "Partners.")]
    assert result.dropped == 0


def test_mixed_delimiter_variants_in_one_line() -> None:
    text = "entity<|#>Scrooge<#|>person<|##|>A miser."
    result = parse_extraction(text, "c")
    assert (result.entities[0].name, result.entities[0].description) == ("Scrooge", "A miser.")


def test_extra_trailing_fields_join_the_description() -> None:
    text = "\n".join([
        rec("entity", "Scrooge", "person", "A miser", "who hates Christmas."),
        rec("relation", "Scrooge", "Marley", "partners", "Business", "partners for years."),
    ])
    result = parse_extraction(text, "c")
    assert result.entities[0].description == "A miser who hates Christmas."
    assert result.relations[0].description == "Business partners for years."
    assert result.relations[0].keywords == "partners"
    assert result.dropped == 0


def test_trailing_numeric_field_of_a_long_relation_is_the_weight() -> None:
    text = rec("relation", "Scrooge", "Marley", "partners", "Partners.", "0.7")
    result = parse_extraction(text, "c")
    assert result.relations[0].weight == pytest.approx(0.7)
    assert result.relations[0].description == "Partners."


def test_relation_with_four_fields_has_empty_keywords() -> None:
    result = parse_extraction(rec("relation", "Scrooge", "Marley", "They were partners."), "c")
    assert result.relations == [
        RelationRecord("Scrooge", "Marley", "", "They were partners.", "c", 1.0, "")]
    assert result.dropped == 0


def test_everything_after_complete_is_ignored() -> None:
    text = "\n".join([
        rec("entity", "Scrooge", "person", "A miser."),
        COMPLETE,
        rec("entity", "Marley", "person", "A ghost."),
        "entity<|#|>",  # would be dropped if parsed
    ])
    result = parse_extraction(text, "c")
    assert names(result) == ["Scrooge"]
    assert result.dropped == 0


def test_complete_marker_on_the_same_line() -> None:
    text = rec("entity", "Scrooge", "person", "A miser.") + COMPLETE + rec("entity", "X", "y", "z")
    result = parse_extraction(text, "c")
    assert names(result) == ["Scrooge"]
    assert result.entities[0].description == "A miser."


def test_complete_marker_case_insensitive() -> None:
    text = rec("entity", "Scrooge", "person", "A miser.") + "\n<|complete|>\n" + rec(
        "entity", "Marley", "person", "x")
    assert names(parse_extraction(text, "c")) == ["Scrooge"]


def test_types_are_normalised() -> None:
    text = "\n".join([
        rec("entity", "Scrooge", "Person", "a"),
        rec("entity", "Acme Corp", "Business  Organization", "b"),
        rec("entity", "Marley", "", "c"),
        rec("entity", "Bob", '"Person"', "d"),
    ])
    result = parse_extraction(text, "c")
    assert [e.type for e in result.entities] == ["person", "business_organization", "unknown",
                                                 "person"]


def test_keywords_are_normalised_and_deduplicated() -> None:
    keywords = " partnership ;business,  partnership,, greed,Business"
    text = rec("relation", "Scrooge", "Marley", keywords, "Partners.")
    result = parse_extraction(text, "c")
    assert result.relations[0].keywords == "partnership, business, greed"


def test_entity_with_empty_or_missing_description_is_kept() -> None:
    text = "\n".join([
        rec("entity", "Scrooge", "person", "   "),
        rec("entity", "Marley", "person"),
        rec("entity", "Bob", "person", ""),
    ])
    result = parse_extraction(text, "c")
    assert [(e.name, e.description) for e in result.entities] == [
        ("Scrooge", ""), ("Marley", ""), ("Bob", "")]
    assert result.dropped == 0


def test_names_are_normalised_in_entities_and_relations() -> None:
    text = "\n".join([
        rec("entity", '"**ebenezer scrooge**"', "person", "A miser."),
        rec("relation", "ebenezer   scrooge", "`Marley`", "partners", "Partners."),
    ])
    result = parse_extraction(text, "c")
    assert names(result) == ["Ebenezer Scrooge"]
    assert pairs(result) == [("Ebenezer Scrooge", "Marley")]


def test_chinese_records() -> None:
    text = "\n".join([
        rec("entity", "史高治", "人物", "一个吝啬的商人。"),
        rec("entity", "马利", "人物", "史高治的合伙人。"),
        rec("relation", "史高治", "马利", "合伙，生意、合伙", "两人是合伙人。"),
    ])
    result = parse_extraction(text, "c")
    assert names(result) == ["史高治", "马利"]
    assert result.entities[0].type == "人物"
    assert result.relations[0].keywords == "合伙, 生意"


def test_duplicates_inside_one_answer_are_kept() -> None:
    text = "\n".join([
        rec("entity", "Scrooge", "person", "A miser."),
        rec("entity", "scrooge", "person", "Hates Christmas."),
        rec("relation", "Scrooge", "Marley", "a", "x"),
        rec("relation", "Scrooge", "Marley", "b", "y"),
    ])
    result = parse_extraction(text, "c")
    assert names(result) == ["Scrooge", "Scrooge"]
    assert [r.description for r in result.relations] == ["x", "y"]


def test_descriptions_keep_inner_delimiter_like_text_and_quotes() -> None:
    text = rec("entity", "Scrooge", "person", 'He said "Bah, humbug!" loudly.')
    assert parse_extraction(text, "c").entities[0].description == 'He said "Bah, humbug!" loudly.'


def test_windows_line_endings() -> None:
    text = rec("entity", "Scrooge", "person", "a") + "\r\n" + rec("entity", "Marley", "person", "b")
    result = parse_extraction(text, "c")
    assert [(e.name, e.description) for e in result.entities] == [("Scrooge", "a"), ("Marley", "b")]


# ---------------------------------------------------------------- format b: tuples


def test_tuple_format() -> None:
    text = (
        '("entity"<|>"SCROOGE"<|>"PERSON"<|>"Scrooge is a miser.")##\n'
        '("entity"<|>"MARLEY"<|>"PERSON"<|>"Marley is a ghost.")##\n'
        '("relationship"<|>"SCROOGE"<|>"MARLEY"<|>"They were partners."'
        '<|>"partnership, business"<|>8)##\n'
        '("content_keywords"<|>"greed, christmas")\n'
        "<|COMPLETE|>"
    )
    result = parse_extraction(text, "c", "f")
    assert [(e.name, e.type, e.description) for e in result.entities] == [
        ("SCROOGE", "person", "Scrooge is a miser."),
        ("MARLEY", "person", "Marley is a ghost."),
    ]
    assert result.relations == [
        RelationRecord("SCROOGE", "MARLEY", "partnership, business", "They were partners.",
                       "c", 8.0, "f"),
    ]
    assert result.dropped == 0  # content_keywords is ignored, not dropped


def test_tuple_format_on_one_line() -> None:
    text = ('("entity"<|>Scrooge<|>person<|>A miser.)##("entity"<|>Bob<|>person<|>A clerk.)##'
            '("relationship"<|>Scrooge<|>Bob<|>Employs Bob.<|>work<|>2)<|COMPLETE|>')
    result = parse_extraction(text, "c")
    assert names(result) == ["Scrooge", "Bob"]
    assert [(r.keywords, r.description, r.weight) for r in result.relations] == [
        ("work", "Employs Bob.", 2.0)]


def test_tuple_relationship_without_keywords() -> None:
    text = '("relationship"<|>"Scrooge"<|>"Bob"<|>"Employs Bob."<|>0.5)'
    result = parse_extraction(text, "c")
    assert [(r.keywords, r.description, r.weight) for r in result.relations] == [
        ("", "Employs Bob.", 0.5)]


def test_tuple_relationship_without_strength() -> None:
    text = '("relationship"<|>"Scrooge"<|>"Bob"<|>"Employs Bob."<|>"work, money")'
    result = parse_extraction(text, "c")
    assert [(r.keywords, r.description, r.weight) for r in result.relations] == [
        ("work, money", "Employs Bob.", 1.0)]


def test_tuple_description_with_parentheses() -> None:
    text = '("entity"<|>"Scrooge"<|>"person"<|>"A miser (very rich).")'
    assert parse_extraction(text, "c").entities[0].description == "A miser (very rich)."


@pytest.mark.parametrize("strength, expected", [
    ("8", 8.0), ("0.25", 0.25), ('"3"', 3.0), ("0", 1.0), ("-2", 1.0), ("nan", 1.0),
    ("inf", 1.0), ("high", 1.0),
])
def test_tuple_strength_to_weight(strength: str, expected: float) -> None:
    text = f'("relationship"<|>"A"<|>"B"<|>"desc"<|>"kw"<|>{strength})'
    result = parse_extraction(text, "c")
    assert len(result.relations) == 1
    assert result.relations[0].weight == pytest.approx(expected)


def test_tuple_and_record_formats_mixed() -> None:
    text = "\n".join([
        '("entity"<|>"Scrooge"<|>"person"<|>"A miser.")',
        rec("entity", "Marley", "person", "A ghost."),
        rec("relation", "Scrooge", "Marley", "partners", "Partners."),
        '("relationship"<|>"Scrooge"<|>"Marley"<|>"Haunted by."<|>"ghost"<|>5)',
    ])
    result = parse_extraction(text, "c")
    assert names(result) == ["Scrooge", "Marley"]
    assert [(r.keywords, r.description, r.weight) for r in result.relations] == [
        ("partners", "Partners.", 1.0), ("ghost", "Haunted by.", 5.0)]


# ---------------------------------------------------------------- format c: JSON


def test_json_object() -> None:
    text = """{"entities": [{"name": "Scrooge", "type": "Person", "description": "A miser."}],
      "relations": [{"source": "Scrooge", "target": "Marley", "keywords": "partners",
                     "description": "Partners.", "weight": 3}]}"""
    result = parse_extraction(text, "c", "f")
    assert result.entities == [EntityRecord("Scrooge", "person", "A miser.", "c", "f")]
    assert result.relations == [RelationRecord("Scrooge", "Marley", "partners", "Partners.",
                                               "c", 3.0, "f")]
    assert result.dropped == 0


def test_json_lightrag_field_names_in_fence_after_prose() -> None:
    text = """Sure, here is the graph:
```json
{"entities": [{"entity_name": "scrooge", "entity_type": "person",
               "entity_description": "A miser."}],
 "relationships": [{"src_id": "Scrooge", "tgt_id": "Bob", "keywords": ["work", "money", "work"],
                    "description": "Employs Bob.", "strength": "7"},
                   {"source_entity": "Bob", "target_entity": "Tiny Tim",
                    "description": "Father of Tim."}]}
```
Let me know if you need more."""
    result = parse_extraction(text, "c")
    assert [(e.name, e.type, e.description) for e in result.entities] == [
        ("Scrooge", "person", "A miser.")]
    assert [(r.source, r.target, r.keywords, r.weight) for r in result.relations] == [
        ("Scrooge", "Bob", "work, money", 7.0), ("Bob", "Tiny Tim", "", 1.0)]
    assert result.dropped == 0


def test_json_inline_after_prose_without_fence() -> None:
    text = 'Result: {"entities": [{"name": "Scrooge", "type": "person", "description": "x"}]} done'
    assert names(parse_extraction(text, "c")) == ["Scrooge"]


def test_json_top_level_list_with_kind_markers() -> None:
    text = """[
      {"kind": "entity", "name": "Scrooge", "type": "person", "description": "A miser."},
      {"type": "entity", "name": "Marley", "entity_type": "ghost"},
      {"kind": "relation", "source": "Scrooge", "target": "Marley", "keywords": "partners"},
      {"type": "relationship", "src_id": "Marley", "tgt_id": "Scrooge", "weight": -1}
    ]"""
    result = parse_extraction(text, "c")
    assert [(e.name, e.type) for e in result.entities] == [
        ("Scrooge", "person"), ("Marley", "ghost")]
    assert [(r.source, r.target, r.weight) for r in result.relations] == [
        ("Scrooge", "Marley", 1.0), ("Marley", "Scrooge", 1.0)]
    assert result.dropped == 0


def test_json_lines_of_single_records() -> None:
    text = "\n".join([
        '{"kind": "entity", "name": "Scrooge", "type": "person", "description": "A miser."}',
        '{"kind": "content_keywords", "keywords": "greed"}',
        '{"source": "Scrooge", "target": "Marley", "strength": 2}',
    ])
    result = parse_extraction(text, "c")
    assert [(e.name, e.type) for e in result.entities] == [("Scrooge", "person")]
    assert [(r.source, r.target, r.weight) for r in result.relations] == [
        ("Scrooge", "Marley", 2.0)]
    assert result.dropped == 0


def test_json_invalid_items_are_dropped() -> None:
    text = """{"entities": [{"name": ""}, {"type": "person"}, 42,
                                        {"name": "Scrooge", "type": "person"}],
                          "relations": [{"source": "Scrooge"}, {"source": "A", "target": "a"},
                                        {"source": "A", "target": "B"}]}"""
    result = parse_extraction(text, "c")
    assert names(result) == ["Scrooge"]
    assert pairs(result) == [("A", "B")]
    assert result.dropped == 5


def test_json_bare_names_in_entities_list() -> None:
    result = parse_extraction('{"entities": ["Scrooge", "  marley "]}', "c")
    assert [(e.name, e.type, e.description) for e in result.entities] == [
        ("Scrooge", "unknown", ""), ("Marley", "unknown", "")]


def test_json_mixed_with_record_lines() -> None:
    text = "\n".join([
        rec("entity", "Scrooge", "person", "A miser."),
        '{"entities": [{"name": "Marley", "type": "person"}]}',
        rec("relation", "Scrooge", "Marley", "partners", "Partners."),
    ])
    result = parse_extraction(text, "c")
    assert sorted(names(result)) == ["Marley", "Scrooge"]
    assert pairs(result) == [("Scrooge", "Marley")]
    assert result.dropped == 0


def test_unrelated_or_broken_json_is_prose() -> None:
    text = '{"answer": 42}\n{"entities": [ {"name": "Scrooge"'
    result = parse_extraction(text, "c")
    assert result.entities == [] and result.relations == []
    assert result.dropped == 0


# ---------------------------------------------------------------- drop rules


def test_prose_is_ignored_silently() -> None:
    text = "\n".join([
        "Entity extraction results follow.",
        "The relation between Scrooge and Marley is complicated.",
        "## Entities",
        "(see below)",
        rec("entity", "Scrooge", "person", "A miser."),
    ])
    result = parse_extraction(text, "c")
    assert names(result) == ["Scrooge"]
    assert result.dropped == 0


@pytest.mark.parametrize("line", [
    rec("entity", "", "person", "no name"),
    rec("entity", '""', "person", "only quotes"),
    rec("entity", "X" * (MAX_NAME_LEN + 1), "person", "too long"),
    rec("entity", "Scrooge"),
    "entity<|#|>",
    rec("relation", "", "Marley", "kw", "no source"),
    rec("relation", "Scrooge", "  ", "kw", "no target"),
    rec("relation", "Scrooge", "scrooge", "kw", "self loop"),
    rec("relation", '"Scrooge"', "SCROOGE", "self loop, wrapped"),
    rec("relation", "Scrooge", "Marley"),
    rec("node", "Scrooge", "person", "unknown tag"),
    rec("Scrooge", "person", "missing tag"),
    '("entity" Scrooge person)',
    '("relationship"<|>"A"<|>"a"<|>"self"<|>"kw"<|>1)',
])
def test_malformed_record_is_dropped(line: str) -> None:
    result = parse_extraction(line + "\n" + rec("entity", "Ok", "thing", "fine"), "c")
    assert names(result) == ["Ok"]
    assert result.relations == []
    assert result.dropped == 1


def test_name_at_max_length_is_kept() -> None:
    result = parse_extraction(rec("entity", "X" * MAX_NAME_LEN, "thing", "long"), "c")
    assert len(result.entities) == 1 and result.dropped == 0


def test_drop_count_accumulates() -> None:
    text = "\n".join([
        rec("entity", "", "person", "a"),
        rec("relation", "A", "A", "k", "b"),
        rec("entity", "Scrooge", "person", "ok"),
        "entity<|#|>",
        "just prose",
    ])
    result = parse_extraction(text, "c")
    assert names(result) == ["Scrooge"]
    assert result.dropped == 3


def test_one_warning_with_count_and_chunk_id(caplog: pytest.LogCaptureFixture) -> None:
    text = "\n".join([rec("entity", "", "p", "a"), rec("relation", "A", "a", "k", "b")])
    with caplog.at_level(logging.WARNING, logger="lightrag_ray.core.parsing"):
        parse_extraction(text, "chunk-42")
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "2" in warnings[0].getMessage() and "chunk-42" in warnings[0].getMessage()


def test_no_warning_without_drops(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="lightrag_ray.core.parsing"):
        result = parse_extraction(rec("entity", "Scrooge", "person", "x") + "\nprose", "c")
    assert result.dropped == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


# ---------------------------------------------------------------- robustness


@pytest.mark.parametrize("text", ["", "   ", "\n\n", COMPLETE, "##", FIELD_SEP, "<|>", "()", "[]",
                                  "{}", "```", None, b"entity<|#|>A<|#|>b<|#|>c", 12345])
def test_degenerate_inputs(text: object) -> None:
    result = parse_extraction(text, "c")  # type: ignore[arg-type]
    assert isinstance(result, Extraction)
    assert all(e.name for e in result.entities)


def test_bytes_input_is_decoded() -> None:
    raw = rec("entity", "Scrooge", "person", "x").encode()
    result = parse_extraction(raw, "c")  # type: ignore[arg-type]
    assert names(result) == ["Scrooge"]


def test_huge_input() -> None:
    lines = [rec("entity", f"Entity {i}", "thing", "d" * 50) for i in range(20000)]
    lines += [rec("relation", f"Entity {i}", f"Entity {i + 1}", "k", "d") for i in range(5000)]
    result = parse_extraction("\n".join(lines) + "\n" + COMPLETE, "c")
    assert len(result.entities) == 20000
    assert len(result.relations) == 5000
    assert result.dropped == 0


def test_huge_pathological_json_like_input() -> None:
    text = '"entities" ' + "[" * 100000 + "{" * 1000 + '"name"' * 1000
    result = parse_extraction(text, "c")
    assert result.entities == [] and result.relations == []


@pytest.mark.parametrize("text", [
    "x" + " " * 300_000 + "y",
    "<" + "\t" * 300_000,
    "entity<|#|>" + " " * 300_000 + "<|#|>person",
    '"entities" ' + "{ " * 100_000,
    "- 1. " * 60_000,
    "(" + ")" + " " * 300_000 + "x",
])
def test_long_runs_parse_in_linear_time(text: str) -> None:
    started = time.perf_counter()
    result = parse_extraction(text, "c")
    assert time.perf_counter() - started < 5.0
    assert result.entities == [] and result.relations == []


def test_huge_single_name_is_dropped_not_fatal() -> None:
    result = parse_extraction(rec("entity", "N" * 1_000_000, "thing", "d"), "c")
    assert result.entities == [] and result.dropped == 1


_FRAGMENTS = [
    "entity", "relation", "relationship", '"entity"', '("relationship"', "content_keywords",
    "ENTITY", "Scrooge", "scrooge", "Marley", "史高治", "马利", "iPhone", "person", "", " ",
    "<|#|>", "<|#>", "<#|>", "<|##|>", "|#|", "<|>", "##", "\n", "\r\n", "\t", "<|COMPLETE|>",
    "(", ")", '"', "'", "*", "`", "```json", "```", "1. ", "- ", "{", "}", "[", "]", ":", ",",
    '{"entities": [', '{"name": "A"}', '{"source": "A", "target": "a"}', ']}',
    '"relations"', "0.5", "-1", "nan", "1e999", "\x00", "\x1f", "\x1e", "\ue000", "\ue001",
    "\u200b", "\ufeff", "🎄", "Ω", "X" * 250, rec("entity", "Bob", "person", "a clerk"),
    rec("relation", "Bob", "Tim", "family", "father"),
    '("entity"<|>"Fred"<|>"person"<|>"nephew")',
]


def _assert_invariants(result: Extraction) -> None:
    assert isinstance(result, Extraction)
    assert result.dropped >= 0
    for entity in result.entities:
        assert entity.name and entity.name == entity.name.strip()
        assert len(entity.name) <= MAX_NAME_LEN
        assert entity.type and " " not in entity.type
        assert entity.chunk_id == "fuzz"
    for relation in result.relations:
        assert relation.source and relation.target
        assert entity_key(relation.source) != entity_key(relation.target)
        assert relation.weight > 0 and relation.weight == relation.weight
        assert relation.chunk_id == "fuzz"


def test_fuzz_fragments() -> None:
    rng = random.Random(1234)
    parsed_any = False
    for _ in range(500):
        text = "".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(0, 60)))
        result = parse_extraction(text, "fuzz")
        _assert_invariants(result)
        parsed_any = parsed_any or bool(result.entities or result.relations)
    assert parsed_any  # the fuzzer does exercise the success paths too


def test_fuzz_random_bytes_and_unicode() -> None:
    rng = random.Random(99)
    for _ in range(300):
        raw = bytes(rng.randrange(256) for _ in range(rng.randint(0, 400)))
        _assert_invariants(parse_extraction(raw.decode("utf-8", "replace"), "fuzz"))
        _assert_invariants(parse_extraction(raw.decode("latin-1"), "fuzz"))
        chars = "".join(chr(rng.randrange(0x110000)) for _ in range(rng.randint(0, 80)))
        _assert_invariants(parse_extraction(chars, "fuzz"))  # lone surrogates included


def test_fuzz_mutated_valid_answers() -> None:
    rng = random.Random(7)
    base = "\n".join([
        rec("entity", "Scrooge", "person", "A miser."),
        rec("relation", "Scrooge", "Marley", "partners", "Partners."),
        '("relationship"<|>"Scrooge"<|>"Bob"<|>"Employs."<|>"work"<|>3)',
        '{"entities": [{"name": "Tim", "type": "child"}]}',
        COMPLETE,
    ])
    for _ in range(300):
        chars = list(base)
        for _ in range(rng.randint(1, 10)):
            position = rng.randrange(len(chars))
            action = rng.random()
            if action < 0.4:
                del chars[position]
            elif action < 0.8:
                chars.insert(position, rng.choice(_FRAGMENTS))
            else:
                chars[position] = chr(rng.randrange(32, 0x3000))
        _assert_invariants(parse_extraction("".join(chars), "fuzz"))


def test_normalize_name_fuzz_is_idempotent_and_key_stable() -> None:
    rng = random.Random(5)
    for _ in range(500):
        raw = "".join(rng.choice(_FRAGMENTS[:40] + ["a", "b", " x ", "[", "(", "「"])
                      for _ in range(rng.randint(0, 8)))
        once = normalize_name(raw)
        assert normalize_name(once) == once
        assert entity_key(raw) == entity_key(once)
