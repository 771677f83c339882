"""The shard's knowledge graph: facts read from text (:mod:`.extract`) and the
temporal graph that holds them (:mod:`.temporal`, its records in :mod:`.edges`,
its expansion in :mod:`.walk`)."""

from memorybus.graph.edges import Edge, Reach
from memorybus.graph.extract import (
    Extractor,
    Triple,
    TripleLike,
    canonical_predicate,
    default_extractor,
    display_name,
    entities,
    entity_key,
    extract_triples,
    triples_for,
)
from memorybus.graph.temporal import DEFAULT_FANOUT, DEFAULT_FUNCTIONAL, TemporalGraph

__all__ = [
    "DEFAULT_FANOUT",
    "DEFAULT_FUNCTIONAL",
    "Edge",
    "Extractor",
    "Reach",
    "TemporalGraph",
    "Triple",
    "TripleLike",
    "canonical_predicate",
    "default_extractor",
    "display_name",
    "entities",
    "entity_key",
    "extract_triples",
    "triples_for",
]
