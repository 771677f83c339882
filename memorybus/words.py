"""English function words: the one stop-word list of the package.

Consolidation leaves them out of a cluster's key phrases; the triple extractor does
not take a capitalised one at the start of a sentence for a name. (Keyword recall
uses its analyzer's own list: see :func:`memorybus.retrieval.text.tokens`.) Recall reads a
query whose other words are all :data:`ASKING_WORDS` as asking about the names it names.
"""

from __future__ import annotations

_WORDS = """
    a about after all also although always am an and any anyway are as at be because been before
    being both but by can could dear did do does each earlier every finally first for from had
    has have he hello her here here's hey hi him his how however i i'd i'll i'm i've if in into
    is it it's its just last later let's may maybe me meanwhile might more most must my never
    next no not now of oh ok okay on once or our over perhaps please really recently said say
    says shall she should since so some soon still sure than thank thanks that that's the their
    them then there there's these they this those though to today tomorrow tonight too us very
    was we well were what what's when where which while who whom whose why will with would wow
    yes yesterday you your
"""
STOP_WORDS = frozenset(_WORDS.split())

# words a request uses to ask about something without saying what about it ("tell me about
# Alice", "what do you know about Acme?"): such a request asks about the names it names
_ASKING = """
    about anything everything something info information detail details describe description
    summary summarize summarise overview tell know knew remember recall mention mentioned
    talk talked note notes said say update updates news
"""
ASKING_WORDS = frozenset(_ASKING.split())
