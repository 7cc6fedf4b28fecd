"""Turn an LLM's extraction answer into entity/relation records (pure functions, no Ray).

Formats, auto-detected and possibly mixed: LightRAG's ``entity<|#|>...``/``relation<|#|>...``
lines, the older ``("entity"<|>...)##("relationship"<|>...)`` tuples, and JSON
(``{"entities": [...], "relations": [...]}`` or a list of records with a kind marker).
Everything after ``<|COMPLETE|>`` is ignored; :func:`parse_extraction` never raises."""

from __future__ import annotations

import itertools
import json
import logging
import math
import re
from typing import Any

from lightrag_ray.core.names import MAX_NAME_LEN, NAME_STRIP, entity_key, normalize_name
from lightrag_ray.core.records import EntityRecord, Extraction, RelationRecord

__all__ = ["parse_extraction"]

logger = logging.getLogger(__name__)

_SEP = "\ue000"  # canonical field separator of the record format (all delimiter variants)
_TUPLE_SEP = "\ue001"  # canonical field separator of the tuple format's ``<|>``
_FIELD_DELIM = re.compile(r"<\|#+\|>|<\|#+>|<#+\|>|\|#+\|")  # fields are stripped later
_TUPLE_DELIM = re.compile(r"<\|>")
_COMPLETE = re.compile(r"<\|?\s*complete\s*\|?>|\|complete\|", re.IGNORECASE)
_RECORD_SPLIT = re.compile(r"\n|##+")
_FIELD_SPLIT = re.compile(f"[{_SEP}{_TUPLE_SEP}]")
_LINE_PREFIX = re.compile(r"^(?:(?:```[\w-]*|[-*•+]\s|\d{1,4}[.):]|>)\s*)+")
_TAG_JUNK = re.compile(r"[\s\"'`*()\[\]<>:]")
_KEYWORD_SPLIT = re.compile(r"[,;，；、\n]")
_JSON_HINT = re.compile(r'"(?:entities|relations|relationships|kind|name|entity_name|'
                        r'entity_type|source|src_id)"', re.IGNORECASE)
_JSON_START = re.compile(r"[\[{](?=\s*[\[{\"\]}])")
_DECODER = json.JSONDecoder()

_QUOTES = "\"'`\u201c\u201d"
_TAGS = {"entity": "entity", "entities": "entity", "content_keywords": "ignore"}
_TAGS.update(dict.fromkeys(("relation", "relations", "relationship", "relationships"), "relation"))
_LIST_KEYS = {"entities": "entity", "relations": "relation", "relationships": "relation"}
_NAME_KEYS = ("name", "entity_name", "entity")
_SOURCE_KEYS = ("source", "src_id", "source_entity", "src", "from")
_TARGET_KEYS = ("target", "tgt_id", "target_entity", "tgt", "to")


def _as_text(value: Any) -> str:
    """Any value as text: None -> "", bytes decoded, lists joined with ", "."""
    if isinstance(value, (list, tuple)):
        return ", ".join(map(_as_text, value))
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _checked_name(value: Any) -> str:
    """The normalized name, or "" when it is empty or longer than MAX_NAME_LEN."""
    name = normalize_name(_as_text(value))
    return name if len(name) <= MAX_NAME_LEN else ""


def _norm_type(value: Any) -> str:
    """Entity type: lower-case, spaces to underscores, "unknown" when empty."""
    text = _as_text(value).strip().strip(NAME_STRIP).lower()
    return re.sub(r"\s+", "_", text) or "unknown"


def _norm_keywords(value: Any) -> str:
    """Keywords as "a, b, c": split on commas/semicolons, de-duplicated, order kept."""
    seen: dict[str, str] = {}
    for part in _KEYWORD_SPLIT.split(_as_text(value)):
        word = " ".join(part.strip().strip(NAME_STRIP).split())
        if word and word.casefold() not in seen:
            seen[word.casefold()] = word
    return ", ".join(seen.values())


def _float(value: Any) -> float | None:
    """`value` as a finite float, or None when it is not one."""
    try:
        number = float(value if isinstance(value, (int, float)) else
                       _as_text(value).strip(_QUOTES + " "))
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _clean_desc(value: Any) -> str:
    """Description stripped of whitespace and stray wrapping quotes."""
    text = _as_text(value).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in _QUOTES:
        text = text[1:-1].strip()
    if text.count('"') % 2:  # an unpaired quote left over from a wrapped record
        text = text[:-1] if text.endswith('"') else text[1:] if text.startswith('"') else text
    return text.strip()


class _Sink:
    """Collects records for one chunk, counting the ones that fail validation."""

    def __init__(self, chunk_id: str, file_path: str) -> None:
        self.chunk_id, self.file_path = chunk_id, file_path
        self.out = Extraction()

    def drop(self) -> None:
        self.out.dropped += 1

    def entity(self, name: Any, etype: Any, description: Any) -> None:
        name = _checked_name(name)
        if not name:
            return self.drop()
        self.out.entities.append(EntityRecord(
            name, _norm_type(etype), _clean_desc(description), self.chunk_id, self.file_path))

    def relation(self, source: Any, target: Any, keywords: Any, description: Any,
                 weight: Any) -> None:
        source, target = _checked_name(source), _checked_name(target)
        if not source or not target or entity_key(source) == entity_key(target):
            return self.drop()
        number = _float(weight)
        self.out.relations.append(RelationRecord(
            source, target, _norm_keywords(keywords), _clean_desc(description), self.chunk_id,
            number if number is not None and number > 0 else 1.0, self.file_path))


def _clean_record(raw: str) -> tuple[str, bool]:
    """Strip bullets, numbering, fences and wrapping parentheses; report tuple wrapping."""
    record = _LINE_PREFIX.sub("", raw.strip()).rstrip("`").strip()
    if not record.startswith("("):
        return record, False
    return re.sub(r"\)\s*[,;.]?$", "", record[1:]).strip(), True


def _parse_line_record(raw: str, sink: _Sink) -> None:
    """Parse one record (one line or one ``##`` segment) of the record or tuple format."""
    record, wrapped = _clean_record(raw)
    if _SEP not in record and _TUPLE_SEP not in record:  # prose, unless a tagged tuple
        first = (record.split() or [""])[0]
        if wrapped and _TAGS.get(_TAG_JUNK.sub("", first).lower()) in ("entity", "relation"):
            sink.drop()
        return
    fields = [f.strip() for f in _FIELD_SPLIT.split(record)]
    while fields and not fields[-1]:
        fields.pop()
    kind = _TAGS.get(_TAG_JUNK.sub("", fields[0]).lower()) if fields else None
    args = fields[1:]
    if kind == "entity":  # name, type, description (extra fields join the description)
        return sink.entity(args[0], args[1], _join(args[2:])) if len(args) >= 2 else sink.drop()
    if kind == "relation":
        old_style = _TUPLE_SEP in record or (wrapped and "relationship" in fields[0].lower())
        return _relation_fields(args, sink, old_style)
    if kind != "ignore":
        sink.drop()


def _relation_fields(args: list[str], sink: _Sink, old_style: bool) -> None:
    """Record order: source, target, keywords, description[, extras][, weight] (3 fields =
    no keywords). Tuple order: source, target, description[, keywords][, strength]."""
    if len(args) < 3:
        return sink.drop()
    has_weight = len(args) >= (4 if old_style else 5) and _float(args[-1]) is not None
    weight = args.pop() if has_weight else None
    if old_style:
        keywords = args.pop() if len(args) >= 4 else ""
        return sink.relation(args[0], args[1], keywords, _join(args[2:]), weight)
    keywords, description = ("", args[2:]) if len(args) == 3 else (args[2], args[3:])
    sink.relation(args[0], args[1], keywords, _join(description), weight)


def _join(parts: list[str]) -> str:
    return " ".join(_clean_desc(p) for p in parts if p.strip())


def _lower_keys(item: dict[Any, Any]) -> dict[str, Any]:
    return {str(k).strip().lower(): v for k, v in item.items()}


def _pick(item: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((item[k] for k in keys if item.get(k) is not None), None)


def _record_kind(item: dict[str, Any]) -> str | None:
    """'entity', 'relation', 'ignore' or None, from a kind marker or from the keys present."""
    for key in ("kind", "record_type", "type"):
        kind = _TAGS.get(_as_text(item.get(key)).strip().lower())
        if kind:
            return kind
    if any(k in item for k in _SOURCE_KEYS) and any(k in item for k in _TARGET_KEYS):
        return "relation"
    return "entity" if any(k in item for k in _NAME_KEYS) else None


def _json_item(item: Any, kind: str | None, sink: _Sink) -> None:
    """One JSON record; `kind` is known when it came from an entities/relations list."""
    if kind == "entity" and isinstance(item, str):  # a bare name in an entities list
        return sink.entity(item, "", "")
    if not isinstance(item, dict):
        return sink.drop()
    item = _lower_keys(item)
    kind = kind or _record_kind(item)
    if kind == "entity":
        marker = _as_text(item.get("type")).strip().lower() in _TAGS  # "type" = record kind
        etype = item.get("entity_type") if marker else _pick(item, ("entity_type", "type"))
        sink.entity(_pick(item, _NAME_KEYS), etype,
                    _pick(item, ("description", "entity_description")))
    elif kind == "relation":
        description = _pick(item, ("description", "relationship_description"))
        sink.relation(_pick(item, _SOURCE_KEYS), _pick(item, _TARGET_KEYS),
                      item.get("keywords"), description, _pick(item, ("weight", "strength")))
    elif kind is None:
        sink.drop()


def _json_records(value: Any) -> list[tuple[str | None, Any]]:
    """(kind, item) pairs a decoded JSON value holds; empty when it is not extraction output."""
    if isinstance(value, list):
        hit = any(isinstance(v, dict) and _record_kind(_lower_keys(v)) for v in value)
        return [(None, item) for item in value] if hit else []
    if not isinstance(value, dict):
        return []
    lowered = _lower_keys(value)
    pairs: list[tuple[str | None, Any]] = []
    for key, kind in _LIST_KEYS.items():
        items = lowered.get(key)
        if items is not None:
            pairs += [(kind, item) for item in (items if isinstance(items, list) else [items])]
    return pairs or ([(None, lowered)] if _record_kind(lowered) else [])


def _split_json(text: str) -> tuple[list[tuple[str | None, Any]], str]:
    """JSON records found in `text`, and the text left once their JSON is cut out."""
    if not _JSON_HINT.search(text):
        return [], text
    records: list[tuple[str | None, Any]] = []
    kept, pos = [], 0
    for match in itertools.islice(_JSON_START.finditer(text), 200):
        if match.start() < pos:
            continue
        try:
            value, end = _DECODER.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            continue
        found = _json_records(value)
        if found:
            records += found
            kept.append(text[pos:match.start()])
            pos = end
    kept.append(text[pos:])
    return records, "\n".join(kept)


def _parse_into(text: str, sink: _Sink) -> None:
    """Cut at COMPLETE, take out JSON, then parse what is left record by record."""
    text = re.sub(r"\r\n?", "\n", text).translate({ord(_SEP): " ", ord(_TUPLE_SEP): " "})
    text = _COMPLETE.split(text, maxsplit=1)[0]
    records, rest = _split_json(text)
    for kind, item in records:
        _json_item(item, kind, sink)
    rest = _TUPLE_DELIM.sub(_TUPLE_SEP, _FIELD_DELIM.sub(_SEP, rest))
    for raw in _RECORD_SPLIT.split(rest):
        _parse_line_record(raw, sink)


def parse_extraction(text: str, chunk_id: str, file_path: str = "") -> Extraction:
    """Parse one extraction answer into records; malformed records are counted, never raised."""
    sink = _Sink(_as_text(chunk_id), _as_text(file_path))
    try:
        _parse_into(_as_text(text), sink)
    except Exception:  # the parser must never fail the pipeline; keep what was parsed
        logger.exception("extraction parser failed on chunk %s; keeping partial result", chunk_id)
    if sink.out.dropped:
        logger.warning("dropped %d malformed extraction record(s) in chunk %s",
                       sink.out.dropped, chunk_id)
    return sink.out
