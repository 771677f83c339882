"""The evaluation protocols, metrics and baselines on small synthetic data (no model, no Ray)."""

import json
from datetime import UTC, datetime

import numpy as np
import pytest

from memorybus.evaluation import locomo, longmemeval
from memorybus.evaluation.baselines import BM25, Corpus, english_tokens, rrf
from memorybus.evaluation.metrics import hit_at, ndcg_at, recall_all_at, recall_at


def locomo_sample():
    return [
        {
            "sample_id": "conv-x",
            "conversation": {
                "speaker_a": "Ana",
                "speaker_b": "Ben",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a beagle."},
                    {"speaker": "Ben", "dia_id": "D1:2", "text": "Nice!", "blip_caption": "a photo of a dog"},
                ],
                "session_2_date_time": "10:00 am on 2 July, 2023",
                "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "I made a bowl in pottery class."}],
            },
            "qa": [
                {"question": "What dog?", "answer": "beagle", "evidence": ["D1:1"], "category": 4},
                {"question": "Both?", "answer": "x", "evidence": ["D1:1; D2:01"], "category": 1},
                {"question": "Malformed", "answer": "x", "evidence": ["D:2:1", "D9:9"], "category": 2},
                {"question": "No gold", "answer": "x", "evidence": ["D7:7"], "category": 3},
            ],
        }
    ]


def test_locomo_protocol(tmp_path):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(locomo_sample()))
    (conv,) = locomo.load(path)
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D2:1"]
    assert conv.turns[1].content == "Ben: Nice! [shares a photo of a dog]"
    assert conv.turns[0].when == datetime(2023, 5, 8, 13, 56, tzinfo=UTC).timestamp()
    assert [q.gold for q in conv.questions] == [["D1:1"], ["D1:1", "D2:1"], ["D2:1"]]
    assert conv.dropped_questions == 1
    structured = locomo.memory_item(conv, conv.turns[2], "structured")
    assert structured["valid_from"] == conv.turns[2].when and structured["kind"] == "episodic"
    assert (structured["thread"], structured["position"], structured["speaker"]) == ("conv-x/session_2", 0, "Ben")
    assert "structured" not in structured and "source" not in structured  # declared fields only
    plain = locomo.memory_item(conv, conv.turns[2], "plain")
    assert plain == {k: v for k, v in structured.items() if k not in ("thread", "position", "speaker")}
    with pytest.raises(ValueError):
        locomo.memory_item(conv, conv.turns[2], "leaky")
    assert locomo.normalise_ids("D30:05") == ["D30:5"]


def test_the_dated_baseline_text_is_what_locomos_retrieval_code_embeds_and_memories_keep_their_own(tmp_path):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(locomo_sample()))
    (conv,) = locomo.load(path)
    assert conv.turns[0].dataset_text == '(1:56 pm on 8 May, 2023) Ana said, "I adopted a beagle."'
    assert conv.turns[1].dataset_text == '(1:56 pm on 8 May, 2023) Ben said, "Nice!" [shares a photo of a dog]'
    for mode in locomo.MODES:  # the adapter's format never reaches what the bus stores
        assert locomo.memory_item(conv, conv.turns[0], mode)["content"] == "Ana: I adopted a beagle."


def test_longmemeval_protocol(tmp_path):
    data = [
        {
            "question_id": "q1", "question_type": "single-session-user", "question": "What did I adopt?",
            "question_date": "2023/05/30 (Tue) 10:18", "answer": "a dog", "answer_session_ids": ["s2"],
            "haystack_session_ids": ["s1", "s2"], "haystack_dates": ["2023/05/20 (Sat) 07:47", "2023/05/21 (Sun) 08:00"],
            "haystack_sessions": [
                [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}],
                [{"role": "user", "content": "I adopted a dog " + "very " * 600, "has_answer": True}],
            ],
        },
        {
            "question_id": "q2", "question_type": "single-session-assistant", "question": "What did you say?",
            "question_date": "2023/05/30 (Tue) 10:18", "answer": "x", "answer_session_ids": ["s1"],
            "haystack_session_ids": ["s1"], "haystack_dates": ["2023/05/20 (Sat) 07:47"],
            "haystack_sessions": [[{"role": "assistant", "content": "x", "has_answer": True}]],
        },
    ]  # fmt: skip
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(data))
    items, skipped = longmemeval.load(path)
    assert skipped == 1 and [i.question_id for i in items] == ["q1"]
    s1, _ = items[0].sessions
    assert s1.document == "hello"
    assert items[0].question_date == datetime(2023, 5, 30, 10, 18, tzinfo=UTC).timestamp()
    batch, sessions = longmemeval.items(items[0], "structured")
    chunks = [m for m, s in zip(batch, sessions, strict=True) if s == "s2"]
    assert len(chunks) == 2 and all(len(c["content"]) <= longmemeval.MAX_CHARS for c in chunks)
    assert [(c["thread"], c["position"], c["speaker"]) for c in chunks] == [("s2", 0, "user"), ("s2", 1, "user")]
    plain, same = longmemeval.items(items[0], "plain")
    assert same == sessions and all("thread" not in m and "speaker" not in m for m in plain)
    assert [m["content"] for m in plain] == [m["content"] for m in batch]


def test_metrics():
    ranked = ["a", "b", "c", "d"]
    assert recall_at(ranked, ["b", "z"], 2) == 0.5 and hit_at(ranked, ["z"], 4) == 0.0
    assert recall_all_at(ranked, ["a", "c"], 3) == 1.0 and recall_all_at(ranked, ["a", "d"], 3) == 0.0
    assert ndcg_at(ranked, ["a"], 5) == 1.0
    assert ndcg_at(ranked, ["b"], 5) == pytest.approx(1 / np.log2(3))


def test_baselines():
    docs = ["the beagle is a dog", "pottery bowl class", "a dog and a cat"]
    bm25 = BM25(docs)
    assert int(np.argmax(bm25.scores("beagle"))) == 0
    vecs = np.eye(3, dtype=np.float32)
    ranks = Corpus(docs, vecs).rank_all("pottery", vecs[2])
    assert ranks["bm25"][0] == 1 and ranks["bm25_en"][0] == 1 and ranks["dense"][0] == 2
    assert set(ranks) == {"bm25_en", "bm25", "dense", "rrf"}
    alt = np.eye(3, dtype=np.float32)[[1, 2, 0]]  # other texts of the same memories: other vectors
    ranks = Corpus(docs, vecs, {"dense_dated": alt}).rank_all("pottery", vecs[2])
    assert ranks["dense"][0] == 2 and ranks["dense_dated"][0] == 1  # ranked by its own vectors
    assert set(ranks) == {"bm25_en", "bm25", "dense", "rrf", "dense_dated"}
    with pytest.raises(ValueError, match="dense_dated"):
        Corpus(docs, vecs, {"dense_dated": alt[:2]})  # one vector per memory


def test_the_english_analyzer_stems_and_drops_stop_words_and_plain_bm25_does_not():
    assert english_tokens("the dogs") == english_tokens("dog")  # stop word dropped, plural stemmed
    assert english_tokens("painting painted") == english_tokens("paint paint")
    docs = ["we adopted two dogs", "the the the of a dog", "cats and a hamster"]
    plain, english = BM25(docs), BM25(docs, analyzer=english_tokens)
    assert int(np.argmax(plain.scores("the dog"))) == 1  # "the" and the exact "dog" count
    assert int(np.argmax(english.scores("adopting dog"))) == 0  # "adopting" ~ "adopted", "dog" ~ "dogs"
    assert plain.scores("adopting")[0] == 0.0
    assert rrf([0, 1, 2], [2, 1, 0]) == [0, 2, 1]  # 1/61 + 1/63 > 2/62; ties by index
    assert rrf([0, 1], [0, 1]) == [0, 1]
