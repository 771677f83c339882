"""The time parser, written from its own spec (the module docstring of
memorybus.retrieval.timeparse): the forms people and agents write."""

from datetime import UTC, datetime

import pytest

from memorybus.retrieval.timeparse import parse_datetime, query_times, time_match


def ts(*a):
    return datetime(*a, tzinfo=UTC).timestamp()


# Wednesday 13 March 2024, 15:00 UTC
REF = ts(2024, 3, 13, 15, 0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-03-05", ts(2024, 3, 5)),
        ("2024/03/05", ts(2024, 3, 5)),
        ("deployed 2024-03-05T14:30 to prod", ts(2024, 3, 5, 14, 30)),
        ("2024-03-05 14:30:15", ts(2024, 3, 5, 14, 30, 15)),
        ("2024-03-05T14:30:00Z", ts(2024, 3, 5, 14, 30)),
        ("5 March 2024", ts(2024, 3, 5)),
        ("the 5th of March, 2024", ts(2024, 3, 5)),
        ("5 Mar 2024", ts(2024, 3, 5)),
        ("March 5, 2024", ts(2024, 3, 5)),
        ("Mar 5th 2024", ts(2024, 3, 5)),
        ("2:30 pm on 5 March 2024", ts(2024, 3, 5, 14, 30)),
        ("5 March 2024 at 14:30", ts(2024, 3, 5, 14, 30)),
        ("March 5, 2024, 2:30pm", ts(2024, 3, 5, 14, 30)),
        ("12:05 am on 1 January 2024", ts(2024, 1, 1, 0, 5)),
        ("met on 5 March 2024 and again on 6 March 2024", ts(2024, 3, 5)),
        ("5 March 2024 3 friends came", ts(2024, 3, 5)),  # a bare number is not a time of day
    ],
)
def test_full_dates(text, expected):
    assert parse_datetime(text) == expected


@pytest.mark.parametrize(
    "text", ["", "no date here", "31 February 2024", "2024-13-01", "March 2024", "5 March", "25:00 on 5 March 2024"]
)
def test_no_full_date_is_guessed(text):
    # also: an impossible time of day drops the date rather than guess one
    assert parse_datetime(text) is None


def window(query, ref=REF):
    found = query_times(query, ref)
    assert len(found) == 1, found
    return found[0].start, found[0].end


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        # full dates and dates without a year (their last occurrence on or before the reference day)
        ("what happened on 8 May 2023?", ts(2023, 5, 8), ts(2023, 5, 9)),
        ("what happened on 2023-05-08?", ts(2023, 5, 8), ts(2023, 5, 9)),
        ("what did we decide on May 8th?", ts(2023, 5, 8), ts(2023, 5, 9)),
        ("notes from the 1st of March", ts(2024, 3, 1), ts(2024, 3, 2)),
        ("what did I eat on March 13", ts(2024, 3, 13), ts(2024, 3, 14)),
        # named days
        ("what did I do today?", ts(2024, 3, 13), ts(2024, 3, 14)),
        ("anything this morning?", ts(2024, 3, 13), ts(2024, 3, 14)),
        ("what did I eat yesterday", ts(2024, 3, 12), ts(2024, 3, 13)),
        ("where were we last night", ts(2024, 3, 12), ts(2024, 3, 13)),
        # weekdays: the reference is a Wednesday
        ("the standup last Tuesday", ts(2024, 3, 12), ts(2024, 3, 13)),
        ("the standup last Wednesday", ts(2024, 3, 6), ts(2024, 3, 7)),
        ("what did the planner say on Wednesday", ts(2024, 3, 13), ts(2024, 3, 14)),
        ("the call on Friday", ts(2024, 3, 8), ts(2024, 3, 9)),
        # weeks, months, years, weekends
        ("this week", ts(2024, 3, 11), ts(2024, 3, 18)),
        ("last week", ts(2024, 3, 4), ts(2024, 3, 11)),
        ("last month", ts(2024, 2, 1), ts(2024, 3, 1)),
        ("this month", ts(2024, 3, 1), ts(2024, 4, 1)),
        ("last year", ts(2023, 1, 1), ts(2024, 1, 1)),
        ("last weekend", ts(2024, 3, 9), ts(2024, 3, 11)),
        ("this weekend", ts(2024, 3, 16), ts(2024, 3, 18)),
        # N units ago
        ("two weeks ago", ts(2024, 2, 24, 12), ts(2024, 3, 2, 12)),
        ("3 days ago", ts(2024, 3, 10), ts(2024, 3, 11)),
        ("a day ago", ts(2024, 3, 12), ts(2024, 3, 13)),
        ("a couple of days ago", ts(2024, 3, 11), ts(2024, 3, 12)),
        ("a few days ago", ts(2024, 3, 10), ts(2024, 3, 11)),
        # months and years
        ("what did we ship in June?", ts(2023, 6, 1), ts(2023, 7, 1)),
        ("in March", ts(2024, 3, 1), ts(2024, 4, 1)),
        ("early February", ts(2024, 2, 1), ts(2024, 3, 1)),
        ("what happened in June 2022", ts(2022, 6, 1), ts(2022, 7, 1)),
        ("the budget of June of 2022", ts(2022, 6, 1), ts(2022, 7, 1)),
        ("in 2022", ts(2022, 1, 1), ts(2023, 1, 1)),
        # anchors: relative forms count from an explicit date
        ("the week before 5 March 2024", ts(2024, 2, 27), ts(2024, 3, 5)),
        ("two days after 5 March 2024", ts(2024, 3, 7), ts(2024, 3, 8)),
        ("the day before March 5, 2024", ts(2024, 3, 4), ts(2024, 3, 5)),
        ("the weekend before 11 March 2024", ts(2024, 3, 9), ts(2024, 3, 11)),
    ],
)
def test_query_windows(query, start, end):
    assert window(query) == (start, end)


def test_queries_without_times_name_none():
    for q in ["what is the capital of France?", "what may I bring?", "I have 3 cats", "the march went well"]:
        assert query_times(q, REF) == []


def test_several_windows_come_in_query_order():
    found = query_times("compare last week with 5 March 2024", REF)
    assert [w.text for w in found] == ["last week", "5 March 2024"]


def test_time_match_is_one_inside_and_falls_to_zero_at_the_slack():
    w = query_times("yesterday", REF)
    assert time_match(w, ts(2024, 3, 12, 9), 10) == 1.0
    assert time_match(w, ts(2024, 3, 13) + 5 * 86_400, 10) == pytest.approx(0.5)
    assert time_match(w, ts(2024, 4, 1), 10) == 0.0
    assert time_match([], ts(2024, 3, 12), 10) == 0.0
