"""``make demo``: the whole platform, end to end, on this machine.

1. ``up``: Kafka, Cassandra, the collector, the streaming speed layer, the
   serving API and dashboard, and Airflow (api-server, scheduler,
   dag-processor); topics, keyspace and tables are created from code.
2. The simulator sends a minute of website traffic through the collector on
   the live clock: duplicates, skewed clocks, invalid events (dead-lettered
   with their reason) and some events that arrive later than the speed
   layer's watermark. A real browser (headless Chromium) visits the demo
   shop page, which loads analytics.js from the collector: page views,
   searches and clicks.
3. The speed layer catches up; the merged answers come from speed alone (no
   batch boundary yet on a fresh platform), missing the too-late events.
4. The batch pipeline runs through the real Airflow scheduler:
   ``web_events_ingest`` (bronze, silver, quality gate) updates the silver
   asset, which schedules ``web_events_views`` (gold, quality gate, publish).
5. The same questions again: the boundary has moved, minutes before it are
   final (batch), the late events are in their true minutes, and the total
   equals the simulator's ground truth.
6. The second pipeline, ``checkouts``: the simulated checkout service
   produces orders and refunds straight to its topic (duplicates, late and
   broken records, two orders by the browser's visitor); the same speed job
   answers them live, ``checkouts_ingest`` and ``checkouts_views`` make them
   final, and the merged orders equal that service's ground truth.
7. The browser's visitor is forgotten in both pipelines with one command.

The demo publishes batch boundaries by the minute with 30 s of allowed
lateness, and its batch DAGs run when triggered (``WAP_BATCH`` overrides
this), so a one-minute run shows the seam; the platform's default is an
hourly pipeline with hourly boundaries and 5 minutes of lateness. Airflow
is restarted if it runs, so that its tasks get these settings.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from functools import partial

from core.settings import PROJECT_ROOT, Settings
from platformctl import platform

__all__ = ["demo_settings", "run_demo"]

TRAFFIC_S = 60
LATE_BY_S = 900  # later than the speed layer's 10-minute watermark


def _say(step: str, text: str) -> None:
    print(f"[demo] {step:<10} {text}", flush=True)


def demo_settings(settings: Settings) -> Settings:
    """``settings`` with minute batch boundaries, unless ``WAP_BATCH`` sets them.

    The batch DAGs then run when triggered only: with a schedule, Airflow would
    start the latest hourly (and daily maintenance) run as soon as it parses
    them, and the demo's own run would queue behind it.
    """
    if "WAP_BATCH" in os.environ:
        return settings
    on_demand = {"schedule": None, "maintenance_schedule": None}
    batch = settings.batch.model_copy(update={"period": "minute", "lateness_s": 30, **on_demand})
    return settings.model_copy(update={"batch": batch})


def run_demo(settings: Settings, events: int = 3000) -> dict[str, int]:
    """Run the story above; return the merged events per minute after the batch run."""
    from ingest.simulator import SimulatorConfig, build_truth, generate, send
    from pipelines import collector_pipeline
    from platformctl.airflow_rest import (
        trigger,
        unpause,
        wait_for_dags,
        wait_for_run,
        wait_for_run_fed_by,
    )
    from platformctl.demo_access import say_access
    from platformctl.install import install
    from serving.report import demo_answers, merged_counts

    settings = demo_settings(settings)
    install(settings)
    # The DAGs' scheduler and the step server their tasks run on take the demo's settings.
    restarted = platform.down(settings, ("batch", *platform.AIRFLOW_SERVICES))
    timings = platform.up(settings)
    if restarted:
        _say("platform", f"restarted {', '.join(restarted)} with the demo's batch settings")
    _say("platform", f"up: {timings} (seconds; 0.0 = already running)")
    for row in platform.status(settings):
        _say("status", f"{row.name}: pid {row.pid}, port {row.port}, {row.detail}")

    # What the range already holds (earlier runs), so this run's truth can be checked.
    window_start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(
        seconds=LATE_BY_S + 120
    )
    baseline = sum(merged_counts(settings, window_start, datetime.now(UTC)).values())

    config = SimulatorConfig(
        seed=int(time.time()),
        events=events,
        rate=events / TRAFFIC_S,
        duplicate_rate=0.03,
        skewed_client_rate=0.1,
        invalid_rate=0.02,
        late_rate=0.01,
        late_by_s=LATE_BY_S,
    )
    source, write_key = next(iter(settings.collector.write_keys.items()))
    url = f"http://127.0.0.1:{settings.collector.port}"
    _say(
        "simulator",
        f"sending {events} events over ~{TRAFFIC_S}s on the live clock: 3% duplicates, "
        f"10% skewed clocks, 2% invalid, 1% arriving {LATE_BY_S // 60} minutes late",
    )
    report = send(
        generate(config),
        url,
        write_key.get_secret_value(),
        rate=config.rate,
        progress=True,
        time_mode="live",
    )
    truth = build_truth(list(report.events))
    _say(
        "collector",
        f"{report.sent} events sent as source {source!r}: {report.accepted} accepted, "
        f"{report.rejected} dead-lettered {dict(Counter(report.rejected_by_reason))}",
    )
    shop = _browse_shop(settings, url, write_key.get_secret_value())
    expected = baseline + sum(truth.events_per_minute.values()) + shop.calls

    browsed = datetime.now(UTC) - timedelta(seconds=5)  # the browser's calls are the newest
    _wait_for_speed(settings, max(max(e.time for e in report.events), browsed))
    _wait_for_shop(settings, shop, window_start)
    speed_only = sum(merged_counts(settings, window_start, datetime.now(UTC)).values())
    _say(
        "speed",
        f"caught up: {speed_only - baseline} of this run's {expected - baseline} valid events "
        "are in the live views; the rest came later than the watermark and wait for batch",
    )
    _say("serving", "before the batch run:")
    print(demo_answers(settings, window_start, datetime.now(UTC)), flush=True)
    _say_shop(settings, shop, window_start)

    web = collector_pipeline().name
    ingest, views = f"{web}_ingest", f"{web}_views"
    wait_for_dags(settings, (ingest, views))
    for dag_id in (ingest, views):
        unpause(settings, dag_id)
    started = datetime.now(UTC)
    run_id = trigger(settings, ingest)
    _say("airflow", f"triggered {ingest} {run_id} (bronze -> silver -> gate) in the scheduler")
    progress = partial(_say, "airflow")
    state = wait_for_run(settings, ingest, run_id, progress=progress)
    if state != "success":
        raise RuntimeError(f"{ingest} {run_id} {state}: see its task logs in the Airflow UI")
    _say("airflow", f"{ingest} updated the {web}.silver asset, which schedules {views}")
    state = wait_for_run_fed_by(settings, views, ingest, run_id, after=started, progress=progress)
    if state != "success":
        raise RuntimeError(f"{views} {state}: see its task logs in the Airflow UI")

    _say("serving", "after the batch run:")
    print(demo_answers(settings, window_start, datetime.now(UTC)), flush=True)
    visitor = _say_order(settings, shop.order)
    merged = merged_counts(settings, window_start, datetime.now(UTC))
    total = sum(merged.values())
    _say(
        "truth",
        f"merged events in the range: {total}; expected {expected} "
        f"({baseline} from earlier runs + {expected - baseline} valid events of this run)",
    )
    if total != expected:
        raise RuntimeError(f"The merged answer differs from the ground truth: {total}, {expected}")
    _say_checkouts(settings, window_start, visitor)
    _say_forget(settings, visitor)
    _say_sql(settings, window_start)
    say_access(settings)
    host = "127.0.0.1" if settings.serving.host == "0.0.0.0" else settings.serving.host
    token = next(iter(settings.serving.api_tokens.values())).get_secret_value()
    _say("done", f"dashboard: http://{host}:{settings.serving.port}/dashboard#token={token}")
    _say("done", f"Airflow: http://127.0.0.1:{settings.airflow.api_port} (DAGs, runs, task logs)")
    prometheus = f"http://127.0.0.1:{settings.monitoring.prometheus_port}"
    _say("done", f"Prometheus: {prometheus} (alerts: {prometheus}/alerts; docs/operations.md)")
    _say("done", "`make status` shows the services; `make down` stops everything.")
    return merged


def _browse_shop(settings: Settings, url: str, write_key: str):
    """The demo shop in headless Chromium, tracked by analytics.js served by the collector."""
    from platformctl.demo_site import browse_shop

    profile = settings.local.state_dir / "demo-browser" / str(os.getpid())
    visit = browse_shop(url, write_key, profile)
    _say(
        "browser",
        f"analytics.js in headless Chromium sent {visit.calls} calls from the demo shop "
        f"(another origin): page views {list(visit.paths)}, searches {list(visit.searches)}, "
        f"clicks {list(visit.clicks)}",
    )
    return visit


def _shop_counts(settings: Settings, visit, start: datetime) -> list[tuple[str, str, str, int]]:
    """(view, measure, key, count in the merged answer) of each of the browser's calls."""
    from serving.report import merged_counts

    asked = [("page_activity", "page_views", p) for p in visit.paths]
    asked += [("search_terms", "searches", q) for q in visit.searches]
    asked += [("clicks", "clicks", c) for c in visit.clicks]
    end = datetime.now(UTC)
    return [
        (
            view,
            measure,
            key,
            sum(merged_counts(settings, start, end, view, measure, (key,)).values()),
        )
        for view, measure, key in asked
    ]


def _wait_for_shop(settings: Settings, visit, start: datetime, timeout_s: float = 60) -> None:
    """Wait until the live views hold each of the browser's calls (the newest events: the
    speed layer's newest event time may already be past them through skewed clocks)."""
    deadline = time.monotonic() + timeout_s
    while any(count == 0 for *_, count in _shop_counts(settings, visit, start)):
        if time.monotonic() > deadline:
            _say("speed", f"the browser's calls are not all in the live views after {timeout_s}s")
            return
        time.sleep(1)


def _say_shop(settings: Settings, visit, start: datetime) -> None:
    """The browser's page views, searches and clicks, as the merged answers have them."""
    for view, measure, key, count in _shop_counts(settings, visit, start):
        _say("browser", f"{view} {key!r}: {count} {measure} in the merged answer")


def _say_order(settings: Settings, order: str) -> str:
    """The browser's order read back from silver with SQL (custom properties included);
    returns the browser's visitor (its anonymousId)."""
    from platformctl.demo_sql import ORDER_SQL, order_from_silver

    row = order_from_silver(settings, order)
    query = " ".join(ORDER_SQL.format(order=order).split())
    _say("silver", f"{query}\n  -> {row}")
    if row is None or row["revenue"] is None:
        raise RuntimeError(f"Silver does not hold the browser's order {order} with its properties")
    return row["anonymousId"]


def _say_checkouts(settings: Settings, start: datetime, visitor: str) -> None:
    """The checkout service's orders (two by ``visitor``) live, then final, against its truth."""
    import json
    from dataclasses import replace

    from pipelines import pipeline
    from pipelines.simulators.checkouts import CheckoutConfig, build_truth, generate, produce
    from platformctl.airflow_rest import (
        trigger,
        unpause,
        wait_for_dags,
        wait_for_run,
        wait_for_run_fed_by,
    )
    from serving.report import merged_counts

    spec = pipeline("checkouts")
    view = spec.views[0]
    config = CheckoutConfig(
        seed=int(time.time()),
        events=600,
        start=datetime.now(UTC) - timedelta(minutes=4),
        rate=2.5,
        late_rate=0.02,
        late_by_s=LATE_BY_S - 60,
    )

    def orders() -> int:
        return sum(
            sum(merged_counts(settings, start, datetime.now(UTC), view, "orders", (c,)).values())
            for c in config.currencies
        )

    baseline = orders()
    records = generate(config)
    visited = [i for i, r in enumerate(records) if r.event and r.event["type"] == "order_completed"]
    for i in visited[:2]:  # the browser's visitor buys, too
        event = records[i].event | {"buyer_id": visitor}
        records[i] = replace(records[i], value=json.dumps(event).encode(), event=event)
    truth = build_truth(records)
    produce(records, settings.kafka.client_config(), spec.topic_of(settings))
    expected = baseline + truth.totals()["orders"]
    _say(
        "checkouts",
        f"the checkout service produced {len(records)} records to {spec.topic_of(settings)} "
        f"({truth.duplicates} duplicates, {truth.invalid} broken, 2% up to "
        f"{(LATE_BY_S - 60) // 60} minutes late): {truth.totals()['orders']} orders",
    )
    newest = max(
        datetime.fromisoformat(r.event["timestamp"]) for r in records if r.event and not r.defect
    )
    _wait_for_speed(settings, newest, view=view)
    _say("checkouts", f"live: {orders() - baseline} of {expected - baseline} orders so far")

    ingest, views = f"{spec.name}_ingest", f"{spec.name}_views"
    wait_for_dags(settings, (ingest, views))
    for dag_id in (ingest, views):
        unpause(settings, dag_id)
    started = datetime.now(UTC)
    run_id = trigger(settings, ingest)
    progress = partial(_say, "airflow")
    if wait_for_run(settings, ingest, run_id, progress=progress) != "success":
        raise RuntimeError(f"{ingest} {run_id} failed: see its task logs in the Airflow UI")
    state = wait_for_run_fed_by(settings, views, ingest, run_id, after=started, progress=progress)
    if state != "success":
        raise RuntimeError(f"{views} {state}: see its task logs in the Airflow UI")
    total = orders()
    _say("checkouts", f"merged orders after {views}: {total}; expected {expected}")
    if total != expected:
        raise RuntimeError(f"The merged orders differ from the ground truth: {total}, {expected}")


def _say_forget(settings: Settings, visitor: str) -> None:
    """Forget the browser's visitor (right to erasure) in every pipeline with one command: its
    rows in each pipeline's silver before and after."""
    from platformctl.demo_sql import rows_in_silver
    from platformctl.forget import forget_user

    before = rows_in_silver(settings, visitor)
    report, code = forget_user(settings, visitor)  # every pipeline that identifies people
    if code != 0:
        raise RuntimeError(f"Forgetting {visitor} failed: {report}")
    after = rows_in_silver(settings, visitor)
    how = ", ".join(
        f"{name}: {r['via']} {r.get('dag_id', '')} {r.get('state', '')}".strip()
        for name, r in report["pipelines"].items()
    )
    _say(
        "forget",
        f"platformctl forget --user {visitor} ({how}): the visitor's rows in silver "
        f"{before} before, {after} after; bronze, rejects and the republished days follow, "
        "and the collector drops the visitor's new events",
    )
    if not all(before.values()) or any(after.values()):
        raise RuntimeError(f"Forgetting {visitor}: {before} rows before, {after} after")


def _say_sql(settings: Settings, start: datetime) -> None:
    """One docs query through ``POST /v1/sql``, and how an analyst connects with Spark Connect."""
    import httpx

    from serving.connect.examples import NOTEBOOK, doc_queries

    host = "127.0.0.1" if settings.serving.host == "0.0.0.0" else settings.serving.host
    token = next(iter(settings.serving.api_tokens.values())).get_secret_value()
    params = {"start": start.isoformat(), "end": datetime.now(UTC).isoformat()}
    answer = httpx.post(
        f"http://{host}:{settings.serving.port}/v1/sql",
        json={"sql": doc_queries()["top_pages"], "params": params, "max_rows": 10},
        headers={"Authorization": f"Bearer {token}"},
        timeout=120,
    )
    if answer.status_code != 200:
        raise RuntimeError(f"POST /v1/sql answered {answer.status_code}: {answer.text}")
    body = answer.json()
    rows = "\n".join(
        f"  {path:<40} {views:>6} views  ~{round(visitors or 0)} visitors"
        for path, views, visitors in body["rows"][:5]
    )
    _say("sql", f"POST /v1/sql top_pages (docs/sql.md) in {body['seconds']}s:\n{rows}")
    _say(
        "sql",
        "from any machine with `pip install pyspark-client==4.1.3`: "
        f'SparkSession.builder.remote("{settings.sql.url()}").getOrCreate()'
        '.sql("SHOW VIEWS").show()',
    )
    notebook = NOTEBOOK.relative_to(PROJECT_ROOT)
    _say(
        "sql",
        f"the analysts' notebook: {notebook} (this week's top pages, campaigns, a funnel, "
        "events per hour from both layers); run it headless with "
        f"`SQL_SERVER=sc://localhost:{settings.sql.port} WAP_SQL__TOKEN=... "
        f".platform/analyst-venv/bin/jupyter-execute {notebook}`",
    )


def _wait_for_speed(
    settings: Settings, newest: datetime, timeout_s: float = 180, view: str = "site_activity"
) -> None:
    """Until the speed layer's progress of ``view`` reflects ``newest`` (or the timeout)."""
    from platformctl.services.speed import progress

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        seen = progress(settings).get(view, {}).get("max_event_time")
        if seen and seen.replace(tzinfo=UTC) >= newest.replace(microsecond=0):
            return
        time.sleep(2)
    _say("speed", f"still behind {newest.isoformat()} after {timeout_s:.0f}s; going on")
