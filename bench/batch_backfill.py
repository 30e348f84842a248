"""The cost of backfilling one day: among thirty days of bronze against that day alone.

A phase of :mod:`bench.batch_throughput` (``--backfill-days``). Thirty days
of simulator traffic (``--backfill-day-events`` a day, the faults of
:func:`bench.batch_throughput.simulated_day`) reach bronze in one run per
day, as a daily schedule leaves it, and silver takes them in. Then:

- **among 30**: the backfill of the middle day (``silver --dates D..D``,
  ``check_silver``, ``gold``, ``check_gold``), timed;
- **alone**: the same day's events on a topic and lake of their own, taken in
  the same way, then the same backfill, timed.

The ratio of the two is what the bronze index and the scoped dedupe buy: a
backfill that read all of bronze would cost about thirty times more. The
silver step reports the bronze files and records it read.
"""

from __future__ import annotations

import time
from datetime import timedelta
from itertools import groupby
from pathlib import Path
from typing import Any

from core.settings import Settings

BACKFILL = ("silver", "check_silver", "gold", "check_gold")


def _take_in(spark: Any, settings: Settings, events: list, produce: Any) -> None:
    """Produce ``events`` a day at a time, a bronze run after each day; then silver, gold and
    their gates, as the hourly pipeline would have left them."""
    from batch_layer.runner import run_step
    from pipelines import collector_pipeline

    WEB_EVENTS = collector_pipeline()

    started = time.perf_counter()
    days = 0
    for _, sent in groupby(events, key=lambda e: e.sent_at.date()):
        produce(list(sent), settings)
        run_step(spark, settings, "bronze", WEB_EVENTS, "bench-daily", None)
        days += 1
    print(f"[bench]   {days} daily bronze runs in {time.perf_counter() - started:.0f}s", flush=True)
    for step in ("silver", "check_silver", "gold", "check_gold"):
        run_step(spark, settings, step, WEB_EVENTS, "bench-daily", None)


def run_backfill_phase(
    spark: Any,
    topic_with: Any,
    with_lake: Any,
    run_pipeline: Any,
    root: Path,
    meter: Any,
    days: int,
    day_events: int,
    seed: int,
) -> dict:
    """The backfill of the middle day among ``days`` days of bronze, and of that day alone."""
    from bench.batch_throughput import DAY, simulated_day

    print(f"[bench] backfill: {days} days of {day_events:,} events", flush=True)
    events = simulated_day(day_events * days, seed, days=days)
    day = (DAY + timedelta(days=days // 2)).date()
    alone = [e for e in events if e.time.date() == day or e.sent_at.date() == day]
    out: dict[str, Any] = {"days": days, "day_events": day_events, "day": day.isoformat()}
    for label, chosen in (("among", events), ("alone", alone)):
        settings, _ = topic_with(f"backfill-{label}", [])
        settings = with_lake(settings, root / f"backfill-{label}")
        print(f"[bench]   {label}: {len(chosen):,} messages into bronze, silver", flush=True)
        _take_in(spark, settings, chosen, _produce_chunk)
        steps, results = run_pipeline(
            spark, settings, BACKFILL, f"bench-backfill-{label}", meter, dates=[day]
        )
        silver = results["silver"]
        out[label] = {
            "messages": len(chosen),
            "seconds": round(sum(s["seconds"] for s in steps.values()), 2),
            "steps": steps,
            "events_of_day": silver.events,
            "parsed": silver.parsed,
            "bronze_files": list(silver.bronze_files),
        }
    if out["among"]["events_of_day"] != out["alone"]["events_of_day"]:
        raise RuntimeError(f"The day's rows differ: {out['among']} vs {out['alone']}.")
    out["ratio"] = round(out["among"]["seconds"] / out["alone"]["seconds"], 2)
    return out


def _produce_chunk(events: list, settings: Settings) -> None:
    from ingest.simulator.direct import produce_direct

    for first in range(0, len(events), 50_000):
        produce_direct(events[first : first + 50_000], settings)


def print_backfill(b: dict) -> None:
    """The phase's figures: both sides, their ratio, and the steps side by side."""
    print(
        f"backfill of {b['day']} among {b['days']} days of bronze: "
        f"{b['among']['seconds']:.1f}s (read {b['among']['bronze_files'][0]} of "
        f"{b['among']['bronze_files'][1]} bronze files, parsed {b['among']['parsed']:,}); "
        f"alone: {b['alone']['seconds']:.1f}s (parsed {b['alone']['parsed']:,}); "
        f"ratio {b['ratio']:.2f} (target <= 1.5)"
    )
    for step in b["among"]["steps"]:
        among, alone = b["among"]["steps"][step], b["alone"]["steps"][step]
        print(f"  {step}: {among['seconds']:.1f}s among, {alone['seconds']:.1f}s alone")
