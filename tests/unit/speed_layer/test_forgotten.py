"""The speed layer leaves out the events of forgotten people, compared as keyed digests."""

from __future__ import annotations

from speed_layer.forgotten import Forgotten, without_forgotten
from views.digest import keyed_digest

KEY = b"k" * 32


def test_events_of_a_forgotten_id_in_any_identity_field_are_left_out(spark):
    d = {name: keyed_digest(KEY, name) for name in ("u-1", "a-1", "a-2", "a-3")}
    events = spark.createDataFrame(
        [
            ("e1", d["u-1"], d["a-1"]),  # forgotten by their userId
            ("e2", None, d["a-2"]),  # forgotten by their anonymousId
            ("e3", "", d["a-3"]),  # someone else, an empty userId
            ("e4", None, None),  # no one
        ],
        "id string, userId string, anonymousId string",
    )
    forgotten = Forgotten(KEY, frozenset({"u-1"}), lambda: frozenset({"a-2"}))
    kept = without_forgotten(events, forgotten(), ("userId", "anonymousId"))
    assert sorted(r.id for r in kept.collect()) == ["e3", "e4"]


def test_nothing_is_left_out_when_no_one_is_forgotten_or_no_field_is_there(spark):
    events = spark.createDataFrame([("e1", "x")], "id string, other string")
    assert without_forgotten(events, frozenset(), ("userId",)) is events
    assert without_forgotten(events, frozenset({"x"}), ("userId",)) is events


def test_the_digests_follow_the_live_list():
    live: set[str] = set()
    forgotten = Forgotten(KEY, frozenset(), lambda: frozenset(live))
    assert forgotten() == frozenset()
    live.add("b-7")
    assert forgotten() == {keyed_digest(KEY, "b-7")}
