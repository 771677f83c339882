"""The temporal knowledge graph of a shard: entities, typed relations valid in time, provenance.

One :class:`TemporalGraph` per shard holds the relations of every scope the
shard owns. It is derived data: the shard feeds it from committed memories
(:meth:`TemporalGraph.add_memory` / :meth:`TemporalGraph.remove_source`) and
rebuilds it from the store on start (:meth:`TemporalGraph.rebuild_from`).
Pure Python over networkx: no Ray, no I/O, not thread-safe (the shard actor
serialises calls).

Guarantees:

- Entities are keyed by :func:`entity_key` (NFKC, case-folded, whitespace
  collapsed, possessive and leading article dropped); each keeps the display
  name it was first seen with.
- Every edge carries ``predicate``, ``scope_key``, ``valid_from``, ``valid_to``
  (``None``: still valid) and its provenance ``source_ids`` (memory ids). An
  edge is valid at ``t`` when ``valid_from <= t < valid_to``.
- Functional predicates (a subject has one current object per predicate and
  scope): a later object closes the earlier edge's ``valid_to`` at its own
  ``valid_from``; nothing is deleted. Closure depends only on the set of
  edges, not on the order they were added, and is undone when the closing
  memory is removed. Edges starting at the same instant coexist.
- Expansion is a breadth-first walk that checks validity and scope edge by
  edge while it walks (no filtered view of the graph is built), and keeps at
  most ``fanout`` new neighbours per expanded node, so it visits at most
  ``seeds * (1 + f + ... + f**hops)`` entities however large a hub is.
"""

from __future__ import annotations

import heapq
import math
import re
import unicodedata
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any, NamedTuple, TypeAlias

import networkx as nx

from memorybus.errors import InvalidRequest
from memorybus.model import MemoryNode

DEFAULT_FUNCTIONAL = frozenset(
    {"is", "works_at", "lives_in", "headquartered_in", "located_in", "ceo_of", "reports_to", "married_to"}
)
DEFAULT_FANOUT = 16

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
        if not _finite(self.valid_from):
            raise InvalidRequest("valid_from", f"must be a finite number, got {self.valid_from!r}")
        if self.valid_to is not None and (not _finite(self.valid_to) or self.valid_to < self.valid_from):
            raise InvalidRequest("valid_to", f"must be None or a number >= valid_from, got {self.valid_to!r}")
        if not _finite(self.confidence) or not 0.0 <= self.confidence <= 1.0:
            raise InvalidRequest("confidence", f"must be within 0..1, got {self.confidence!r}")

    @property
    def subject_key(self) -> str:
        return entity_key(self.subject)

    @property
    def object_key(self) -> str:
        return entity_key(self.object)


def _finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(slots=True, eq=False)
class Edge:
    """One relation in the graph; ``subject``/``object`` are entity keys.

    ``valid_to`` is effective validity: the earlier of ``until`` (what the
    sources asserted) and the start of a later object of a functional
    predicate. ``sources`` maps each supporting memory id to its confidence.
    """

    id: int
    subject: str
    predicate: str
    object: str
    scope_key: str
    valid_from: float
    valid_to: float | None
    until: float | None
    sources: dict[str, float] = field(default_factory=dict)

    @property
    def source_ids(self) -> tuple[str, ...]:
        return tuple(sorted(self.sources))

    @property
    def confidence(self) -> float:
        return max(self.sources.values(), default=0.0)

    def valid_at(self, t: float) -> bool:
        return self.valid_from <= t and (self.valid_to is None or t < self.valid_to)


class Reach(NamedTuple):
    """How an expansion reached an entity: hop distance and the memory ids along its path."""

    hops: int
    sources: tuple[str, ...]


class _Mention(NamedTuple):
    scope_key: str
    valid_from: float
    valid_to: float | None


@dataclass(slots=True)
class _Group:
    """The edges of one (subject, functional predicate, scope): one object at a time."""

    ids: set[int] = field(default_factory=set)
    max_start: float = -math.inf
    at_max: set[int] = field(default_factory=set)  # edges starting at max_start
    live: set[int] = field(default_factory=set)  # earlier edges still valid after max_start


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
# capitalised words that start sentences rather than name things
_STOP_WORDS = """
    the a an this that these those it he she they we you i me my our your his her their its there here
    i'm i've i'd i'll it's that's what's here's there's let's
    yesterday today tonight tomorrow now then also however meanwhile recently last next after before since
    when while if so and but or what where who whom whose which why how does do did is are was were am be
    can could would should will shall may might must please hi hello hey dear thanks thank yes no not ok
    okay in on at for from to of by with as every each some any all both never always still just soon once
    later earlier first finally anyway well oh wow sure maybe perhaps also because although though
"""
_STOP = frozenset(_STOP_WORDS.split())
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


# ----------------------------------------------------------------------- graph
class TemporalGraph:
    """Entities and relations valid in time, for every scope of one shard.

    ``functional`` names the predicates for which a subject has one current
    object (per scope); they are canonicalised with :func:`canonical_predicate`.
    """

    def __init__(self, functional: Iterable[str] = DEFAULT_FUNCTIONAL) -> None:
        self.functional = frozenset(canonical_predicate(p) for p in functional)
        self._clear()

    def _clear(self) -> None:
        self._g = nx.MultiDiGraph()
        self._edges: dict[int, Edge] = {}
        self._next_id = 0
        self._by_triple: dict[tuple[str, str, str, str], list[int]] = {}
        self._by_source: dict[str, set[int]] = {}
        self._groups: dict[tuple[str, str, str], _Group] = {}
        self._display: dict[str, str] = {}
        self._mentions: dict[str, dict[str, _Mention]] = {}
        self._mentioned_by: dict[str, set[str]] = {}

    # ------------------------------------------------------------- inspection
    @property
    def graph(self) -> nx.MultiDiGraph:
        """The underlying networkx graph (edge keys are edge ids, data ``{"edge": Edge}``); read only."""
        return self._g

    def __len__(self) -> int:
        return len(self._display)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and entity_key(name) in self._display

    @property
    def edge_count(self) -> int:
        return len(self._edges)

    def name(self, entity: str) -> str:
        """The display name of an entity (given by name or key)."""
        return self._display[entity_key(entity)]

    def edges(self, entity: str | None = None) -> list[Edge]:
        """Every edge (of ``entity``, either direction), valid or closed, ordered by id."""
        if entity is None:
            return list(self._edges.values())
        key = entity_key(entity)
        if key not in self._g:
            return []
        ids = {k for _, _, k in self._g.out_edges(key, keys=True)} | {k for _, _, k in self._g.in_edges(key, keys=True)}
        return [self._edges[i] for i in sorted(ids)]

    def edges_at(self, entity: str, t: float, scope_keys: Collection[str] | None = None) -> list[Edge]:
        """The edges of ``entity`` (either direction) valid at ``t`` and in ``scope_keys`` (None: all)."""
        scopes = None if scope_keys is None else frozenset(scope_keys)
        return [e for e in self.edges(entity) if e.valid_at(t) and (scopes is None or e.scope_key in scopes)]

    def match_entities(self, text: str, *, max_words: int = 6) -> list[str]:
        """Keys of known entities named in ``text`` (any case), longest match first, in order."""
        words = [w[:-2] if w.endswith(("'s", "\u2019s")) else w for w in re.findall(r"[\w&'\u2019-]+", text.casefold())]
        out: list[str] = []
        i = 0
        while i < len(words):
            for n in range(min(max_words, len(words) - i), 0, -1):
                phrase = " ".join(words[i : i + n])
                if phrase in self._display:
                    if phrase not in out:
                        out.append(phrase)
                    i += n
                    break
            else:
                i += 1
        return out

    # ---------------------------------------------------------------- writing
    def add(self, triple: Triple) -> Edge:
        """Add one triple; returns the edge that now carries it.

        The same relation in the same scope, valid at the triple's
        ``valid_from`` with the same asserted end, gains the triple's source
        (idempotent); otherwise a new edge. For a functional predicate, edges
        of the subject with another object are closed at the new edge's start
        and the new edge is closed at the start of any later one.
        """
        s, o, p, scope = triple.subject_key, triple.object_key, triple.predicate, triple.scope_key
        ident = (s, p, o, scope)
        for eid in self._by_triple.get(ident, ()):
            edge = self._edges[eid]
            if edge.until == triple.valid_to and edge.valid_at(triple.valid_from):
                self._support(edge, triple)
                return edge
        for key, name in ((s, triple.subject), (o, triple.object)):
            if key not in self._g:
                self._g.add_node(key, name=self._display.setdefault(key, name))
        edge = Edge(self._next_id, s, p, o, scope, triple.valid_from, triple.valid_to, triple.valid_to)
        self._next_id += 1
        self._edges[edge.id] = edge
        self._g.add_edge(s, o, key=edge.id, edge=edge)
        self._by_triple.setdefault(ident, []).append(edge.id)
        self._support(edge, triple)
        if p in self.functional:
            self._place(self._groups.setdefault((s, p, scope), _Group()), edge)
        return edge

    def _support(self, edge: Edge, triple: Triple) -> None:
        edge.sources[triple.source_id] = max(edge.sources.get(triple.source_id, 0.0), triple.confidence)
        self._by_source.setdefault(triple.source_id, set()).add(edge.id)

    def _place(self, group: _Group, edge: Edge) -> None:
        group.ids.add(edge.id)
        t = edge.valid_from
        if t < group.max_start:  # out of order: recompute the group
            self._sweep(group)
            return
        affected = group.live if t == group.max_start else group.live | group.at_max
        for eid in affected:
            other = self._edges[eid]
            if other.object != edge.object and other.valid_from < t and (other.valid_to is None or other.valid_to > t):
                other.valid_to = t
        if t > group.max_start:
            group.max_start, group.at_max = t, set()
        group.live = {i for i in affected if (v := self._edges[i].valid_to) is None or v > t}
        group.at_max.add(edge.id)

    def _sweep(self, group: _Group) -> None:
        """Recompute every edge's valid_to in the group: the next start of another object, or until."""
        edges = sorted((self._edges[i] for i in group.ids), key=lambda e: e.valid_from, reverse=True)
        best: list[tuple[float, str]] = []  # the two earliest later starts with distinct objects
        i = 0
        while i < len(edges):
            j, start = i, edges[i].valid_from
            while j < len(edges) and edges[j].valid_from == start:
                j += 1
            for e in edges[i:j]:
                nxt = next((st for st, ob in best if ob != e.object), None)
                e.valid_to = nxt if e.until is None else e.until if nxt is None else min(nxt, e.until)
            for e in edges[i:j]:
                best = [(start, e.object), *((st, ob) for st, ob in best if ob != e.object)][:2]
            i = j
        group.max_start = edges[0].valid_from if edges else -math.inf
        group.at_max = {e.id for e in edges if e.valid_from == group.max_start}
        group.live = {
            e.id
            for e in edges
            if e.valid_from < group.max_start and (e.valid_to is None or e.valid_to > group.max_start)
        }

    def add_mentions(
        self, memory_id: str, names: Iterable[str], *, scope_key: str, valid_from: float, valid_to: float | None = None
    ) -> None:
        """Record that memory ``memory_id`` names these entities (recall boosts it for them)."""
        mention = _Mention(scope_key, valid_from, valid_to)
        for name in names:
            key = entity_key(name)
            if not key:
                continue
            self._display.setdefault(key, display_name(name))
            self._mentions.setdefault(key, {})[memory_id] = mention
            self._mentioned_by.setdefault(memory_id, set()).add(key)

    def add_memory(
        self, node: MemoryNode, extractor: Extractor = default_extractor, *, mentions: bool = True
    ) -> list[Edge]:
        """Mirror one memory: replace whatever ``node.id`` contributed before with its triples and mentions."""
        self.remove_source(node.id)
        edges = [self.add(t) for t in triples_for(node, extractor)]
        if mentions:
            self.add_mentions(
                node.id,
                entities(node.content),
                scope_key=node.scope.key,
                valid_from=node.valid_from,
                valid_to=node.valid_to,
            )
        return edges

    def remove_source(self, memory_id: str) -> int:
        """Forget a memory: drop it from every edge's provenance and its mentions.

        Edges left without a source are deleted, entities left without edges
        or mentions disappear, and closures those edges caused are undone.
        Returns the number of edges deleted.
        """
        touched: set[str] = set()
        dirty: set[tuple[str, str, str]] = set()
        removed = 0
        for eid in self._by_source.pop(memory_id, ()):
            edge = self._edges[eid]
            del edge.sources[memory_id]
            if edge.sources:
                continue
            removed += 1
            del self._edges[eid]
            self._g.remove_edge(edge.subject, edge.object, key=eid)
            ident = (edge.subject, edge.predicate, edge.object, edge.scope_key)
            self._by_triple[ident].remove(eid)
            if not self._by_triple[ident]:
                del self._by_triple[ident]
            gkey = (edge.subject, edge.predicate, edge.scope_key)
            if gkey in self._groups:
                self._groups[gkey].ids.discard(eid)
                dirty.add(gkey)
            touched.update((edge.subject, edge.object))
        for gkey in dirty:
            if self._groups[gkey].ids:
                self._sweep(self._groups[gkey])
            else:
                del self._groups[gkey]
        for key in self._mentioned_by.pop(memory_id, ()):
            named = self._mentions[key]
            del named[memory_id]
            if not named:
                del self._mentions[key]
            touched.add(key)
        for key in touched:
            if (key not in self._g or self._g.degree(key) == 0) and key not in self._mentions:
                if key in self._g:
                    self._g.remove_node(key)
                self._display.pop(key, None)
        return removed

    def rebuild(self, triples: Iterable[Triple]) -> None:
        """Replace the whole graph with these triples (added in valid_from order)."""
        self._clear()
        for t in sorted(triples, key=lambda t: (t.valid_from, t.source_id)):
            self.add(t)

    def rebuild_from(self, nodes: Iterable[MemoryNode], extractor: Extractor = default_extractor) -> None:
        """Replace the whole graph with what these memories contribute (:meth:`add_memory` each)."""
        self._clear()
        for node in sorted(nodes, key=lambda n: (n.valid_from, n.id)):
            self.add_memory(node, extractor)

    # ---------------------------------------------------------------- reading
    def expand(
        self,
        entities: Iterable[str],
        *,
        at: float,
        hops: int = 2,
        fanout: int = DEFAULT_FANOUT,
        scope_keys: Collection[str] | None = None,
        max_nodes: int | None = None,
    ) -> dict[str, Reach]:
        """Entities within ``hops`` of the known ``entities`` over edges valid at ``at``.

        Edges are followed in either direction; only edges valid at ``at`` and
        in ``scope_keys`` (None: every scope) are traversed, checked edge by
        edge during the walk. From each expanded entity at most ``fanout`` new
        neighbours are taken (the most confident, then most recent edges);
        ``max_nodes`` caps the result. Returns ``{entity key: Reach}``, seeds
        at hop 0 with no sources; unknown seeds are left out.
        """
        return self._walk(entities, at, hops, fanout, scope_keys, max_nodes)[0]

    def memories_for(
        self,
        entities: Iterable[str],
        at: float,
        scope_keys: Collection[str] | None = None,
        *,
        hops: int = 2,
        fanout: int = DEFAULT_FANOUT,
        decay: float = 0.5,
        mention_weight: float = 0.5,
    ) -> dict[str, float]:
        """Memory ids linked to ``entities`` at ``at``, scored ``decay ** hop``, best first.

        A memory supporting an edge walked from an entity at hop ``h`` scores
        ``decay ** h`` (an edge of a seed: 1.0); a memory naming a reached
        entity (at most ``fanout`` most recent per entity, valid at ``at`` and
        visible) scores ``mention_weight * decay ** h``. Each memory keeps its
        best score.
        """
        reach, credited = self._walk(entities, at, hops, fanout, scope_keys, None)
        scores = {mid: decay**h for mid, h in credited.items()}
        if mention_weight > 0:
            scopes = None if scope_keys is None else frozenset(scope_keys)
            for key, r in reach.items():
                named = self._mentions.get(key)
                if not named:
                    continue
                visible = [
                    mid
                    for mid, m in named.items()
                    if m.valid_from <= at
                    and (m.valid_to is None or at < m.valid_to)
                    and (scopes is None or m.scope_key in scopes)
                ]
                score = mention_weight * decay**r.hops
                for mid in heapq.nlargest(fanout, visible, key=lambda mid: (named[mid].valid_from, mid)):
                    if score > scores.get(mid, 0.0):
                        scores[mid] = score
        return dict(sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])))

    def _walk(
        self,
        seeds: Iterable[str],
        at: float,
        hops: int,
        fanout: int,
        scope_keys: Collection[str] | None,
        max_nodes: int | None,
    ) -> tuple[dict[str, Reach], dict[str, int]]:
        if isinstance(seeds, str):
            raise InvalidRequest("entities", "must be an iterable of names, not a string")
        if not _finite(at):
            raise InvalidRequest("at", f"must be a finite number, got {at!r}")
        if isinstance(hops, bool) or not isinstance(hops, int) or hops < 0:
            raise InvalidRequest("hops", f"must be an int >= 0, got {hops!r}")
        if isinstance(fanout, bool) or not isinstance(fanout, int) or fanout < 1:
            raise InvalidRequest("fanout", f"must be an int >= 1, got {fanout!r}")
        scopes = None if scope_keys is None else frozenset(scope_keys)
        reach: dict[str, Reach] = {}
        for name in seeds:
            key = entity_key(name)
            if key in self._display and key not in reach:
                reach[key] = Reach(0, ())
        credited: dict[str, int] = {}

        def credit(edge: Edge, hop: int) -> None:
            for mid in edge.sources:
                if hop < credited.get(mid, hop + 1):
                    credited[mid] = hop

        frontier = list(reach)
        for depth in range(hops):
            nxt: list[str] = []
            for u in frontier:
                if u not in self._g:
                    continue
                fresh: dict[str, list[Edge]] = {}
                for adjacency in (self._g.succ[u], self._g.pred[u]):
                    for v, keyed in adjacency.items():
                        for eid in keyed:
                            e = self._edges[eid]
                            if e.valid_from > at or (e.valid_to is not None and at >= e.valid_to):
                                continue
                            if scopes is not None and e.scope_key not in scopes:
                                continue
                            if v in reach:
                                credit(e, min(reach[e.subject].hops, reach[e.object].hops))
                            else:
                                fresh.setdefault(v, []).append(e)
                ranked = heapq.nlargest(
                    fanout,
                    fresh.items(),
                    key=lambda kv: (max(e.confidence for e in kv[1]), max(e.valid_from for e in kv[1]), kv[0]),
                )
                parent = reach[u].sources
                for v, es in ranked:
                    provenance = set(parent)
                    for e in es:
                        provenance.update(e.sources)
                        credit(e, depth)
                    reach[v] = Reach(depth + 1, tuple(sorted(provenance)))
                    nxt.append(v)
                    if max_nodes is not None and len(reach) >= max_nodes:
                        return reach, credited
            frontier = nxt
            if not frontier:
                break
        return reach, credited
