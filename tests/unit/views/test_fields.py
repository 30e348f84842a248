"""The speed layer's parse: only the fields the views read, and the same events and rejects.

:func:`views.fields.fields_read` derives the fields from the views themselves;
these tests hold it to three things: every declared view builds over the
parse and counts what it counts over the whole contract; what no view reads
is left out; a record is valid or a reject for the same reason either way,
whether or not the collector checked it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

from core.frames import local_frame
from core.settings import CollectorSettings
from data_contracts import load_contract
from data_contracts.derive import to_spark_schema
from ingest.enrich import RequestFacts
from ingest.intake import Intake
from pipelines import PIPELINES, pipeline
from views.fields import events_schema, fields_read
from views.input import check_records, parse_records, valid_of
from views.spec import Measure, ViewSpec

pytestmark = pytest.mark.slow

TOLERANCE = timedelta(seconds=60)
WEB = pipeline("web_events")
RECORDS = "partition INT, offset LONG, value BINARY, validated BOOLEAN"


def _leaves(schema, prefix: str = "") -> set[str]:
    """Dotted paths of a schema's leaf fields (arrays of structs through their elements)."""
    from pyspark.sql import types as T

    paths = set()
    for field in schema.fields:
        kind = field.dataType
        kind = kind.elementType if isinstance(kind, T.ArrayType) else kind
        path = f"{prefix}{field.name}"
        paths |= _leaves(kind, f"{path}.") if isinstance(kind, T.StructType) else {path}
    return paths


@pytest.mark.parametrize("spec", PIPELINES, ids=lambda spec: spec.name)
def test_every_view_builds_over_its_pipelines_parse_which_leaves_out_what_none_reads(spark, spec):
    contract = load_contract(spec.contract, spec.contract_major)
    fields = fields_read(spark, spec.view_specs, contract)
    parsed = spark.createDataFrame([], events_schema(fields))
    for view in spec.view_specs:
        assert view.build(parsed).columns == list(view.columns), view.name
    whole = _leaves(to_spark_schema(contract))
    assert _leaves(fields) <= whole
    assert {"event_id", "timestamp", "receivedAt", *contract.key} <= _leaves(fields)
    if spec.name == "web_events":
        left_out = whole - _leaves(fields)
        assert {"traits", "context.userAgent", "context.ip", "sentAt"} <= left_out
        assert {"properties.path", "context.page.path", "userId", "anonymousId"} <= _leaves(fields)


def test_a_view_reading_a_field_the_parse_left_out_cannot_be_built_over_it(spark):
    """Why the fields are derived, not listed: a view that reads one more field than the
    parse holds fails when it is built, it does not count nulls."""
    contract = load_contract(WEB.contract, WEB.contract_major)
    agents = ViewSpec(
        name="agents",
        keys=("agent",),
        measures=(Measure("events", "count"),),
        build=lambda events: events.groupBy(F.col("context.userAgent").alias("agent")).count(),
        description="Events per user agent.",
    )
    parsed = spark.createDataFrame([], events_schema(fields_read(spark, WEB.view_specs, contract)))
    with pytest.raises(AnalysisException, match="userAgent"):
        agents.build(parsed).schema  # noqa: B018 - analysing it is the test
    with_agents = fields_read(spark, (*WEB.view_specs, agents), contract)
    agents.build(spark.createDataFrame([], events_schema(with_agents))).schema  # noqa: B018


def test_each_view_counts_over_the_parse_what_it_counts_over_the_whole_contract(
    spark, runner, simulation
):
    contract = load_contract(WEB.contract, WEB.contract_major)
    fields = fields_read(spark, WEB.view_specs, contract)
    lines = runner.spark.read.text(str(simulation.source))
    records = lines.select("value", F.lit(0).alias("partition"), F.lit(0).alias("offset"))
    whole, _ = parse_records(records, contract, TOLERANCE)
    checked = check_records(records, contract, TOLERANCE, fields=fields, validated=F.lit(True))
    some = valid_of(checked)
    assert set(some.columns) < set(whole.columns)
    for view in WEB.view_specs:
        expected = runner.table(view.build(whole), view)
        assert len(expected) > 3, view.name
        assert runner.table(view.build(some), view) == expected, view.name


def _event(**fields) -> dict:
    event = {
        "type": "page",
        "anonymousId": "a-1",
        "event_id": "e1",
        "source_id": "s",
        "timestamp": "2026-01-01T11:59:00Z",
        "receivedAt": "2026-01-01T12:00:00Z",
        "properties": {"path": "/"},
    }
    return event | fields


def test_a_record_the_collector_did_not_check_is_parsed_whole_to_tell_if_it_is_valid(spark):
    """``results_count`` is no view's: a text there makes the record unparseable under the
    contract, so it is a reject unless the collector checked it (which it would not pass)."""
    contract = load_contract(WEB.contract, WEB.contract_major)
    fields = fields_read(spark, WEB.view_specs, contract)
    assert "properties.results_count" not in _leaves(fields)
    odd = _event(properties={"path": "/", "results_count": "many"})
    values = [json.dumps(_event()).encode(), json.dumps(odd).encode(), b"{no"]
    # Offsets 0-2: not checked; 10-12: checked by the collector; 20-22: no header at all.
    flags = {0: False, 10: True, 20: None}
    rows = [(0, base + n, v, flag) for base, flag in flags.items() for n, v in enumerate(values)]
    records = local_frame(spark, rows, RECORDS)

    def reasons(checked) -> dict[int, str | None]:
        return {r.offset: r.reason for r in checked.select("offset", "reason").collect()}

    some = check_records(records, contract, TOLERANCE, fields=fields, validated=F.col("validated"))
    assert reasons(some) == {
        **{0: None, 1: "unparseable", 2: "unparseable"},
        **{10: None, 11: None, 12: "unparseable"},  # 11: the collector never passes it (below)
        **{20: None, 21: "unparseable", 22: "unparseable"},
    }
    whole = reasons(check_records(records, contract, TOLERANCE))
    assert {o: r for o, r in reasons(some).items() if o < 10 or o >= 20} == {
        o: r for o, r in whole.items() if o < 10 or o >= 20
    }


TIMES = [
    "2026-01-01T11:59:00Z",
    "2026-01-01t11:59:00z",
    "2026-01-01T11:59:00.123456789Z",
    "2026-01-01T11:59:00+05:30",
    "2026-01-01T11:59:00-00:00",
    "2026-01-01 11:59:00Z",
    "2026-01-01T11:59Z",
    "2026-01-01T23:59:60Z",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999999Z",
    "2026-01-01T11:59:00",
    "2026-02-30T11:59:00Z",
]
"""Times as clients write them, well or not."""

EDGES = [
    *TIMES,
    *("2026-01-01", "12:00", "1e3", "true", ""),
    *(2**63 - 1, 2**63, 2**64 - 1, -(2**63), -(2**63) - 1, 2**31),
    *(1.0, -0.0, 1e308, 5e-324),
]
"""Values at the edges of what a field's type holds."""

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(EDGES),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
"""Any JSON value a client could send in a field."""


def _paths(schema, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    from pyspark.sql import types as T

    found = []
    for field in schema.fields:
        path = (*prefix, field.name)
        found.append(path)
        if isinstance(field.dataType, T.StructType):
            found += _paths(field.dataType, path)
    return found


def _set(event: dict, path: tuple[str, ...], value) -> dict:
    event = json.loads(json.dumps(event))
    node = event
    for name in path[:-1]:
        if not isinstance(node.get(name), dict):
            node[name] = {}
        node = node[name]
    node[path[-1]] = value
    return event


@pytest.fixture(scope="module")
def collector_intake() -> Intake:
    return Intake.of_pipeline(WEB, CollectorSettings())


WHOLE_PATHS = _paths(to_spark_schema(load_contract(WEB.contract, WEB.contract_major)))


def _sent(edits: list[list[tuple[tuple[str, ...], object]]]) -> list[dict]:
    """A valid page call per item of ``edits``, with its fields set as the item says."""
    events = []
    for n, changes in enumerate(edits):
        event = _event(messageId=f"m-{n}")
        del event["event_id"], event["receivedAt"], event["source_id"]
        for path, value in changes:
            event = _set(event, path, value)
        events.append(event)
    return events


def _unparseable_of_accepted(spark, intake: Intake, events: list[dict]) -> list[str]:
    """The records the collector accepts of ``events`` that Spark's parse of the whole
    contract finds unparseable (there should be none)."""
    facts = RequestFacts(datetime(2026, 1, 1, 12, tzinfo=UTC), "site", "1.1.0")
    accepted = intake.route(events, facts).accepted
    assert all(dict(r.headers)["contract"] == b"web-events/1.1.0" for r in accepted)
    if not accepted:
        return []
    rows = [(0, offset, r.value, True) for offset, r in enumerate(accepted)]
    contract = load_contract(WEB.contract, WEB.contract_major)
    checked = check_records(local_frame(spark, rows, RECORDS), contract, TOLERANCE)
    return [r.raw for r in checked.where(F.col("reason") == "unparseable").collect()]


def test_every_edge_value_the_collector_accepts_parses_whole_under_the_contract(
    spark, collector_intake
):
    """Each edge value in each field, one at a time: the collector accepts many of them (a
    time with an offset, a bigint's largest value); Spark parses each of those."""
    events = _sent([[(path, value)] for path in WHOLE_PATHS for value in EDGES])
    assert _unparseable_of_accepted(spark, collector_intake, events) == []


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(
        st.lists(st.tuples(st.sampled_from(WHOLE_PATHS), _JSON), min_size=1, max_size=3),
        min_size=40,
        max_size=40,
    )
)
def test_whatever_the_collector_accepts_parses_whole_under_the_contract(
    spark, collector_intake, edits
):
    """The ground for trusting the collector's check: an event it accepts (the same
    contract version's rules, through its own code) is never unparseable to Spark."""
    assert _unparseable_of_accepted(spark, collector_intake, _sent(edits)) == []
