"""Facts read from text: entities, relation triples, and the default extractor.

Pure Python (no I/O). :func:`triples_for` turns a memory into the :class:`Triple`
objects the temporal graph (:mod:`memorybus.graph.temporal`) holds, with a pluggable
extractor (an LLM call, for instance); :func:`default_extractor` is the
deterministic one. Entities are keyed by :func:`entity_key` (NFKC, case-folded,
whitespace collapsed, possessive and leading article dropped); predicates are
canonicalised by :func:`canonical_predicate`.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, replace
from typing import Any, TypeAlias

from memorybus.errors import InvalidRequest
from memorybus.memory.model import MemoryNode
from memorybus.words import STOP_WORDS

# ----------------------------------------------------------------- normalising
_WS = re.compile(r"\s+")
_EDGE_PUNCT = "\"'`\u201c\u201d\u2018\u2019.,;:!?()[]{}<>"
_ARTICLES = ("the ", "a ", "an ")
_PREDICATE_ALIASES = {
    "works_for": "works_at",
    "work_at": "works_at",
    "work_for": "works_at",
    "employed_at": "works_at",
    "employed_by": "works_at",
    "employer": "works_at",
    "joined": "works_at",
    "live_in": "lives_in",
    "lives_at": "lives_in",
    "resides_in": "lives_in",
    "moved_to": "lives_in",
    "relocated_to": "lives_in",
    "based_in": "headquartered_in",
    "headquarters": "headquartered_in",
    "hq_in": "headquartered_in",
    "has_headquarters_in": "headquartered_in",
    "located_at": "located_in",
    "is_a": "is",
    "is_an": "is",
    "ceo": "ceo_of",
    "is_ceo_of": "ceo_of",
}


def display_name(name: str) -> str:
    """``name`` trimmed for display: whitespace collapsed, edge punctuation and a possessive dropped."""
    s = _WS.sub(" ", unicodedata.normalize("NFKC", name)).strip().strip(_EDGE_PUNCT).strip()
    if s.endswith(("'s", "\u2019s")):
        s = s[:-2].rstrip()
    return s


def entity_key(name: str) -> str:
    """The stable node key of an entity name ("" when nothing is left)."""
    s = display_name(name).casefold()
    for article in _ARTICLES:
        if s.startswith(article):
            return s[len(article) :]
    return s


def canonical_predicate(predicate: str) -> str:
    """``"Works For"`` -> ``"works_at"``, ``"is the CEO of"`` -> ``"ceo_of"``: snake case, a leading
    copula and article dropped, then the alias table."""
    p = re.sub(r"\W+", "_", unicodedata.normalize("NFKC", predicate).casefold()).strip("_")
    if p in _PREDICATE_ALIASES:
        return _PREDICATE_ALIASES[p]
    p = re.sub(r"^(?:(?:is|are|am)_)?(?:(?:the|a|an)_)?(?=.)", "", p)
    return _PREDICATE_ALIASES.get(p, p)



# ------------------------------------------------------------------ data types
@dataclass(frozen=True, slots=True)
class Triple:
    """One asserted relation, from one memory (``source_id``) in one scope.

    ``subject``/``object`` keep their display form; ``predicate`` is canonical.
    Raises :class:`InvalidRequest` for an empty entity or predicate, an empty
    ``source_id``, ``valid_to < valid_from`` or a confidence outside 0..1.
    """

    subject: str
    predicate: str
    object: str
    valid_from: float
    valid_to: float | None = None
    _: KW_ONLY
    source_id: str
    scope_key: str
    confidence: float = 1.0

    def __post_init__(self) -> None:
        for name in ("subject", "object"):
            value = getattr(self, name)
            if not isinstance(value, str) or not entity_key(value):
                raise InvalidRequest(name, f"must name an entity, got {value!r}")
            object.__setattr__(self, name, display_name(value))
        if not isinstance(self.predicate, str) or not canonical_predicate(self.predicate):
            raise InvalidRequest("predicate", f"must be a non-empty string, got {self.predicate!r}")
        object.__setattr__(self, "predicate", canonical_predicate(self.predicate))
        if not isinstance(self.source_id, str) or not self.source_id:
            raise InvalidRequest("source_id", "must be a non-empty string")
        if not isinstance(self.scope_key, str):
            raise InvalidRequest("scope_key", "must be a string")
        if not finite(self.valid_from):
            raise InvalidRequest("valid_from", f"must be a finite number, got {self.valid_from!r}")
        if self.valid_to is not None and (not finite(self.valid_to) or self.valid_to < self.valid_from):
            raise InvalidRequest("valid_to", f"must be None or a number >= valid_from, got {self.valid_to!r}")
        if not finite(self.confidence) or not 0.0 <= self.confidence <= 1.0:
            raise InvalidRequest("confidence", f"must be within 0..1, got {self.confidence!r}")

    @property
    def subject_key(self) -> str:
        return entity_key(self.subject)

    @property
    def object_key(self) -> str:
        return entity_key(self.object)


def finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)



TripleLike: TypeAlias = Triple | Sequence[str] | Mapping[str, Any]
#: A fact extractor: the triples a memory asserts (Triple objects, ``(s, p, o)`` or mappings).
Extractor: TypeAlias = Callable[[MemoryNode], Iterable[TripleLike]]

# ------------------------------------------------------------------ extraction
_UP = "A-Z\u00c0-\u00d6\u00d8-\u00de"
_ABBREVIATIONS = ("Inc", "Corp", "Ltd", "Co", "Dr", "Mr", "Mrs", "Ms", "St", "Jr", "Sr", "Prof")
_CAP = rf"(?<![\w'\u2019])(?:(?:{'|'.join(_ABBREVIATIONS)})\.|[{_UP}][\w&'\u2019-]*)"
_CONNECTOR = r"(?:of|de|da|du|del|van|von|der|den|&)"
_NAME = rf"{_CAP}(?:[ \t]+(?:{_CONNECTOR}[ \t]+)?{_CAP})*"
_NAME_RE = re.compile(_NAME)
_CONNECTOR_RE = re.compile(rf"[ \t]+{_CONNECTOR}[ \t]+")
# the punctuation lookbehind first: most positions fail it before the abbreviation checks
_SENTENCE = re.compile(r"(?<=[.!?;])" + "".join(rf"(?<!\b{a}\.)" for a in _ABBREVIATIONS) + r"\s+|\n+")
_ADV = r"(?:(?:now|currently|also|recently|just|still|officially|finally|has|have)\s+)*"
_ADV_AFTER = r"(?:(?:now|currently|also|still|officially)\s+)?"
_FUNCTION_WORDS = (
    "in|at|on|for|with|and|or|but|who|whom|whose|that|which|from|to|of|by|as|since|because|when|while|"
    "so|than|then|now|there|here|too|very|not|no|if"
)
_LOWER = rf"(?!(?:{_FUNCTION_WORDS})\b)[a-z][\w-]*"
_RELATIONS: tuple[tuple[str, str], ...] = (
    (
        "ceo_of",
        rf"(?:is|am|became|was\s+(?:named|appointed)(?:\s+as)?)\s+{_ADV_AFTER}(?:the\s+)?(?:new\s+)?"
        r"(?:CEO|chief\s+executive(?:\s+officer)?)\s+(?:of|at)",
    ),
    (
        "works_at",
        rf"(?:(?:works?|working|started\s+working|began\s+working)\s+(?:at|for)"
        rf"|(?:is|am)\s+{_ADV_AFTER}(?:employed|working)\s+(?:at|by|for)|joined"
        rf"|(?:is|am)\s+{_ADV_AFTER}an?\s+(?:[a-z][\w-]*\s+){{0,3}}?at)",
    ),
    (
        "lives_in",
        r"(?:(?:lives?|living|resides?|(?:is|am)\s+(?:living|residing))\s+in|(?:moved|relocated)\s+(?:back\s+)?to)",
    ),
    (
        "headquartered_in",
        rf"(?:(?:is|are)\s+{_ADV_AFTER}(?:headquartered|based)\s+in|has\s+(?:its\s+)?headquarters\s+in)",
    ),
    ("located_in", rf"(?:is|are)\s+{_ADV_AFTER}located\s+in"),
)
_RELATION_RES = tuple(
    (predicate, re.compile(rf"(?P<s>{_NAME})\.?\s+{_ADV}(?:{verb})\s+(?:the\s+)?(?P<o>{_NAME})"))
    for predicate, verb in _RELATIONS
)
# words every match of a relation contains: a sentence without them skips that relation's
# pattern, which would otherwise try to start a name at every position of the sentence
_RELATION_GUARDS = {
    "ceo_of": re.compile(r"CEO|chief"),
    "works_at": re.compile(r"work|joined|employed|\sat\s"),
    "lives_in": re.compile(r"liv|resid|moved|relocated"),
    "headquartered_in": re.compile(r"headquarter|based"),
    "located_in": re.compile(r"located"),
}
_IS_GUARD = re.compile(r"\s(?:is|am)\s")
_IS_RE = re.compile(
    rf"(?P<s>{_NAME})\.?\s+(?:is|am)\s+{_ADV_AFTER}"
    rf"(?:(?:a|an|the)\s+(?P<l>{_LOWER}(?:\s+{_LOWER}){{0,3}})\b|(?:(?:a|an|the)\s+)?(?P<o>{_NAME}))"
)
# capitalised function words start sentences rather than name things
_STOP = STOP_WORDS
_CALENDAR_WORDS = """
    january february march april june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday
"""
_CALENDAR = frozenset(_CALENDAR_WORDS.split())


def _strip_stop(phrase: str) -> str:
    words = phrase.split()
    while words and words[0].casefold() in _STOP:
        words.pop(0)
    return " ".join(words)


def entities(text: str) -> list[str]:
    """Capitalised names and noun phrases in ``text``, in order, one per entity key.

    Sentence-start words ("What", "Yesterday"), pronouns and lone month or day
    names are not entities; a phrase joined by a connector ("University of
    Oslo") is returned whole and also in its parts.
    """
    out: list[str] = []
    seen: set[str] = set()
    for m in _NAME_RE.finditer(text):
        phrase = _strip_stop(m.group(0))
        if not phrase:
            continue
        parts = [phrase]
        pieces = _CONNECTOR_RE.split(phrase)
        if len(pieces) > 1:
            parts.extend(_strip_stop(p) for p in pieces)
        for part in parts:
            key = entity_key(part)
            if not key or key in seen or key in _STOP or key in _CALENDAR:
                continue
            seen.add(key)
            out.append(display_name(part))
    return out


def _subject(raw: str, self_name: str | None) -> str:
    if raw == "I":
        return self_name or ""
    return _strip_stop(raw)


def extract_triples(text: str, *, self_name: str | None = None) -> list[tuple[str, str, str]]:
    """Deterministic ``(subject, predicate, object)`` triples from simple patterns.

    Recognised: "X works at/for Y", "X joined Y", "X is a <role> at Y"
    (``works_at``); "X lives in Y", "X moved to Y" (``lives_in``); "X is
    headquartered/based in Y" (``headquartered_in``); "X is located in Y"
    (``located_in``); "X is the CEO of Y" (``ceo_of``); otherwise "X is Y" /
    "X is a <noun phrase>" (``is``). X and Y are capitalised names; adverbs
    such as "now" are allowed before the verb; negations and possessive
    objects ("Bob's sister") yield nothing. "I" is a subject only when
    ``self_name`` is given. Ordered by position, one triple per key triple.
    """
    found: list[tuple[int, str, str, str]] = []
    for sentence in _SENTENCE.split(text):
        spans: list[tuple[int, int]] = []
        for predicate, regex in _RELATION_RES:
            if _RELATION_GUARDS[predicate].search(sentence) is None:
                continue
            for m in regex.finditer(sentence):
                spans.append(m.span())
                found.append((m.start(), _subject(m["s"], self_name), predicate, m["o"]))
        for m in _IS_RE.finditer(sentence) if _IS_GUARD.search(sentence) else ():
            if any(a < m.end() and m.start() < b for a, b in spans):
                continue
            found.append((m.start(), _subject(m["s"], self_name), "is", m["l"] or m["o"]))
    out: list[tuple[str, str, str]] = []
    seen: set[tuple[str, str, str]] = set()
    for _, subject, predicate, obj in sorted(found, key=lambda f: f[0]):
        if obj.endswith(("'s", "\u2019s")):
            continue
        key = (entity_key(subject), predicate, entity_key(obj))
        if not key[0] or not key[2] or key[0] == key[2] or key in seen:
            continue
        seen.add(key)
        out.append((display_name(subject), predicate, display_name(obj)))
    return out


def default_extractor(node: MemoryNode) -> list[TripleLike]:
    """Explicit triples first, then :func:`extract_triples` over the content.

    Explicit triples: ``structured["triples"]`` (a list of ``[s, p, o]`` or of
    mappings with ``subject``/``predicate``/``object`` and optional
    ``valid_from``/``valid_to``/``confidence``) and a top-level
    ``structured`` ``subject``/``predicate``/``object``. The declared
    ``speaker`` of the memory is who "I" is in the content.
    """
    st = node.structured
    out: list[TripleLike] = []
    raw = st.get("triples")
    if isinstance(raw, list | tuple):
        out.extend(item for item in raw if isinstance(item, Mapping | list | tuple))
    if all(isinstance(st.get(k), str) for k in ("subject", "predicate", "object")):
        out.append({k: st[k] for k in ("subject", "predicate", "object")})
    out.extend(extract_triples(node.content, self_name=node.speaker or None))
    return out


def triples_for(node: MemoryNode, extractor: Extractor = default_extractor) -> list[Triple]:
    """The valid triples ``extractor`` finds in ``node``, bound to the node.

    Every triple gets the node's id as ``source_id`` and its scope key (an
    extractor cannot move a fact to another scope); time and confidence
    default to the node's. Malformed items are skipped. One triple per
    ``(subject, predicate, object)`` key.
    """
    out: list[Triple] = []
    seen: set[tuple[str, str, str]] = set()
    for item in extractor(node):
        triple = _coerce(item, node)
        if triple is None:
            continue
        key = (triple.subject_key, triple.predicate, triple.object_key)
        if key not in seen:
            seen.add(key)
            out.append(triple)
    return out


def _coerce(item: TripleLike, node: MemoryNode) -> Triple | None:
    try:
        if isinstance(item, Triple):
            return replace(item, source_id=node.id, scope_key=node.scope.key)
        if isinstance(item, Mapping):
            s, p, o = item.get("subject"), item.get("predicate"), item.get("object")
            vf, vt = item.get("valid_from", node.valid_from), item.get("valid_to", node.valid_to)
            conf = item.get("confidence", node.confidence)
        elif isinstance(item, Sequence) and not isinstance(item, str) and len(item) >= 3:
            s, p, o = item[0], item[1], item[2]
            vf, vt, conf = node.valid_from, node.valid_to, node.confidence
        else:
            return None
        if not (isinstance(s, str) and isinstance(p, str) and isinstance(o, str)):
            return None
        until = None if vt is None else float(vt)
        return Triple(s, p, o, float(vf), until, source_id=node.id, scope_key=node.scope.key, confidence=float(conf))
    except (TypeError, ValueError):  # InvalidRequest is a ValueError
        return None


