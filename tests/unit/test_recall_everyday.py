"""Everyday agent memory, recalled with the real model (shard level: real SQLite, Qdrant
Edge and MiniLM; no Ray): preferences, decisions, tool results, facts about people,
each among distractors of the same session. The relevant memory ranks first; a
question none of the memories answers returns nothing above the relevance floor."""

from __future__ import annotations

import pytest

from memorybus import Context, ManualClock, MemoryNode
from memorybus.retrieval import RecallOptions
from memorybus.retrieval.query import query_texts
from memorybus.shard import Shard
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex

pytestmark = pytest.mark.model

# (memories of one agent session: the answer first, then its distractors; question)
CASES = [
    # preferences
    (["The user prefers dark mode in every editor", "The user asked for a summary of the Q3 report",
      "We went through the onboarding checklist together"], "Which colour theme does the user like?"),
    (["Priya is vegetarian and does not eat eggs", "Priya booked a flight to Berlin for the conference",
      "Priya's laptop battery died during the demo"], "What food should I order for Priya?"),
    (["The user wants every reply in Spanish", "The user is based in Toronto",
      "The user shared a spreadsheet of vendor prices"], "Which language should I answer in?"),
    (["The user runs 5 km every morning before work", "The user's manager is called Tom",
      "The user's flight lands at 6pm"], "How does the user exercise?"),
    # decisions
    (["We decided to use PostgreSQL instead of MongoDB for the orders service",
      "The standup moved to 9:30", "Lunch was a burrito"], "Which database did we pick for orders?"),
    (["The team agreed to freeze deploys during the holiday week", "The design review is on Thursday",
      "Marco ordered new monitors for the office"], "Are we allowed to deploy over the holidays?"),
    (["In the retro we agreed to add integration tests for the checkout flow",
      "The retro ran ten minutes over", "Sam brought cookies to the retro"], "What did we agree to do in the retro?"),
    (["The marketing budget for Q4 is 40,000 USD", "Marketing hired a new designer",
      "The Q4 kickoff is in the large meeting room"], "How much can marketing spend in the fourth quarter?"),
    # tool results
    (["search_flights returned three options; the cheapest is 412 EUR on KLM", "The user wants a window seat",
      "The hotel confirmation number is HX-2291"], "How much was the cheapest flight?"),
    (["run_tests: 214 passed, 3 failed in test_billing.py", "git status showed two untracked files",
      "The linter reported no issues"], "Which tests failed?"),
    (["get_weather for Lisbon returned 24 degrees and sunny for Saturday", "The user packed sunscreen",
      "The train to Lisbon leaves at 8:15"], "What is the weather forecast for Lisbon?"),
    (["The payment webhook fails with a 401 because the signing secret was rotated",
      "The checkout page loads in 1.2 seconds", "The invoice PDF template was updated"],
     "Why is the payment webhook failing?"),
    (["The researcher agent found that the competitor raised prices by 8% in May",
      "The researcher agent saved its notes to the shared drive", "The writer agent drafted the newsletter"],
     "What did the researcher find out about the competitor's pricing?"),
    # facts about people and things
    (["Marco is the on-call engineer this week", "Marco likes his espresso without sugar",
      "Marco fixed the flaky login test"], "Who is on call this week?"),
    (["Dana is allergic to cats", "Dana's daughter starts school in September",
      "Dana presented the product roadmap"], "Does Dana have any allergies?"),
    (["Helen Park is the chief financial officer of Acme", "Acme's office has a rooftop garden",
      "Acme ships orders from two warehouses"], "Who runs finance at Acme?"),
    (["The dentist appointment is on March 3 at 10am", "The car needs new tyres before winter",
      "The library books are due next week"], "When is my dentist appointment?"),
    (["The staging database credentials are kept in the team vault under staging-db",
      "The staging cluster was upgraded last night", "The production dashboard shows green"],
     "Where can I find the staging database password?"),
    (["The user's passport expires in June 2026", "The user's favourite airline is Iberia",
      "The user has a meeting in Madrid next month"], "When does my passport expire?"),
    (["The mobile app release is blocked on App Store review", "The mobile team grew to six people",
      "The app icon was redesigned in blue"], "What is blocking the app release?"),
    (["Customer 4471 asked for a refund because the package arrived damaged",
      "Customer 4471 lives in Denver", "Customer 4471 has been a subscriber for two years"],
     "Why did customer 4471 ask for a refund?"),
    (["The office moved to 12 Harbour Street, second floor", "The office coffee machine is broken",
      "The office closes early on Fridays"], "What is the address of the new office?"),
]  # fmt: skip

# questions none of the memories above answers
UNRELATED = [
    "What is the capital of France?",
    "Who won the 1998 World Cup?",
    "How many legs does a spider have?",
    "What is the boiling point of water at sea level?",
]


@pytest.fixture(scope="module")
def everyday(tmp_path_factory, embedder):
    path = tmp_path_factory.mktemp("everyday")
    shard = Shard("shard-0", SqliteStore(path / "r.sqlite"), EdgeVectorIndex(path / "v", 384), dim=384,
                  clock=ManualClock())  # fmt: skip
    contexts = []
    for i, (memories, _) in enumerate(CASES):
        ctx = Context("acme", f"user{i}", "assistant", f"session{i}")
        nodes = [MemoryNode(content=m, scope=ctx.scope, source="agent:assistant") for m in memories]
        shard.put_many(ctx, nodes, embedder.encode(memories))
        contexts.append(ctx)
    yield shard, contexts
    shard.close()


def recall(shard, embedder, ctx, query, **opts):
    options = RecallOptions(touch=False, **opts)
    return shard.search(ctx, embedder.encode(query_texts(query)), 5, query=query, options=options)  # as recall embeds it


@pytest.mark.parametrize("case", range(len(CASES)), ids=[q for _, q in CASES])
def test_the_relevant_memory_ranks_first(everyday, embedder, case):
    shard, contexts = everyday
    memories, question = CASES[case]
    hits = recall(shard, embedder, contexts[case], question)
    assert hits and hits[0].content == memories[0], [(h.content, round(h.relevance, 3)) for h in hits]
    assert hits[0].relevance >= shard.ranking.min_relevance


@pytest.mark.parametrize("question", UNRELATED)
def test_an_unrelated_question_returns_nothing_above_the_floor(everyday, embedder, question):
    shard, contexts = everyday
    for ctx in contexts:
        assert recall(shard, embedder, ctx, question) == [], ctx.user
        # the memories were there, only below the floor
        assert recall(shard, embedder, ctx, question, min_relevance=0.0)
