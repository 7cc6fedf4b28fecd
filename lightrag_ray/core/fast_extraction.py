"""Extraction without an LLM ("fast" mode): heuristic entities and co-occurrence relations.

Pure functions, no Ray. :func:`fast_extract` is deterministic and never raises. Language
"auto" means Chinese when more than 20% of the letters/digits are CJK ideographs.

English (no tagger): entities are runs of capitalised words, possibly joined by inner
"of"/"the"/"de"/"van"... ("Bank of England"), with initials ("J. B. Lippincott") and a
leading title ("Mr. Fezziwig": the title is kept, abbreviations always spelled with a dot).
Function words never start or end a name ("The Ghost" -> "Ghost", "I'll" is no name). A
sentence-initial word (also after an opening quote or colon) is dropped when it occurs in
lower case in the chunk, or when it stands alone and is never capitalised mid-sentence in
the chunk. Standalone acronyms (2-6 capitals, not inside an all-caps heading) count too.
Possessives are stripped ("Scrooge's" -> "Scrooge"). Two-word lower-case phrases of
content words seen at least twice in the chunk are "concept" entities (at most 10).
Types: "person" when titled (Mr, Mrs, Miss, Dr, Sir, Lady, Lord, ...) or next to a
reporting verb ("said Scrooge", "Scrooge replied"); "organization"/"location" by a word
such as Company/University or Street/River ("Bank of ..." too); else "proper_noun".
Sentences end at . ! ? (not after Mr./initials, nor before a lower-case continuation),
blank lines and short or tabular lines (headings, lists).

Chinese (jieba.posseg): nr/nrt/nrfg -> person (adjacent parts and parts around "·" joined;
a part of a dotted name alone, "内托", maps to the full name), ns -> location, nt ->
organization (ns+nt joined: "河北"+"中基"), nz, book titles 《...》 and capitalised Latin
names -> proper_noun; a name followed by a suffix such as 铁路/大学/公司 becomes one
location/organization; nouns (n, vn) of 2+ characters seen twice or more -> concept.
Sentences end at 。！？；and line breaks.

Relations: every pair of distinct entities in one sentence (first 8 per sentence, names
before concepts; concept-concept pairs skipped); one record per pair per chunk, weight =
number of sentences, description = those sentences (~300 chars), keywords = up to 3
content words (Chinese: verbs) between or around the pair per sentence (5 in all).
Entity descriptions are the first 3 sentences mentioning the entity (~500 chars); each
entity key gets one record per chunk, under its most frequent spelling.
"""

from __future__ import annotations

import functools
import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from lightrag_ray.core.names import MAX_NAME_LEN, entity_key, normalize_name
from lightrag_ray.core.records import EntityRecord, Extraction, RelationRecord

__all__ = ["CHINESE_NAMES", "detect_language", "fast_extract"]

logger = logging.getLogger(__name__)

MAX_PER_SENTENCE = 8
MAX_CONCEPTS = 10
MAX_KEYWORDS = 5
ENTITY_DESC_CHARS = 500
RELATION_DESC_CHARS = 300
_TYPE_RANK = {"person": 0, "organization": 1, "location": 2, "proper_noun": 3, "concept": 4}

CHINESE_NAMES = frozenset(("zh", "chinese", "中文", "汉语", "zh-cn", "zh-hans", "zh-tw", "zh-hant", "cn"))
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_ALNUM = re.compile(r"[^\W_]")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class _Mention:
    name: str
    etype: str
    start: int
    end: int
    named: bool = True


@dataclass
class _Sentence:
    text: str
    mentions: list[_Mention] = field(default_factory=list)
    keywords: list[tuple[int, str]] = field(default_factory=list)  # (offset, keyword candidate)


# ------------------------------------------------------------------ shared assembly


def detect_language(text: str) -> str:
    """"zh" when more than 20% of the letters/digits are CJK ideographs, else "en"."""
    letters = len(_ALNUM.findall(text))
    return "zh" if letters and len(_CJK.findall(text)) / letters > 0.2 else "en"


def _language(language: str, text: str) -> str:
    lang = (language or "auto").strip().lower()
    if lang in CHINESE_NAMES:
        return "zh"
    if lang in ("en", "english", "en-us", "en-gb"):
        return "en"
    return detect_language(text)


def _trim(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, at a space when there is one nearby."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 3]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "..."


def _join_sentences(texts: list[str], limit: int, joiner: str) -> str:
    out = ""
    for text in texts:
        candidate = f"{out}{joiner}{text}" if out else text
        if out and len(candidate) > limit:
            break
        out = candidate
    return _trim(out, limit)


def _pair_keywords(sentence: _Sentence, a: _Mention, b: _Mention) -> list[str]:
    """Up to 3 keyword candidates between two mentions, else the nearest around them."""
    first, last = (a, b) if a.start <= b.start else (b, a)
    lo, hi = min(first.end, last.start), max(first.end, last.start)
    between = [w for pos, w in sentence.keywords if lo <= pos < hi]
    if len(between) >= 3:
        return between[:3]
    around = [(abs(pos - (last.end if pos >= last.end else first.start)), pos, w)
              for pos, w in sentence.keywords if pos >= last.end or pos < first.start]
    return (between + [w for _, _, w in sorted(around)])[:3]


def _assemble(sentences: list[_Sentence], chunk_id: str, file_path: str, joiner: str) -> Extraction:
    """Entity and relation records from the mentions found in each sentence."""
    keyed: list[list[tuple[str, str, _Mention]]] = []  # per sentence: (key, name, mention)
    spellings: dict[str, Counter[str]] = {}
    types: dict[str, Counter[str]] = {}
    where: dict[str, list[int]] = {}
    for index, sentence in enumerate(sentences):
        keyed.append([])
        for m in sentence.mentions:
            name = normalize_name(m.name)
            key = entity_key(name)
            if not key:
                continue
            keyed[-1].append((key, name, m))
            spellings.setdefault(key, Counter())[name] += 1
            types.setdefault(key, Counter())[m.etype] += 1
            if not where.setdefault(key, []) or where[key][-1] != index:
                where[key].append(index)
    names = {k: max(c, key=lambda n: (c[n], -list(c).index(n))) for k, c in spellings.items()}
    entities = []
    for key, name in names.items():
        votes = types[key]
        specific = [t for t in votes if t not in ("proper_noun", "concept")] or list(votes)
        etype = min(specific, key=lambda t: (-votes[t], _TYPE_RANK.get(t, 9)))
        desc = _join_sentences([sentences[i].text for i in where[key][:3]], ENTITY_DESC_CHARS, joiner)
        entities.append(EntityRecord(name, etype, desc, chunk_id, file_path))
    order = {key: i for i, key in enumerate(names)}
    pairs: dict[tuple[str, str], tuple[list[str], dict[str, str]]] = {}
    for sentence, mentions in zip(sentences, keyed):
        first: dict[str, _Mention] = {}
        for key, _, m in sorted(mentions, key=lambda item: (not item[2].named, item[2].start)):
            first.setdefault(key, m)
        chosen = list(first.items())[:MAX_PER_SENTENCE]
        for i, (ka, ma) in enumerate(chosen):
            for kb, mb in chosen[i + 1:]:
                if not (ma.named or mb.named):
                    continue  # concept-concept pairs are mostly noise
                texts, keywords = pairs.setdefault((ka, kb) if order[ka] < order[kb] else (kb, ka), ([], {}))
                texts.append(sentence.text)
                for word in _pair_keywords(sentence, ma, mb):
                    keywords.setdefault(word.casefold(), word)
    relations = [
        RelationRecord(names[a], names[b], ", ".join(list(keywords.values())[:MAX_KEYWORDS]),
                       _join_sentences(texts, RELATION_DESC_CHARS, joiner), chunk_id, float(len(texts)),
                       file_path)
        for (a, b), (texts, keywords) in pairs.items()
    ]
    return Extraction(entities=entities, relations=relations)


def fast_extract(text: str, chunk_id: str, file_path: str = "", language: str = "auto") -> Extraction:
    """Entities and relations of one chunk by heuristics ("auto", "en" or "zh"); never raises."""
    try:
        text = str(text or "").replace("\ufeff", "")
        if not _ALNUM.search(text):
            return Extraction()
        lang = _language(language, text)
        sentences = _chinese(text) if lang == "zh" else _english(text)
        return _assemble(sentences, chunk_id, file_path, "" if lang == "zh" else " ")
    except Exception:  # noqa: BLE001 - a heuristic must never fail a chunk
        logger.exception("fast extraction failed for chunk %s", chunk_id)
        return Extraction()


def _valid(name: str) -> str:
    name = normalize_name(name)
    return name if 2 <= len(name) <= MAX_NAME_LEN and _ALNUM.search(name) else ""


# ------------------------------------------------------------------ English


_STOP = frozenset("""
a about above across after afterwards again against ah all almost alone along already also although always am
among an and another any anybody anyone anything anyway anywhere are around as at away aye back be became because
become been before beforehand behind being below beside besides between beyond both but by can cannot could dear
did do does doing done down during each either else elsewhere enough even ever every everybody everyone everything
everywhere except far few first for former formerly from further had has have having he hence her here hers herself
hey him himself his how however i if in indeed instead into is it its itself just last latter least less let like
little made make many may me meanwhile might mine more moreover most mostly much must my myself neither never
nevertheless next no nobody none noone nor not nothing now nowhere o of off often oh ok on once one only onto or
other others otherwise our ours ourselves out over own perhaps please quite rather really said same say says see
seem seemed seeming seems several shall she should since so some somebody somehow someone something sometime
sometimes somewhere still such than that the their theirs them themselves then thence there thereafter thereby
therefore therein these they this those though through throughout thus to together too toward towards under unless
until up upon us very via was we well were what whatever when whence whenever where whereas wherever whether which
while whither who whoever whole whom whose why will with within without would yes yet you your yours yourself
yourselves ha hallo hello alas ay nay sir madam mr mrs ms dr st thee thou thy thine ye tis twas get got go went gone
come came coming going goes put take took taken know knew known think thought tell told ask asked replied cried
answered returned looked look looking upon says later soon suddenly finally today yesterday tomorrow tonight
furthermore nonetheless accordingly consequently similarly likewise eventually initially recently currently
previously subsequently additionally ultimately maybe certainly surely whereupon
""".split())
_CONNECTORS = frozenset("of the de van von der den da di du la le del della des y al bin ibn".split())
_TITLES = {"mr": "Mr.", "mrs": "Mrs.", "ms": "Ms.", "dr": "Dr.", "prof": "Prof.", "capt": "Capt.",
           "rev": "Rev.", "st": "St.", "miss": "Miss", "sir": "Sir", "lady": "Lady", "lord": "Lord",
           "dame": "Dame", "madam": "Madam", "madame": "Madame", "professor": "Professor",
           "captain": "Captain", "reverend": "Reverend", "king": "King", "queen": "Queen",
           "prince": "Prince", "princess": "Princess", "uncle": "Uncle", "aunt": "Aunt", "mt": "Mt."}
_NOT_PERSON = frozenset(("st", "mt"))  # prefixes like titles, but "St. Paul", "Mt. Everest" are not persons
_ABBREVIATIONS = frozenset("mr mrs ms dr prof capt rev st jr sr mt messrs no vs etc col gen lt sgt".split())
_REPORTING = frozenset("""said says asked replied cried answered exclaimed returned whispered shouted observed
added continued rejoined muttered murmured remarked inquired enquired screamed laughed sighed""".split())
_ORG_LAST = frozenset("""company corporation corp inc ltd bank university college school society association
institute council church party ministry department agency foundation group club committee office court museum
library hospital army navy parliament government academy press union""".split())
_LOC_LAST = frozenset("""street road lane square city town village river lake mountain mountains island islands
bay county kingdom sea ocean park bridge hill hills valley avenue country state province desert forest coast
strait""".split())
_LOC_FIRST = frozenset("mount lake fort port cape".split())
_NUMBERS = frozenset("""two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty
hundred thousand million""".split())
_ROMAN = re.compile(r"^[IVXLCDM]+$")
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019\-][^\W\d_]+)*")
_EN_SPLIT = re.compile(r"[.!?]+[\"'\u201d\u2019)\]_]*(?=\s)|\n[ \t]*\n\s*|\n")
_INITIAL_GAP = re.compile(r"[\"\u201c\u2018(\[:;\u2014]|--|(?:^|\s)'")
_POSSESSIVE = re.compile(r"['\u2019]s$", re.IGNORECASE)
_CONTRACTION = re.compile(r"['\u2019](?:ll|m|ve|re|d|t)$", re.IGNORECASE)
_SHORT_LINE = 40  # a line break after a shorter line ends a sentence (headings, lists)


@dataclass
class _Tok:
    word: str  # possessive "'s" removed
    start: int
    end: int
    gap: str  # text between the previous token (or sentence start) and this one
    initial: bool
    possessive: bool


def _en_sentences(text: str) -> list[str]:
    """Split after . ! ? (not after titles, abbreviations or initials, nor before a lower-case
    continuation), at blank lines and after short or tabular lines."""
    out, start = [], 0
    for m in _EN_SPLIT.finditer(text):
        if m.group() == "\n":
            line = text[text.rfind("\n", 0, m.start()) + 1: m.start()].strip()
            if len(line) >= _SHORT_LINE and "   " not in line or text[m.end():].lstrip()[:1].islower():
                continue
        elif not m.group().isspace():
            prev = re.search(r"([^\W\d_]+)\W*$", text[start: m.start() + 1])
            word = prev.group(1) if prev else ""
            if m.group().startswith(".") and (word.lower() in _ABBREVIATIONS or (len(word) == 1 and word.isupper())):
                continue
            nxt = text[m.end(): m.end() + 40].lstrip(" \t\r\n\"'\u201c\u2018_(")
            if nxt[:1].islower():
                continue
        out.append(text[start: m.end()])
        start = m.end()
    out.append(text[start:])
    return [s.strip() for s in out if _ALNUM.search(s)]


def _tokens(sentence: str) -> list[_Tok]:
    toks: list[_Tok] = []
    prev = 0
    for m in _WORD.finditer(sentence):
        start, end = m.span()
        gap, word = sentence[prev:start], m.group()
        stem = _POSSESSIVE.sub("", word) if "'" in word or "\u2019" in word else word
        initial = not toks or (gap != " " and bool(_INITIAL_GAP.search(gap)))
        toks.append(_Tok(stem, start, end, gap, initial, stem != word))
        prev = end
    return toks


def _is_cap(word: str) -> bool:
    """Capitalised (not all-caps) and not a function word or its contraction ("I'll")."""
    return word[0].isupper() and not (len(word) > 1 and word.isupper()) \
        and _CONTRACTION.sub("", word).lower() not in _STOP


def _shouting(word: str) -> bool:
    return len(word) > 1 and word.isupper()


def _joinable(tok: _Tok, after_dot: bool) -> bool:
    """Whether `tok` may continue a name: only spaces (one line break) before it, or the
    dot of a title abbreviation or initial."""
    gap = tok.gap[1:] if after_dot and tok.gap.startswith(".") else tok.gap
    return not gap.strip() and gap.count("\n") <= 1


def _run_end(toks: list[_Tok], i: int) -> int:
    """Index after the capitalised run starting at `i` (inner connectors allowed)."""
    j = i + 1
    while j < len(toks):
        prev = toks[j - 1].word
        dotted = prev.lower() in _TITLES or (len(prev) == 1 and prev.isupper())
        if toks[j - 1].possessive or toks[j].word == prev or not _joinable(toks[j], dotted):
            break
        if _is_cap(toks[j].word):
            j += 1
            continue
        k = j
        while k < len(toks) and toks[k].word in _CONNECTORS and _joinable(toks[k], False):
            k += 1
        if k == j or k >= len(toks) or not _is_cap(toks[k].word) or not _joinable(toks[k], False):
            break
        j = k + 1
    return j


def _name_of(run: list[_Tok]) -> str:
    words, parts = [t.word for t in run], []
    for n, word in enumerate(words):
        if n == 0 and word.lower() in _TITLES:
            parts.append(_TITLES[word.lower()])
        elif len(word) == 1 and word.isupper() and n < len(words) - 1:
            parts.append(word + ".")
        else:
            parts.append(word)
    return " ".join(parts)


def _en_type(run: list[_Tok], toks: list[_Tok], i: int, j: int) -> str:
    first, last = run[0].word.lower(), run[-1].word.lower()
    said_before = i > 0 and toks[i - 1].word.lower() in _REPORTING and not toks[i].gap.strip(" ,\n")
    said_after = j < len(toks) and toks[j].word.lower() in _REPORTING and not toks[j].gap.strip(" ,\n")
    if first in _TITLES and first not in _NOT_PERSON or said_before or said_after:
        return "person"
    of_form = len(run) > 2 and run[1].word == "of"  # "Bank of England", "City of London"
    if last in _ORG_LAST or of_form and first in _ORG_LAST:
        return "organization"
    if last in _LOC_LAST or first in _LOC_FIRST or first == "mt" or of_form and first in _LOC_LAST:
        return "location"
    return "proper_noun"


def _en_names(toks: list[_Tok], lower: set[str], mid_caps: set[str]) -> list[_Mention]:
    out: list[_Mention] = []
    i = 0
    while i < len(toks):
        word = toks[i].word
        titled = word.lower() in _TITLES and word[0].isupper()
        if not (_is_cap(word) or titled):
            if _shouting(word) and 2 <= len(word) <= 6 and word.lower() not in _STOP and not _ROMAN.match(word) \
                    and not any(0 <= n < len(toks) and _shouting(toks[n].word) for n in (i - 1, i + 1)):
                out.append(_Mention(word, "proper_noun", toks[i].start, toks[i].end))
            i += 1
            continue
        j = _run_end(toks, i)
        run = toks[i:j]
        if titled and (len(run) < 2 or run[1].word.lower() in _TITLES):
            run = []  # a bare title is no name
        elif run[0].initial and not titled and (
                run[0].word.lower() in lower or (len(run) == 1 and run[0].word not in mid_caps)):
            run = run[1:]  # a sentence-initial word with no evidence of being a name
        while run and run[0].word in _CONNECTORS:
            run = run[1:]
        while run and len(run[-1].word) == 1:
            run = run[:-1]  # a trailing initial: "J. B. LIPPINCOTT" 
        if run:
            name = _valid(_name_of(run))
            if name:
                out.append(_Mention(name, _en_type(run, toks, i, j), run[0].start, run[-1].end))
        i = j
    return out


def _en_concepts(sent_toks: list[list[_Tok]]) -> dict[tuple[str, str], int]:
    """Repeated two-word lower-case phrases of content words (count >= 2)."""
    def content(word: str) -> bool:
        return word.islower() and word.isalpha() and len(word) >= 3 and word not in _STOP \
            and word not in _NUMBERS

    counts: Counter[tuple[str, str]] = Counter()
    for toks in sent_toks:
        for a, b in zip(toks, toks[1:]):
            if content(a.word) and content(b.word) and not b.gap.strip() and b.gap.count("\n") <= 1 \
                    and not a.word.endswith("ly") and not b.word.endswith(("ly", "ed", "ing")):
                counts[(a.word, b.word)] += 1
    frequent = [(pair, n) for pair, n in counts.items() if n >= 2]
    return dict(sorted(frequent, key=lambda item: -item[1])[:MAX_CONCEPTS])


def _english(text: str) -> list[_Sentence]:
    texts = _en_sentences(text)
    sent_toks = [_tokens(s) for s in texts]
    lower = {t.word for toks in sent_toks for t in toks if t.word.islower()}
    mid_caps = {t.word for toks in sent_toks for t in toks if not t.initial and _is_cap(t.word)}
    concepts = _en_concepts(sent_toks)
    out = []
    for raw, toks in zip(texts, sent_toks):
        sentence = _Sentence(_SPACES.sub(" ", raw))
        mentions = _en_names(toks, lower, mid_caps)
        for a, b in zip(toks, toks[1:]):
            if (a.word, b.word) in concepts and not b.gap.strip():
                mentions.append(_Mention(f"{a.word} {b.word}", "concept", a.start, b.end, named=False))
        taken = [(m.start, m.end) for m in mentions]
        sentence.mentions = sorted(mentions, key=lambda m: m.start)
        sentence.keywords = [(t.start, t.word.lower()) for t in toks
                             if t.word.isalpha() and len(t.word) >= 3 and t.word.lower() not in _STOP
                             and t.word.lower() not in _REPORTING and t.word.islower()
                             and not any(s <= t.start < e for s, e in taken)]
        out.append(sentence)
    return out


# ------------------------------------------------------------------ Chinese


_ZH_SPLIT = re.compile(r"(?<=[。！？；!?;\n])")
_BOOK_TITLE = re.compile(r"《([^《》\n]{1,30})》")
_ZH_PERSON = ("nr", "nrt", "nrfg")
_ZH_TYPES = {"nr": "person", "nrt": "person", "nrfg": "person", "ns": "location", "nt": "organization",
             "nz": "proper_noun"}
_NAME_DOTS = ("·", "•", "・", "‧")
_ZH_LOC_SUFFIX = ("铁路", "公路", "高速公路", "线", "站", "北站", "南站", "东站", "西站", "机场", "港", "大桥",
                  "路", "街", "大街", "广场", "省", "市", "县", "区", "镇", "村", "山", "江", "河", "湖", "岛")
_ZH_ORG_SUFFIX = ("大学", "学院", "中学", "小学", "公司", "集团", "银行", "协会", "委员会", "医院", "研究所",
                  "研究院", "俱乐部", "队", "政府", "部", "局", "党", "军", "报", "电视台")
_ZH_SUFFIX = {**dict.fromkeys(_ZH_LOC_SUFFIX, "location"), **dict.fromkeys(_ZH_ORG_SUFFIX, "organization")}
_ZH_STOP_NOUNS = frozenset("时候 地方 方面 问题 情况 东西 事情 部分 之间 其中 时间 方式 内容 人们 目前 过程 结果 "
                           "作用 原因 工作 关系".split())
_LATIN_WORD = r"[A-Z][A-Za-z'\-]*\.?"
_LATIN_NAME = re.compile(  # "Henry A. Walsh", "Cathedral of the Most Blessed Sacrament"
    rf"(?<![A-Za-z]){_LATIN_WORD}(?:[ \t]+(?:(?:{'|'.join(_CONNECTORS)})[ \t]+)*{_LATIN_WORD})*")


@functools.lru_cache(maxsize=1)
def _posseg() -> Callable[[str], Any]:
    """jieba.posseg.cut, with jieba initialised quietly once per process."""
    import jieba
    import jieba.posseg

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba.posseg.cut


def _zh_tokens(sentence: str) -> list[tuple[str, str, int]]:
    out, pos = [], 0
    for pair in _posseg()(sentence):
        out.append((pair.word, pair.flag, pos))
        pos += len(pair.word)
    return out


def _zh_names(sentence: str, toks: list[tuple[str, str, int]]) -> list[_Mention]:
    """Person/place/organisation/proper-noun mentions, merged across name dots and suffixes."""
    out = [_Mention(m.group(1).strip(), "proper_noun", m.start(), m.end()) for m in _BOOK_TITLE.finditer(sentence)
           if _valid(m.group(1))]
    for m in _LATIN_NAME.finditer(sentence):
        words = m.group().split()
        while words and len(words[-1].rstrip(".")) == 1:
            words.pop()  # trailing initials
        name = " ".join(words).rstrip(".")
        if sum(c.isalpha() for c in name) >= 2 and name.split()[0].lower() not in _STOP:
            out.append(_Mention(name, "proper_noun", m.start(), m.start() + len(name)))
    titled = [(m.start, m.end) for m in out]
    i = 0
    while i < len(toks):
        word, flag, start = toks[i]
        j = i + 1
        if any(s <= start < e for s, e in titled):
            i = j
            continue
        if flag not in _ZH_TYPES:
            i = j
            continue
        etype, name = _ZH_TYPES[flag], word
        while j < len(toks):
            nxt, nflag, _ = toks[j]
            if etype == "person" and nxt in _NAME_DOTS and j + 1 < len(toks) and _CJK.match(toks[j + 1][0]):
                name, j = name + nxt + toks[j + 1][0], j + 2
            elif etype == "person" and nflag in _ZH_PERSON:  # "乔治"+"迪尔", "莱昂"+"德罗"
                name, j = name + nxt, j + 1
            elif flag == "ns" and nflag == "nt":  # "河北"+"中基"
                name, etype, j = name + nxt, "organization", j + 1
                break
            elif nxt in _ZH_SUFFIX and len(name) >= 2 and not name.endswith(nxt):
                name, etype, j = name + nxt, _ZH_SUFFIX[nxt], j + 1
                break
            else:
                break
        if len(name) >= 2 and _valid(name):
            out.append(_Mention(name, etype, start, start + len(name)))
        i = j
    return out


def _zh_aliases(names: list[list[_Mention]]) -> dict[str, str]:
    """Parts of dotted person names ("内托" of "莱昂德罗·内托") -> the full name, when unique."""
    owners: dict[str, set[str]] = {}
    for m in (m for mentions in names for m in mentions if m.etype == "person"):
        for part in re.split("[" + "".join(_NAME_DOTS) + "]", m.name):
            if len(part) >= 2 and part != m.name:
                owners.setdefault(part, set()).add(m.name)
    return {part: next(iter(full)) for part, full in owners.items() if len(full) == 1}


def _chinese(text: str) -> list[_Sentence]:
    texts = [s.strip() for s in _ZH_SPLIT.split(text) if _ALNUM.search(s)]
    tokens = [_zh_tokens(s) for s in texts]
    nouns: Counter[str] = Counter(
        w for toks in tokens for w, f, _ in toks
        if f in ("n", "vn") and len(w) >= 2 and _CJK.match(w) and w not in _ZH_STOP_NOUNS)
    concepts = {w for w, n in sorted(nouns.items(), key=lambda item: -item[1])[:MAX_CONCEPTS] if n >= 2}
    names = [_zh_names(raw, toks) for raw, toks in zip(texts, tokens)]
    aliases = _zh_aliases(names)
    out = []
    for raw, toks, mentions in zip(texts, tokens, names):
        taken = [(m.start, m.end) for m in mentions]
        mentions += [_Mention(aliases[w], "person", s, s + len(w)) for w, f, s in toks
                     if w in aliases and not any(a <= s < b for a, b in taken)]
        taken = [(m.start, m.end) for m in mentions]
        mentions += [_Mention(w, "concept", s, s + len(w), named=False) for w, f, s in toks
                     if w in concepts and f in ("n", "vn") and not any(a <= s < b for a, b in taken)]
        taken = [(m.start, m.end) for m in mentions]
        keywords = [(s, w) for w, f, s in toks if f.startswith("v") and len(w) >= 2
                    and not any(a <= s < b for a, b in taken)]
        out.append(_Sentence(_SPACES.sub(" ", raw), sorted(mentions, key=lambda m: m.start), keywords))
    return out
