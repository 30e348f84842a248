"""The hourly DAG pair through the real Airflow scheduler: ingest, then views, over new events.

``python -m bench.batch_dags --events 10000`` (also a phase of
:mod:`bench.batch_throughput`, ``--dag-pair-events``). With the whole local
platform up (``platformctl up``: Kafka, Cassandra, the collector, the speed
layer, serving, the batch step server and Airflow), it:

1. runs the pair once, untimed, so that what the platform's topic already
   held is taken in;
2. produces ``--events`` simulated events of the last ten minutes to the
   platform's events topic (through the collector's intake);
3. triggers ``web_events_ingest`` (bronze, silver, check_silver) through
   Airflow's REST API and waits for the ``web_events_views`` run its silver
   asset schedules (gold, check_gold, publish, reconcile) to end.

It reports the wall time from the trigger to the end of the views run, and
per task: how long it waited to start after the one before it ended
(scheduling), and how long it ran (the step, plus the task process). The
tasks run as the settings say (``WAP_BATCH__RUNNER``): on the step server by
default. Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from core.settings import Settings, load_settings

INGEST, VIEWS = "web_events_ingest", "web_events_views"


def _pair(settings: Settings) -> dict[str, Any]:
    """Trigger the ingest DAG, wait for the views run it feeds; the runs' timings."""
    from platformctl.airflow_rest import (
        runs_since,
        task_instances,
        trigger,
        wait_for_run,
        wait_for_run_fed_by,
    )

    def quiet(line: str) -> None:
        pass

    after = datetime.now(UTC) - timedelta(seconds=1)
    started = time.monotonic()
    run_id = trigger(settings, INGEST)
    if wait_for_run(settings, INGEST, run_id, progress=quiet) != "success":
        raise RuntimeError(f"{INGEST} {run_id} failed: see its task logs")
    state = wait_for_run_fed_by(settings, VIEWS, INGEST, run_id, after=after, progress=quiet)
    seconds = time.monotonic() - started
    if state != "success":
        raise RuntimeError(f"{VIEWS} after {run_id} failed: see its task logs")
    views_run = [r for r in runs_since(settings, VIEWS, after) if r["state"] == "success"][-1]
    tasks = task_instances(settings, INGEST, run_id) + task_instances(
        settings, VIEWS, views_run["dag_run_id"]
    )
    return {"seconds": round(seconds, 1), "tasks": _timeline(tasks)}


def _timeline(tasks: list[dict]) -> list[dict[str, Any]]:
    """Each task in the order it started: its wait after the task before, and its run time."""

    def at(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    rows, previous_end = [], None
    for ti in sorted(tasks, key=lambda t: t["start_date"]):
        start, end = at(ti["start_date"]), at(ti["end_date"])
        rows.append(
            {
                "dag": ti["dag_id"],
                "task": ti["task_id"],
                "waited_s": round((start - previous_end).total_seconds(), 1)
                if previous_end
                else None,
                "ran_s": round((end - start).total_seconds(), 1),
            }
        )
        previous_end = end
    return rows


def run_dag_pair(settings: Settings, events: int = 10_000) -> dict[str, Any]:
    """The pair over ``events`` new events, after an untimed pair that takes in the backlog."""
    from ingest.simulator import SimulatorConfig, generate
    from ingest.simulator.direct import produce_direct
    from platformctl import platform
    from platformctl.airflow_rest import unpause, wait_for_dags

    platform.up(settings)
    wait_for_dags(settings, (INGEST, VIEWS))
    for dag_id in (INGEST, VIEWS):
        unpause(settings, dag_id)
    print("[bench] the pair once, untimed: the topic's backlog", flush=True)
    backlog = _pair(settings)
    now = datetime.now(UTC)
    config = SimulatorConfig(
        seed=int(now.timestamp()),
        events=events,
        rate=events / 600,
        start=now - timedelta(minutes=10),
        duplicate_rate=0.01,
        late_rate=0.005,
        invalid_rate=0.002,
    )
    produced = produce_direct(generate(config), settings)
    print(f"[bench] produced {produced}; the pair through the scheduler ...", flush=True)
    timed = _pair(settings)
    return {
        "events": events,
        "produced": produced,
        "runner": settings.batch.runner,
        "backlog_pair_s": backlog["seconds"],
        **timed,
    }


def _print(result: dict[str, Any]) -> None:
    print(f"\n{'dag':<20} {'task':<14} {'waited s':>9} {'ran s':>7}")
    for row in result["tasks"]:
        waited = "" if row["waited_s"] is None else f"{row['waited_s']:.1f}"
        print(f"{row['dag']:<20} {row['task']:<14} {waited:>9} {row['ran_s']:>7.1f}")
    ran = sum(r["ran_s"] for r in result["tasks"])
    waited = sum(r["waited_s"] or 0 for r in result["tasks"])
    print(
        f"\nthe pair over {result['events']:,} events ({result['runner']} runner): "
        f"{result['seconds']} s from trigger to the views run's end (target <= 90 s); "
        f"tasks ran {ran:.1f} s, waited {waited:.1f} s between them"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.batch_dags", description=__doc__)
    parser.add_argument("--events", type=int, default=10_000)
    args = parser.parse_args(argv)
    result = run_dag_pair(load_settings(), args.events)
    _print(result)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
