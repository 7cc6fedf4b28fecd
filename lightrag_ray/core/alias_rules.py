"""Which entity names are variants of one another (pure functions, no Ray).

Two entities are aliases when one name is the other with words left out ("Marley" /
"Jacob Marley" / "Old Jacob Marley"), with words cut to initials ("J. R. R. Tolkien" /
"John Ronald Reuel Tolkien"), or is its acronym ("USA" / "United States of America"), and,
unless only middle words were left out, the two share a passage (``alias_reason``). Aliases
link entities; they never merge them. Name vectors are not a rule: measured with the default
embedding model, true variants score 0.75-0.83 ("Bill Clinton" / "William Jefferson Clinton"
0.79) and different entities as much or more ("Bill Clinton" / "Hillary Clinton" 0.77,
"Chicago Bulls" / "Boston Bulls" 0.85, docs/benchmarks.md).

Candidates are found by *blocks*: every name gets a few block keys (its last word, its
initials), and only names that share a block are compared, so the work is bounded by the
number of new names times ``MAX_BLOCK``. A block with more than ``MAX_BLOCK`` names (a hub
word such as "river" or "county") is skipped. A name whose longer forms number more than
``MAX_LINKS`` ("Smith"), or are not variants of one another ("Burton": "Richard Burton",
"Keenan Burton"), is ambiguous and gets no link.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

MAX_BLOCK = 64  # names sharing one block key before the block counts as a hub and is skipped
MAX_LINKS = 4  # aliases one name may get from a block before it counts as ambiguous
MAX_FREQUENCY = 4  # a shortened form in more than this many times its long form's passages is a common word
_WORD = re.compile(r"[^\W_]+(?:['-][^\W_]+)*", re.UNICODE)  # "rent-a-car", "o'neal": one word
_SKIPPED_IN_ACRONYMS = {"of", "the", "and", "for", "in", "on", "at", "de", "du", "des", "la", "le", "del", "von", "van", "&"}
_SUFFIXES = {"jr", "sr", "ii", "iii", "iv"}
_NO_SPACES_SCRIPT = re.compile("[\u2e80-\U0010ffff]")  # CJK and beyond: scripts written without spaces
_CONNECTORS = {"of", "in", "on", "at", "for", "and", "&"}  # "University of Oxford": "Oxford" is another entity

NameRow = tuple[str, str, list[str]]  # (key, display name, passages): a Name as shards send it


class Name(NamedTuple):
    """An entity as the alias rules see it: its key (core.names.entity_key), display name and
    the passages that mention it."""

    key: str
    name: str
    chunks: frozenset[str] = frozenset()

    @classmethod
    def of(cls, row: NameRow) -> Name:
        key, name, chunks = row
        return cls(key, name, frozenset(chunks))


def words(key: str) -> list[str]:
    """The words of a key, in order, without name suffixes (Jr., III); none for a name in a
    script written without spaces (Chinese, Japanese), whose variants these rules cannot tell."""
    return list(_words(key))


@functools.lru_cache(maxsize=1 << 16)
def _words(key: str) -> tuple[str, ...]:
    """``words``, cached: a pass asks for the same names' words once per pair they are in."""
    if _NO_SPACES_SCRIPT.search(key):
        return ()
    return tuple(w for w in _WORD.findall(key) if w not in _SUFFIXES)


def _initials(tokens: tuple[str, ...]) -> str:
    return "".join(w[0] for w in tokens if w not in _SKIPPED_IN_ACRONYMS)


def _is_acronym(name: Name) -> bool:
    """A single upper-case word of 2-6 letters ("USA", "NASA")."""
    text = name.name.replace(".", "").strip()
    return text.isascii() and text.isalpha() and text.isupper() and 2 <= len(text) <= 6


def block_keys(key: str) -> set[str]:
    """Where to look for the variants of the entity ``key``: its last word, and its initials
    (a name of several words) or itself (one short word, which may be an acronym)."""
    tokens = _words(key)
    keys = {f"w:{tokens[-1]}"} if tokens and len(tokens[-1]) > 1 and not tokens[-1].isdigit() else set()
    if len([w for w in tokens if w not in _SKIPPED_IN_ACRONYMS]) >= 2:
        keys.add(f"i:{_initials(tokens)}")
    if len(tokens) == 1 and tokens[0].isascii() and tokens[0].isalpha() and 2 <= len(tokens[0]) <= 6:
        keys.add(f"i:{tokens[0]}")
    return keys


def _fits(short: tuple[str, ...], long: tuple[str, ...]) -> tuple[bool, bool]:
    """Whether ``short``'s words appear in ``long`` in order (a one-letter word matching a word
    it is the initial of), not all after a connector ("of": the complement of a phrase names
    another entity), and whether an initial was used."""
    used_initial, at, first = False, 0, None
    for word in short:
        while at < len(long) and not (long[at] == word or (len(word) == 1 and long[at].startswith(word))):
            at += 1
        if at == len(long):
            return False, False
        first = at if first is None else first
        used_initial |= long[at] != word
        at += 1
    if any(w in _CONNECTORS for w in long[:first]):
        return False, False
    return True, used_initial


def lexical_reason(a: Name, b: Name) -> str | None:
    """Why ``a`` and ``b`` name one entity by their spelling alone ("contained", "initials",
    "acronym"), or None."""
    if a.key == b.key:
        return None
    ta, tb = _words(a.key), _words(b.key)
    if not ta or not tb:
        return None
    if _is_acronym(a) and len(tb) >= 2 and _initials(tb) == ta[0]:
        return "acronym"
    if _is_acronym(b) and len(ta) >= 2 and _initials(ta) == tb[0]:
        return "acronym"
    if ta[-1] != tb[-1] or len(ta[-1]) < 3 or ta == tb:
        return None
    orders = [(ta, tb), (tb, ta)] if len(ta) == len(tb) else [(ta, tb) if len(ta) < len(tb) else (tb, ta)]
    for short, long in orders:
        fits, used_initial = _fits(short, long)
        if fits:
            return "initials" if used_initial else "contained"
    return None


def alias_reason(a: Name, b: Name) -> str | None:
    """Why ``a`` and ``b`` are variants of one entity, or None. Spelling alone suffices when the
    shorter form keeps the first and last words and drops middle ones ("Helen Hunt" / "Helen
    Elizabeth Hunt"). A form that drops leading words, or an acronym, must also share a passage
    with the longer form, as a surname does with the full name a text introduces it by, and be
    about as frequent (in at most ``MAX_FREQUENCY`` times its passages, plus one): alone,
    "Sudan" / "South Sudan" or "American" / "Asian American" look the same as "Bradshaw" /
    "Matthew Bradshaw" (measured on HotpotQA, docs/benchmarks.md)."""
    reason = lexical_reason(a, b)
    if reason is None:
        return None
    short, long = (a, b) if _shorter(a, b) == a else (b, a)
    short_words, long_words = _words(short.key), _words(long.key)
    if reason != "acronym" and len(short_words) >= 2 and short_words[0][0] == long_words[0][0]:
        return reason
    related = short.chunks & long.chunks and len(short.chunks) <= MAX_FREQUENCY * len(long.chunks) + 1
    return reason if related else None


def _shorter(a: Name, b: Name) -> Name:
    """The name of a linked pair that is the variant of the other (the acronym, or fewer words)."""
    if _is_acronym(a) != _is_acronym(b):
        return a if _is_acronym(a) else b
    return a if (len(_words(a.key)), a.key) <= (len(_words(b.key)), b.key) else b


def _pair(a: Name, b: Name) -> tuple[str, str]:
    return (a.key, b.key) if a.key < b.key else (b.key, a.key)


def find_aliases(new_keys: set[str], blocks: dict[str, list[Name]]) -> dict[tuple[str, str], str | None]:
    """Alias pairs ``(key, key)`` (smaller first) -> reason, between the entities ``new_keys``
    and the others sharing a block with them (``blocks``: block key -> every entity in it, the
    new ones included). A pair whose variant is ambiguous in its block maps to None (remove it,
    were it linked by an earlier pass), so the links do not depend on the order documents came
    in."""
    verdicts: dict[tuple[str, str], str | None] = {}
    for block, members in sorted(blocks.items()):
        for pair, reason in block_verdicts(new_keys, members).items():
            if reason is not None or pair not in verdicts:  # a link in a later block wins
                verdicts[pair] = reason
    return verdicts


def block_verdicts(new_keys: set[str], members: list[Name]) -> dict[tuple[str, str], str | None]:
    """``find_aliases`` within one block (``members``: every entity in it); a variant is
    ambiguous when its longer forms in the block are too many or not variants of each other."""
    verdicts: dict[tuple[str, str], str | None] = {}
    if len(members) <= MAX_BLOCK and any(m.key in new_keys for m in members):
        ambiguous: dict[str, bool] = {}
        for name in (m for m in members if m.key in new_keys):
            for other in members:
                reason = alias_reason(name, other)
                if reason is None:
                    continue
                short = _shorter(name, other)
                if short.key not in ambiguous:
                    longer = [m for m in members if alias_reason(short, m) and _shorter(short, m) == short]
                    ambiguous[short.key] = len(longer) > MAX_LINKS or any(
                        lexical_reason(a, b) is None for i, a in enumerate(longer) for b in longer[i + 1:])
                    if ambiguous[short.key]:  # every link of an ambiguous variant goes, old ones too
                        for m in longer:
                            verdicts.setdefault(_pair(short, m), None)
                if not ambiguous[short.key]:
                    verdicts[_pair(name, other)] = reason
    return verdicts
