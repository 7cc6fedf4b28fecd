"""Entity identity: the display form of a name and the key entities merge by.

Every layer that groups entities (parsing, fast extraction, graph routing, subgraphs,
aliases) uses these two functions, so "the same entity" means one thing everywhere."""

from __future__ import annotations

import re
import unicodedata

MAX_NAME_LEN = 200
NAME_STRIP = "\"'`*<> \u201c\u201d\u2018\u2019\u300c\u300d\u300e\u300f"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_LOWER_WORD_START = re.compile(r"(^|[\s\-/])([a-z])")
_BRACKETS = {"(": ")", "[": "]", "{": "}", "\uff08": "\uff09", "\u3010": "\u3011"}


def normalize_name(name: str) -> str:
    """Display form of an entity name: unwrapped, whitespace-collapsed, lower-case titled."""
    text, previous = " ".join(_CONTROL.sub(" ", str(name or "")).split()), None
    while text != previous:
        previous = text
        text = text.strip(NAME_STRIP)
        closing, inner = _BRACKETS.get(text[:1]), text[1:-1]
        if closing and text.endswith(closing) and text[0] not in inner and closing not in inner:
            text = inner
    text = " ".join(text.split())
    if text.isascii() and text == text.lower() and any(c.isalpha() for c in text):
        text = _LOWER_WORD_START.sub(lambda m: m.group(1) + m.group(2).upper(), text)
    return text


def entity_key(name: str) -> str:
    """Identity key of an entity: the casefolded (and NFKC-folded) normalized name."""
    return unicodedata.normalize("NFKC", normalize_name(name)).casefold()
