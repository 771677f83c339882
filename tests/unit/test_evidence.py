"""The evidence estimator and learned reliabilities (pure: no store, no Ray)."""

import math

import pytest

from memorybus.bus.evidence import MAX_CLAIMS, Claim, KeyEvidence, Weighing, decay, observe, support
from memorybus.bus.reliability import PRIOR_STRENGTH, Reliabilities, merge
from memorybus.salience import SECONDS_PER_DAY as DAY
from memorybus.simulation.replay import oracle

T0 = 1_700_000_000.0
STATED = lambda source, confidence: confidence  # noqa: E731 - calibration off: the stated confidence


def run(claims, calibrate=STATED):
    ev, outs = KeyEvidence(), []
    for c in claims:
        out = observe(ev, c, calibrate)
        outs.append(out)
        ev = out.record
    return ev, outs


def test_independent_sources_agreeing_add_up_one_source_repeating_does_not():
    head = Claim("a", "X", 0.8, T0)
    # two sources saying Y together outweigh one stronger source that said X at the same time
    ev, outs = run([head, Claim("b", "Y", 0.7, T0 + 60), Claim("c", "Y", 0.7, T0 + 120)])
    assert [o.new_wins for o in outs] == [True, False, True] and ev.head == "Y"
    # the same source saying Y twice is one voice: X stays
    ev, outs = run([head, Claim("b", "Y", 0.7, T0 + 60), Claim("b", "Y", 0.7, T0 + 120)])
    assert ev.head == "X" and not outs[-1].new_wins
    scores = support(ev, STATED, Weighing())
    assert scores["Y"] == pytest.approx(0.847, abs=0.01)  # logit(.7): counted once


def test_a_report_of_a_superseded_value_is_stale_not_new_evidence():
    # X, then a change to Y; right after, a source still reports X: stale, Y stays
    change = T0 + 4 * DAY
    ev, outs = run([Claim("a", "X", 0.9, T0), Claim("b", "Y", 0.7, change), Claim("c", "X", 0.95, change + 600)])
    assert ev.head == "Y" and outs[-1].reason == "evidence: stale" and not outs[-1].new_wins
    # a report of X dated more than the grace before the change says nothing about now
    late = observe(ev, Claim("d", "X", 0.99, change - Weighing().grace_days * DAY - 600), STATED)
    assert late.record.head == "Y" and not late.new_wins
    # one dated just before it is weighed at its time: a strong report of X then outweighs Y
    close = observe(ev, Claim("d", "X", 0.99, change - 600), STATED)
    assert close.record.head == "X" and close.new_wins
    # days later X counts again: a change back is possible
    back = observe(ev, Claim("e", "X", 0.9, change + 6 * DAY), STATED)
    assert back.new_wins and back.record.head == "X"


@pytest.mark.parametrize("days_before", [0.0, 0.5, 1.5, 2.4, 3.0])
def test_a_report_of_the_head_counts_less_the_longer_before_the_challenge_it_was_made(days_before):
    """The older a report of the head, the likelier a change came after it: against a
    challenger it counts fully when made at the challenge, linearly less before, nothing
    ``grace_days`` or more before."""
    grace = Weighing().grace_days
    challenge = T0 + 10 * DAY
    ev = KeyEvidence("X", T0, (Claim("a", "X", 0.9, T0), Claim("b", "X", 0.9, challenge - days_before * DAY),
                                Claim("c", "Y", 0.6, challenge)))
    # a's claim made X the head 10 days before the challenge: past the grace, it counts nothing
    x = support(ev, STATED, Weighing()).get("X", 0.0)
    # b's claim is a re-assertion of the head (it counts `reassert`), tapered by its age
    expected = Weighing().reassert * math.log(0.9 / 0.1) * max(0.0, 1 - days_before / grace)
    assert x == pytest.approx(expected * decay(days_before * DAY, 30.0), abs=1e-6)


def test_the_head_is_the_same_whichever_order_the_claims_arrive_in():
    """Claims are weighed in the order of their times: a true report that took longer to
    arrive than a wrong one still counts (arrival order used to let the wrong value in
    first and the true report then counted as late)."""
    change = T0 + 10 * DAY
    old = Claim("a", "X", 0.9, T0)
    true, wrong = Claim("b", "Y", 0.8, change + 0.2 * DAY), Claim("w", "Z", 0.75, change + 0.4 * DAY)
    again = Claim("c", "Y", 0.7, change + 0.3 * DAY)
    for order in ([old, true, wrong], [old, wrong, true], [old, wrong, again, true], [old, again, wrong, true],
                  [old, true, again, wrong], [old, wrong, true, again]):
        ev, outs = run(order)
        assert ev.head == "Y", [c.source for c in order]
        assert [c.at for c in ev.claims] == sorted(c.at for c in order)  # held in time order
    ev, outs = run([old, wrong, true])
    assert outs[1].new_wins and outs[2].new_wins and "time order" in outs[2].reason
    # a stale report arriving last does not undo it either
    ev = observe(ev, Claim("s", "X", 0.85, change + 0.1 * DAY), STATED).record
    assert ev.head == "Y"


def test_trimming_keeps_the_base_so_late_claims_are_weighed_as_if_all_were_held():
    claims = [Claim(f"s{i % 4}", "XY"[(i // 30) % 2], 0.8, T0 + i * 3600) for i in range(60)]
    ev, _ = run(claims)
    assert len(ev.claims) == MAX_CLAIMS and ev.base is not None and ev.base.at == claims[60 - MAX_CLAIMS - 1].at
    # the base: Y had taken over from X before the oldest claim kept
    assert ev.head == "Y" and ev.base.head == "Y" and ev.base.since >= claims[30].at and ev.base.gone[-1][0] == "X"
    # a claim older than the base cannot be placed: it is weighed against the present, as late
    out = observe(ev, Claim("z", "X", 0.99, T0), STATED)
    assert not out.new_wins and out.record.head == "Y"
    assert KeyEvidence.decode(ev.encode()) == ev
    legacy = ev.to_plain()
    del legacy["b"]  # a record kept before bases: trimmed (tallies), so its base is unknown
    assert KeyEvidence.from_plain(legacy).base is None


def test_an_old_report_of_the_head_says_nothing_against_a_later_change():
    ev, outs = run([Claim("a", "X", 0.99, T0), Claim("b", "X", 0.99, T0 + 60),
                    Claim("c", "Y", 0.6, T0 + 10 * DAY)])
    assert outs[-1].new_wins and ev.head == "Y"
    # but a report of the head at the time of the challenge does
    ev, outs = run([Claim("a", "X", 0.95, T0), Claim("c", "Y", 0.6, T0 + 60)])
    assert not outs[-1].new_wins and ev.head == "X"


def test_the_new_head_is_the_asserted_value_or_the_old_head_and_records_stay_bounded():
    claims = [Claim(f"s{i % 5}", "XYZ"[i % 3], 0.6 + 0.01 * (i % 30), T0 + i * 3600) for i in range(100)]
    ev = KeyEvidence()
    for c in claims:
        before = ev.head
        out = observe(ev, c, STATED)
        assert out.record.head in (before, c.value)
        assert out.record.head == (c.value if out.new_wins else before) or not before
        assert ev is not out.record and len(out.record.claims) <= MAX_CLAIMS
        ev = out.record
    assert KeyEvidence.decode(ev.encode()) == ev  # the stored form round-trips
    assert KeyEvidence.decode(b"not msgpack") == KeyEvidence()  # unreadable: no evidence, not a failure


def test_grades_agree_with_the_winner_without_the_sources_own_vote():
    ev, _ = run([Claim("a", "X", 0.9, T0)])
    assert ev.grades(T0, 30.0) == {}  # a lone claim is not graded
    ev, _ = run([Claim("a", "X", 0.9, T0), Claim("b", "X", 0.8, T0 + 60), Claim("liar", "Z", 0.9, T0 + 120)])
    g = ev.grades(T0 + 120, 30.0)
    assert g["a"][0] == pytest.approx(1, abs=0.01) and g["b"][0] == pytest.approx(1, abs=0.01)
    assert g["liar"][1] == pytest.approx(1, abs=0.01) and g["liar"][0] == 0


def _liar_world(book: Reliabilities, org: str, keys: int) -> None:
    """Three honest sources and a liar stating .95 assert ``keys`` facts at once."""
    for k in range(keys):
        ev, at = KeyEvidence(), T0 + k * 3600
        for source, value, conf in (("honest1", "T", 0.8), ("honest2", "T", 0.8), ("honest3", "T", 0.8),
                                    ("liar", f"W{k}", 0.95)):
            old = ev
            ev = observe(ev, Claim(source, value, conf, at), book.calibrator(org, at)).record
            book.apply(org, old.grades(old.latest(), 30.0), ev.grades(ev.latest(), 30.0))


def test_a_liars_reliability_falls_and_its_stated_confidence_stops_counting():
    book = Reliabilities()
    _liar_world(book, "acme", 20)
    snap = book.snapshot("acme", book.latest("acme"))
    assert snap["liar"]["reliability"] < 0.1 and snap["honest1"]["reliability"] > 0.9
    calibrated = book.calibrator("acme", book.latest("acme"))
    assert calibrated("liar", 0.95) < 0.5 and calibrated("honest1", 0.7) > 0.7
    # and now the liar alone loses against one honest source
    ev = observe(KeyEvidence(), Claim("honest1", "T", 0.7, T0 + 30 * 3600), calibrated).record
    assert observe(ev, Claim("liar", "W", 0.95, T0 + 30 * 3600 + 60), calibrated).record.head == "T"


def test_a_new_source_starts_neutral_and_grades_decay():
    book = Reliabilities(half_life_days=30.0)
    assert book.snapshot("acme", T0) == {}
    assert book.calibrator("acme", T0)("newcomer", 0.83) == pytest.approx(0.83)  # believed as it states itself
    book.apply("acme", {}, {"s": (4.0, 0.0, T0)})
    assert book.snapshot("acme", T0)["s"]["reliability"] == pytest.approx(5 / 6, abs=1e-4)
    assert book.calibrator("acme", T0)("s", 0.5) == pytest.approx((PRIOR_STRENGTH * 0.5 + 4) / (PRIOR_STRENGTH + 4))
    assert book.grades("acme", "s", T0 + 30 * DAY) == pytest.approx((2.0, 0.0))  # one half-life later
    # replacing a fact's contribution removes the old one
    book.apply("acme", {"s": (4.0, 0.0, T0)}, {"s": (1.0, 1.0, T0)})
    assert book.grades("acme", "s", T0) == pytest.approx((1.0, 1.0))


def test_orgs_never_shape_each_other():
    book = Reliabilities()
    _liar_world(book, "evil", 20)
    assert book.snapshot("acme", T0) == {}
    assert book.calibrator("acme", T0 + 40 * 3600)("liar", 0.95) == pytest.approx(0.95)
    merged = merge([{"s": {"agree": 1, "disagree": 0}}, {"s": {"agree": 2, "disagree": 1}}])
    assert merged["s"] == {"reliability": 0.6667, "agree": 3.0, "disagree": 1.0}


def test_oracle_weighs_true_reliabilities_and_the_stale_error_model():
    # a reliable source's new value beats a less reliable report of the previous value
    assert oracle([("new", 0.7), ("old", 0.8)], "new", "old", options=5)
    assert not oracle([("wrong", 0.95), ("true", 0.6)], "true", "old", options=5)
    assert not oracle([("wrong", 0.9)], "true", None, options=5)  # never asserted: out of reach


def test_grading_asks_each_source_left_out_what_support_without_it_says():
    """``_grade`` decides "another source backs the winner" from weights computed once
    per horizon; it must say exactly what ``support(..., without=source)`` says, in
    random records that exercise every branch (a source that is the newest or opens the
    challenge, stale reports, sources with no other, several values)."""
    import random

    from memorybus.bus.evidence import _backers, _winner

    def calibrate(source, confidence):
        return min(0.99, max(0.01, confidence * (0.5 + 0.1 * int(source[1:]))))

    checked = flipped = 0
    for seed in range(300):
        r = random.Random(seed)
        ev, t = KeyEvidence(), T0
        for _ in range(r.choice([3, 12, 40])):
            t += r.choice([0, 1, 600, DAY / 2, 3 * DAY, 20 * DAY]) * (1 if r.random() < 0.85 else -1)
            claim = Claim(f"s{r.randrange(r.choice([1, 2, 4, 9]))}", f"v{r.randrange(3)}", r.choice([0.3, 0.6, 0.95]), t)
            ev = observe(ev, claim, calibrate).record
            scores = support(ev, calibrate, Weighing())
            winner = _winner(scores, ev.head, ev.claims[-1].value)
            if winner is None:
                continue
            sources = {c.source for c in ev.claims}
            got = _backers(ev, winner, sources, calibrate, Weighing())
            want = {s: support(ev, calibrate, Weighing(), without=s).get(winner, 0.0) > 0 for s in sources}
            assert got == want, (seed, ev)
            checked += len(sources)
            flipped += sum(not v for v in want.values())
    assert checked > 3000 and flipped > 100  # both answers were asked for, many times
