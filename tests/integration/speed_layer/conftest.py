"""A speed layer of its own per test: topic, keyspace, checkpoints."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from core.settings import (
    KafkaSettings,
    LakeSettings,
    Settings,
    SpeedSettings,
)
from tests.support.ports import free_port
from tests.support.speed import SpeedJob, wait_until, with_short_replays


@pytest.fixture
def speed_settings(
    local_platform: Settings, laid_out_keyspaces, unique_name: str, tmp_path
) -> Iterator[Settings]:
    from confluent_kafka.admin import AdminClient

    from ingest.topics import ensure_topics, platform_topics

    topic = unique_name.replace("_", "-")
    kafka = KafkaSettings(
        **(
            local_platform.kafka.model_dump()
            | {"events_topic": f"{topic}.events", "dlq_topic": f"{topic}.dlq", "partitions": 2}
            | {"suppressions_topic": f"{topic}.suppressions"}
        )
    )
    settings = local_platform.model_copy(
        update={
            "kafka": kafka,
            "lake": LakeSettings(
                root=str(tmp_path / "lake"), checkpoint_root=str(tmp_path / "checkpoints")
            ),
            "speed": SpeedSettings(
                trigger="1 second", metrics_port=free_port(), pipelines=["web_events"]
            ),
        }
    )
    admin = AdminClient(kafka.client_config())
    ensure_topics(admin, platform_topics(kafka))
    with laid_out_keyspaces.lend(settings) as settings:
        yield settings
    admin.delete_topics([kafka.events_topic, kafka.dlq_topic, kafka.suppressions_topic])


@pytest.fixture
def read_view(cassandra_session):
    """``read_view(settings, view)`` -> {(minute, key): row} from the by-key table of the
    version serving reads (``speed_versions``)."""

    def read(settings: Settings, view: str) -> dict:
        from layout import ViewTables, read_speed_versions
        from views import view as view_spec

        spec = view_spec(view)
        keyspace = settings.cassandra.keyspace
        (version,) = read_speed_versions(cassandra_session, keyspace, [view]).values()
        tables = ViewTables(spec, keyspace, "speed", table_version=version)
        rows = cassandra_session.execute(f"SELECT * FROM {tables.by_key}")
        return {(row.window_start, *(getattr(row, k) for k in spec.keys)): row for row in rows}

    return read


def _minute(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:00Z")


def _hll_estimate(blob: bytes) -> float:
    from datasketches import hll_sketch

    return hll_sketch.deserialize(bytes(blob)).get_estimate()


def _assert_views_match_truth(truth, read_view, settings) -> None:
    pages = read_view(settings, "page_activity")
    got = defaultdict(dict)
    for (start, path), row in pages.items():
        got[_minute(start)][path] = row.page_views
    assert dict(got) == truth.page_views

    site = read_view(settings, "site_activity")
    assert {_minute(s): r.events for (s, _), r in site.items()} == truth.events_per_minute
    site_page_views = {_minute(s): r.page_views for (s, _), r in site.items() if r.page_views}
    assert site_page_views == {m: n for m, n in truth.page_views_per_minute.items() if n}

    for view, expected, measure in [
        ("search_terms", truth.searches, "searches"),
        ("clicks", truth.clicks, "clicks"),
    ]:
        got = defaultdict(dict)
        for (start, key), row in read_view(settings, view).items():
            got[_minute(start)][key] = getattr(row, measure)
        assert dict(got) == expected, view

    # Load times: count, sum and max per page over the run.
    load = defaultdict(lambda: [0, 0.0, 0.0])
    for (_, path), row in pages.items():
        if row.load_count:
            load[path][0] += row.load_count
            load[path][1] += row.load_sum
            load[path][2] = max(load[path][2], row.load_max)
    for path, stats in truth.load_time.items():
        assert load[path][0] == stats.count
        assert load[path][1] == pytest.approx(stats.sum_ms)
        assert load[path][2] == pytest.approx(stats.max_ms)

    # Distinct visitors: HLL sketches within their error bound (lgK 12: ~1.6% RSE; 3 sigma).
    for (start, _), row in site.items():
        expected = truth.visitors_per_minute[_minute(start)]
        assert abs(_hll_estimate(row.visitors) - expected) <= max(2, 0.05 * expected)


@pytest.fixture
def views_match_truth(read_view):
    """``views_match_truth(truth, settings)``: every speed view equals the simulator's truth."""

    def check(truth, settings: Settings) -> None:
        _assert_views_match_truth(truth, read_view, settings)

    return check


@pytest.fixture
def speed_job(spark) -> SpeedJob:
    """Starts ``python -m speed_layer`` processes; drains in this process's Spark."""
    return SpeedJob(spark)


@pytest.fixture
def replay_settings(speed_settings: Settings) -> Settings:
    """``speed_settings`` with short replay periods (:func:`with_short_replays`)."""
    return with_short_replays(speed_settings)


@pytest.fixture
def speed_version(cassandra_session):
    """``speed_version(settings, view)``: the version of the speed tables serving reads."""
    from layout import read_speed_versions

    def read(settings: Settings, view: str) -> int:
        keyspace = settings.cassandra.keyspace
        return read_speed_versions(cassandra_session, keyspace, [view])[view]

    return read


@pytest.fixture
def wait_for():
    """``wait_for(check, timeout_s, what, job=None)``: :func:`wait_until`."""
    return wait_until
