"""Rows for the serving benchmark: 31 days of 200 pages and the whole site, up to now.

The layout a user's platform has after a month of hourly batch runs:

- batch rows of every view at three grains under one version per day
  (``batch_days`` pointing at it, ``rollups`` true) up to the boundary, the
  start of the previous hour (as an hourly batch leaves it): day rows for
  every day, hour rows for every hour, and minute rows where a question's
  ragged edges read them (around now - 1 day and now - 30 days, and the three
  hours before the boundary);
- speed minute rows from the boundary to now, and a ``speed_progress`` row
  per view (newest event now, watermark now - 10 minutes, the speed layer's
  default delay);
- :func:`speed_writer`: while the benchmark runs, a process upserts the
  current minute's rows and the progress every few seconds, as the speed
  job's micro-batches do, so serving sees speed progress as in production.

Minute rows hold realistic sketches (HLL of the minute's visitors, KLL of
its load times); hour rows over minutes are the merge of those minutes
(:func:`serving.merge.rollup_rows`), day rows the merge of their hours. Hour
rows where no minutes are stored are drawn from a pool of merged hours of
the same page size, so loading stays within about two minutes; every row
has the size and shape of a real one. :func:`questions`: what the benchmark asks of
them (HTTP paths, and the raw reads that answer the same).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from core.settings import Settings
from serving.timerange import to_ms

__all__ = [
    "DASHBOARD_RANGES",
    "PAGES",
    "Layout",
    "load",
    "page_rows",
    "questions",
    "speed_writer",
]

PAGES = 200
DAYS = 31
_POOL = 3
"""Variants of each pooled hour (per page size), so hours differ."""


class Layout:
    """The instants the data is laid out around, from one ``now`` (minute-aligned)."""

    def __init__(self, now: datetime) -> None:
        self.now = now.replace(second=0, microsecond=0)
        self.boundary = self.now.replace(minute=0) - timedelta(hours=1)
        self.first_day = (self.now - timedelta(days=DAYS)).replace(hour=0, minute=0)
        edges = (timedelta(days=1), timedelta(days=30))
        self.minute_spans = [
            (self.now - edge - timedelta(hours=2), self.now - edge + timedelta(hours=2))
            for edge in edges
        ] + [(self.boundary - timedelta(hours=3), self.boundary)]
        """Where batch minute rows are stored: the ragged edges of the questions."""


def _views(page: int) -> int:
    return max(1, int(200 / (page + 1)))


def _minute_sketches(views: int, rng: random.Random) -> tuple[bytes, bytes, list[float]]:
    import datasketches as ds

    from views.common import HLL_LG_K

    hll = ds.hll_sketch(HLL_LG_K, ds.tgt_hll_type.HLL_4)
    kll = ds.kll_doubles_sketch(200)
    loads = [rng.lognormvariate(5.5, 0.5) for _ in range(views)]
    for _ in range(views):
        hll.update(f"u{rng.randrange(20 * views + 50)}")
    for load in loads:
        kll.update(load)
    return hll.serialize_compact(), kll.serialize(), loads


def page_rows(start: datetime, rng: random.Random) -> list[dict]:
    """One minute of ``page_activity``: a row per page, Zipf-like views."""
    rows = []
    for p in range(PAGES):
        views = _views(p)
        hll, kll, loads = _minute_sketches(views, rng)
        rows.append(
            {
                "window_start": start,
                "path": f"/p/{p}",
                "page_views": views,
                "visitors": hll,
                "load_count": len(loads),
                "load_sum": sum(loads),
                "load_max": max(loads),
                "load_sketch": kll,
            }
        )
    return rows


def site_rows(pages: list[dict]) -> list[dict]:
    """The whole site's row of the minute the page rows hold."""
    from views.sketches import hll_bytes, hll_merged

    views = sum(r["page_views"] for r in pages)
    return [
        {
            "window_start": pages[0]["window_start"],
            "site": "all",
            "events": views + views // 4,
            "page_views": views,
            "sessions_started": views // 10,
            "visitors": hll_bytes(hll_merged(r["visitors"] for r in pages)),
        }
    ]


def _minutes(lo: datetime, hi: datetime) -> Iterable[datetime]:
    t = lo
    while t < hi:
        yield t
        t += timedelta(minutes=1)


def _hours(lo: datetime, hi: datetime) -> Iterable[datetime]:
    t = lo
    while t < hi:
        yield t
        t += timedelta(hours=1)


def _write(session, tables, rows: list[dict], version: int | None) -> None:
    from cassandra.concurrent import execute_concurrent_with_args

    spec = tables.spec
    measures = [m.name for m in spec.measures]
    bound = [
        tables.bind(
            r["window_start"], [r[k] for k in spec.keys], [r[m] for m in measures], version=version
        )
        for r in rows
    ]
    for text, args in (
        (tables.insert_by_key(), [a for a, _ in bound]),
        (tables.insert_by_minute(), [b for _, b in bound]),
    ):
        for ok, result in execute_concurrent_with_args(
            session, session.prepare(text), args, concurrency=128
        ):
            if not ok:
                raise result


def load(settings: Settings, layout: Layout, progress=print) -> dict[str, int]:
    """Create the keyspace's tables and write every row; returns rows written per kind."""
    from core.cassandra import connect, ensure_keyspace
    from layout import PointerTables, ViewTables, create_statements
    from serving.merge import rollup_rows
    from speed_layer.sink import write_rows
    from views import view

    keyspace = settings.cassandra.keyspace
    cluster, session = connect(settings.cassandra)
    counts: dict[str, int] = {}
    rng = random.Random(1)
    version = int(layout.now.timestamp())
    try:
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)  # a fresh layout
        ensure_keyspace(session, keyspace, settings.cassandra.replication)
        for statement in create_statements(keyspace, settings.speed.ttl_s):
            session.execute(statement)
        specs = {name: view(name) for name in ("page_activity", "site_activity")}

        def batch(name: str, grain: str, rows: list[dict]) -> None:
            tables = ViewTables(specs[name], keyspace, "batch", grain=grain)  # type: ignore[arg-type]
            _write(session, tables, rows, version)
            counts[f"batch {name} {grain}"] = counts.get(f"batch {name} {grain}", 0) + len(rows)

        # Minute rows where ragged edges read them, and their hours.
        minute_hours: dict[str, list[dict]] = {"page_activity": [], "site_activity": []}
        for lo, hi in layout.minute_spans:
            progress(f"  batch minutes {lo:%m-%d %H:%M} - {hi:%H:%M}")
            pages, sites = [], []
            for m in _minutes(lo, hi):
                minute = page_rows(m, rng)
                pages += minute
                sites += site_rows(minute)
            batch("page_activity", "minute", pages)
            batch("site_activity", "minute", sites)
            minute_hours["page_activity"] += rollup_rows(specs["page_activity"], pages, "hour")
            minute_hours["site_activity"] += rollup_rows(specs["site_activity"], sites, "hour")
        covered = {r["window_start"] for r in minute_hours["page_activity"]}
        # A pool of merged hours per page size, for the hours without stored minutes.
        progress("  pooled hours")
        pool: dict[int, list[dict]] = {}
        for variant in range(_POOL):
            hour = layout.first_day + timedelta(hours=variant)
            pages = [
                r for m in _minutes(hour, hour + timedelta(hours=1)) for r in page_rows(m, rng)
            ]
            for row in rollup_rows(specs["page_activity"], pages, "hour"):
                pool.setdefault(int(row["path"].rsplit("/", 1)[1]), []).append(row)
        site_pool = [
            rollup_rows(
                specs["site_activity"], site_rows([pool[p][v] for p in range(PAGES)]), "hour"
            )[0]
            for v in range(_POOL)
        ]
        for name in ("page_activity", "site_activity"):
            hours = list(minute_hours[name])
            for hour in _hours(layout.first_day, layout.boundary):
                if hour in covered:
                    continue
                v = (hour.day * 24 + hour.hour) % _POOL
                if name == "page_activity":
                    hours += [{**pool[p][v], "window_start": hour} for p in range(PAGES)]
                else:
                    hours.append({**site_pool[v], "window_start": hour})
            progress(f"  batch {name}: {len(hours)} hour rows, their days")
            batch(name, "hour", hours)
            batch(name, "day", rollup_rows(specs[name], hours, "day"))
        pointers = PointerTables(keyspace)
        set_day = session.prepare(pointers.insert_day)
        set_boundary = session.prepare(pointers.insert_boundary)
        now = datetime.now(UTC)
        day = layout.first_day
        while day <= layout.boundary:
            for name in specs:
                session.execute(set_day, (name, day.date(), version, 1, now, True))
            day += timedelta(days=1)
        for name in specs:
            session.execute(set_boundary, (name, layout.boundary, version, "bench", now))
        # Speed minutes from the boundary to now, and the progress.
        progress("  speed minutes")
        for name in specs:
            rows = []
            for m in _minutes(layout.boundary, layout.now + timedelta(minutes=1)):
                minute = page_rows(m, rng)
                rows += minute if name == "page_activity" else site_rows(minute)
            tables = ViewTables(specs[name], keyspace, "speed")
            counts[f"speed {name}"] = write_rows(rows, tables, settings.cassandra, batch_id=1)
        _progress(session, keyspace, layout.now, generation=1)
    finally:
        cluster.shutdown()
    return counts


def _progress(session, keyspace: str, newest: datetime, generation: int) -> None:
    watermark = newest - timedelta(minutes=10)
    for name in ("page_activity", "site_activity"):
        session.execute(
            f"INSERT INTO {keyspace}.speed_progress (view_name, max_event_time, watermark, "
            "heartbeat_at, kafka_lag, run_generation) VALUES (%s, %s, %s, %s, %s, %s)",
            (name, newest, watermark, datetime.now(UTC), 0, generation),
        )


def speed_writer(args: tuple) -> None:
    """Upsert the current minute's rows and the progress every ``every_s`` until ``seconds``
    have passed (a process of its own: the speed job's micro-batches)."""
    settings_json, every_s, seconds, report = args
    from core.cassandra import connect
    from layout import ViewTables
    from speed_layer.sink import write_rows
    from views import view

    settings = Settings.model_validate_json(settings_json)
    keyspace = settings.cassandra.keyspace
    cluster, session = connect(settings.cassandra)
    page, site = view("page_activity"), view("site_activity")
    rng = random.Random(2)
    batches, end = 0, time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            now = datetime.now(UTC)
            minute = page_rows(now.replace(second=0, microsecond=0), rng)
            batches += 1
            write_rows(minute, ViewTables(page, keyspace, "speed"), settings.cassandra, batches)
            write_rows(
                site_rows(minute), ViewTables(site, keyspace, "speed"), settings.cassandra, batches
            )
            _progress(session, keyspace, now, generation=1)
            time.sleep(max(0.0, every_s - (datetime.now(UTC) - now).total_seconds()))
    finally:
        cluster.shutdown()
        report.put(batches)


DASHBOARD_RANGES = {60: 0.4, 180: 0.2, 1440: 0.2, 10080: 0.1, 43200: 0.1}
"""The dashboard's range choices (minutes) and the share of viewers on each."""


def questions(layout: Layout) -> dict[str, tuple[list[str], list[tuple]]]:
    """Per question: the HTTP paths (cycled through) and the raw reads' questions."""
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    rng = random.Random(3)
    top = "/v1/top?view=page_activity&measure=page_views"
    now = to_ms(layout.now)
    out: dict[str, tuple[list[str], list[tuple]]] = {}
    lo, hi = layout.boundary - timedelta(minutes=30), layout.boundary + timedelta(minutes=30)
    out["ts-straddle"] = (
        [
            f"/v1/timeseries?view=page_activity&key=/p/{p}&start={lo:{fmt}}&end={hi:{fmt}}"
            for p in range(PAGES)
        ],
        [("series", to_ms(lo), to_ms(hi), f"/p/{p}") for p in range(PAGES)],
    )
    for label, minutes in (("15 min", 15), ("1 day", 1440), ("30 days", 30 * 1440)):
        out[f"top-10 pages {label}"] = (
            [f"{top}&n=10&start=now-{minutes}m&end=now"],
            [("top", now - minutes * 60_000, now, None)],
        )
    starts = [rng.randrange(1440, 1440 + 6 * 60) for _ in range(3000)]
    out["top-N pages 1 day uncached"] = (
        [f"{top}&n={1 + i % 100}&start=now-{m}m&end=now" for i, m in enumerate(starts)],
        [("top", now - m * 60_000, now, None) for m in starts[:200]],
    )
    out["top-5 slowest 1 min"] = (
        ["/v1/top?view=page_activity&measure=load_sketch&n=5&start=now-1m&end=now"],
        [("slowest", now - 60_000, now, None)],
    )
    out["reach 30 days"] = (
        [f"/v1/reach?view=page_activity&key=/p/{p}&start=now-30d&end=now" for p in range(PAGES)],
        [("reach", now - 30 * 86_400_000, now, f"/p/{p}") for p in range(PAGES)],
    )
    mix = []
    for minutes, share in DASHBOARD_RANGES.items():
        granularity = "day" if minutes > 2880 else "hour" if minutes > 180 else "minute"
        since = f"now-{minutes}m"
        refresh = [
            f"/v1/timeseries?view=site_activity&start={since}&end=now&granularity={granularity}"
            "&measure=events&measure=page_views&measure=visitors",
            f"/v1/reach?view=site_activity&start={since}&end=now",
            f"{top}&n=10&start={since}&end=now",
            "/v1/top?view=page_activity&measure=load_sketch&n=5&start=now-1m&end=now",
        ]
        mix += refresh * int(share * 100)
    rng.shuffle(mix)
    out["dashboard"] = (mix, [])
    return out
