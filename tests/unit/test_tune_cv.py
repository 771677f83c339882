"""Cross-validated tuning (benchmarks/tune_cv.py) never scores a choice on the questions
it was made on: folds are disjoint and cover every question, and the per-fold pick is
made on the tuned folds alone. Synthetic scores, no model."""

from benchmarks.tune_cv import Scores, cross_validate, locomo_folds, selected_rows, stratified_folds


def test_locomo_folds_tune_on_three_conversations_and_leave_each_unseen_equally_often():
    groups = [c for c in ("a", "b", "c", "d", "e") for _ in range(3)]
    folds = locomo_folds(groups)
    assert len(folds) == 10
    for tuned, unseen in folds:
        assert not set(tuned) & set(unseen) and sorted(tuned + unseen) == list(range(15))
        assert len({groups[i] for i in tuned}) == 3 and len({groups[i] for i in unseen}) == 2
        assert not {groups[i] for i in tuned} & {groups[i] for i in unseen}  # whole conversations
    unseen_count = {g: sum(groups[u[0]] == g or groups[u[-1]] == g for _, u in folds) for g in "abcde"}
    assert set(unseen_count.values()) == {4}


def test_stratified_folds_spread_each_kind_and_leave_every_question_unseen_once():
    kinds = ["x"] * 8 + ["y"] * 4
    folds = stratified_folds(kinds, 4)
    assert sorted(i for _, u in folds for i in u) == list(range(12))
    for tuned, unseen in folds:
        assert sorted(tuned + unseen) == list(range(12))
        assert [kinds[i] for i in unseen].count("x") == 2 and [kinds[i] for i in unseen].count("y") == 1


def test_the_pick_is_made_on_tuned_folds_only_so_an_overfit_set_shows_its_gap():
    groups = ["a", "a", "b", "b", "c", "c", "d", "d", "e", "e"]
    folds = locomo_folds(groups)
    defaults = Scores("defaults", {}, {"m": [0.5] * 10})
    # "lucky" is perfect on conversations a-c and useless on d-e: picked where it was tuned on a-c only
    lucky = Scores("lucky", {}, {"m": [1.0] * 6 + [0.0] * 4})
    cv = cross_validate([defaults, lucky], ["m"], folds)
    for pick, (tuned, _) in zip(cv["picks"], folds, strict=True):
        lucky_tuned = sum(lucky.rows["m"][i] for i in tuned) / len(tuned)
        assert pick["set"] == ("lucky" if lucky_tuned > 0.5 else "defaults")
    assert cv["selected"]["m"]["gap"] > 0.1  # tuned looks better than what the unseen folds get
    lucky_entry = next(e for e in cv["sets"] if e["label"] == "lucky")
    assert lucky_entry["m"]["unseen_losses"] > 0
    rows = selected_rows([defaults, lucky], cv, "m", 10)
    assert len(rows) == 10 and all(0.0 <= r <= 1.0 for r in rows)


def test_timed_threads_declare_each_run_of_one_event_time_a_thread_in_order():
    import pytest

    from benchmarks.tune_recall import base_mode, timed_threads

    items = [{"content": c, "valid_from": t} for c, t in
             [("a", 10.0), ("b", 10.0), ("c", 20.0), ("d", 10.0), ("e", 10.0), ("f", None)]]
    out = timed_threads(items)
    assert [(o["thread"], o["position"]) for o in out] == [
        ("timed-0", 0), ("timed-0", 1), ("timed-1", 0), ("timed-2", 0), ("timed-2", 1), ("timed-3", 0)]
    assert [o["content"] for o in out] == list("abcdef") and "thread" not in items[0]  # the input is untouched
    with pytest.raises(ValueError):
        timed_threads([{"content": "x", "valid_from": 1.0, "thread": "declared"}])
    assert base_mode("plain_timed") == "plain" and base_mode("structured") == "structured"
