"""Which lake rows are a user's: silver's typed columns and raw Kafka values, on Spark,
matched on the identity fields a pipeline declares."""

from __future__ import annotations

import json

import pytest

from batch_layer.suppressed import (
    event_rows,
    parsed_rows,
    record_rows,
    without_suppressed,
    without_suppressed_parsed,
)
from core.frames import local_frame

SDK = ("userId", "anonymousId")
"""The identity fields of the SDK events' pipeline (``web_events``)."""

EVENTS = [
    ("1", "u-1", "a-1"),
    ("2", None, "u-1"),  # forgetting an anonymousId
    ("3", "u-10", "a-2"),  # a longer id starting with it
    ("4", None, None),
    ("5", "someone", "a-3"),
]


def _raw(spark, column: str = "value", binary: bool = True):
    rows = [
        ("1", json.dumps({"userId": "u-1", "anonymousId": "a-1", "type": "page"})),
        ("2", json.dumps({"anonymousId": "u-1", "type": "teleport"})),  # a reject: still theirs
        ("3", json.dumps({"userId": "u-10", "properties": {"note": "u-1"}})),
        ("4", "{not json u-1"),  # unparseable: nothing says whose it is
        ("5", json.dumps({"userId": "someone", "previousId": "u-1"})),
    ]
    kind = "binary" if binary else "string"
    frame = local_frame(spark, rows, "id string, text string")
    return frame.selectExpr("id", f"cast(text as {kind}) as {column}")


def _ids(frame) -> list[str]:
    return sorted(r.id for r in frame.select("id").collect())


def test_silver_rows_of_a_user_are_those_with_the_id_as_user_or_anonymous_id(spark):
    silver = local_frame(spark, EVENTS, "id string, userId string, anonymousId string")
    assert _ids(silver.where(event_rows("u-1", SDK))) == ["1", "2"]
    assert _ids(silver.where(~event_rows("u-1", SDK))) == ["3", "4", "5"]  # never null


@pytest.mark.parametrize(("column", "binary"), [("value", True), ("raw", False)])
def test_raw_records_are_matched_on_their_parsed_identity_fields(spark, column, binary):
    records = _raw(spark, column, binary)
    assert _ids(records.where(record_rows("u-1", SDK, column))) == ["1", "2"]
    assert _ids(records.where(~record_rows("u-1", SDK, column))) == ["3", "4", "5"]


def test_an_id_with_quotes_is_a_value_not_sql(spark):
    tricky = "o'brien\" OR 1=1 --"
    silver = local_frame(
        spark,
        [("1", tricky, None), ("2", "x", None)],
        "id string, userId string, anonymousId string",
    )
    assert _ids(silver.where(event_rows(tricky, SDK))) == ["1"]


def test_suppressed_users_records_are_left_out_and_others_kept(spark):
    records = _raw(spark)
    assert _ids(without_suppressed(records, {"u-1", "a-3"}, SDK)) == ["3", "4", "5"]
    assert _ids(without_suppressed(records, {"someone"}, SDK)) == ["1", "2", "3", "4"]
    assert without_suppressed(records, set(), SDK) is records
    assert without_suppressed(records, {"u-1"}, SDK).columns == records.columns


def _parsed(spark):
    """Staging's rows: an event keeps typed ids and no raw text, a reject its raw text."""
    rows = [
        ("1", "u-1", "a-1", None),
        ("2", None, "u-1", None),
        ("3", None, None, json.dumps({"userId": "u-1", "type": "teleport"})),  # a reject
        ("4", None, None, "{not json u-1"),
        ("5", "u-10", "a-2", None),
        ("6", None, None, json.dumps({"anonymousId": "a-3"})),
    ]
    return local_frame(spark, rows, "id string, userId string, anonymousId string, raw string")


def test_parsed_records_are_matched_on_raw_text_or_typed_ids(spark):
    parsed = _parsed(spark)
    assert _ids(parsed.where(parsed_rows("u-1", SDK, parsed.columns))) == ["1", "2", "3"]
    assert _ids(parsed.where(~parsed_rows("u-1", SDK, parsed.columns))) == ["4", "5", "6"]
    assert _ids(without_suppressed_parsed(parsed, {"u-1", "a-3"}, SDK)) == ["4", "5"]
    assert without_suppressed_parsed(parsed, {"u-1"}, SDK).columns == parsed.columns


def test_a_contract_without_the_identity_columns_is_matched_on_raw_text_alone(spark):
    """Another pipeline's parsed records (no ``userId`` column): only rejects can match."""
    parsed = _parsed(spark).drop("userId", "anonymousId")
    assert _ids(parsed.where(parsed_rows("u-1", SDK, parsed.columns))) == ["3"]
    assert _ids(without_suppressed_parsed(parsed, {"u-1"}, SDK)) == ["1", "2", "4", "5", "6"]


def test_each_pipeline_is_matched_on_its_own_identity_fields(spark):
    orders = local_frame(
        spark,
        [("1", "b-1", "u-1"), ("2", "b-2", None), ("3", None, "b-1")],
        "id string, buyer_id string, userId string",
    )
    # checkouts names its buyer: a userId column there is not whose the row is.
    assert _ids(orders.where(event_rows("b-1", ("buyer_id",)))) == ["1"]
    assert _ids(orders.where(event_rows("u-1", ("buyer_id",)))) == []
    raw = orders.selectExpr("id", "to_json(struct(buyer_id, userId)) as value")
    assert _ids(without_suppressed(raw, {"b-2"}, ("buyer_id",))) == ["1", "3"]


def test_a_pipeline_without_identity_fields_holds_no_ones_rows(spark):
    records = _raw(spark)
    assert _ids(records.where(record_rows("u-1", ()))) == []
    assert without_suppressed(records, {"u-1"}, ()) is records
