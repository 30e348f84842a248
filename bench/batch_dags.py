"""Each pipeline's DAG pair through the real Airflow scheduler: ingest, then views, over new
events, and what each pair costs the step server and Airflow.

``python -m bench.batch_dags --events 10000 [--pipelines web_events checkouts]`` (the web
pair is also a phase of :mod:`bench.batch_throughput`, ``--dag-pair-events``). With the
whole local platform up (``platformctl up``: Kafka, Cassandra, the collector, the speed
layer, serving, the batch step server and Airflow), for each pipeline in turn it:

1. runs the pair once, untimed, so that what the pipeline's topic already held is taken in;
2. produces ``--events`` simulated events of the last ten minutes to the pipeline's topic
   (web events through the collector's intake, checkouts as the checkout service does);
3. triggers ``<pipeline>_ingest`` (bronze, silver, check_silver) through Airflow's REST
   API and waits for the ``<pipeline>_views`` run its silver asset schedules (gold,
   check_gold, publish, reconcile) to end.

It reports the wall time from the trigger to the end of the views run; per task how long it
waited to start after the one before it ended (scheduling) and how long it ran (the step,
plus the task process); and, over the pair, the CPU seconds of the step server's process
group and of Airflow's components, and the step server's largest resident memory. The
tasks run as the settings say (``WAP_BATCH__RUNNER``): on the step server by default.
Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.procs import group_cpu_seconds, group_rss_mb
from core.settings import Settings, load_settings

INGEST, VIEWS = "web_events_ingest", "web_events_views"


def _dags(pipeline: str) -> tuple[str, str]:
    return f"{pipeline}_ingest", f"{pipeline}_views"


def _groups(settings: Settings) -> dict[str, list[int]]:
    """Process groups of the step server and of Airflow's components (each its own session)."""
    from platformctl.services import airflow, batch

    step_server = batch.process(settings).pid()
    components = [airflow.process(settings, c).pid() for c in airflow.COMPONENTS]
    return {
        "step_server": [step_server] if step_server else [],
        "airflow": [pid for pid in components if pid],
    }


class _Cost:
    """CPU seconds of the groups over a block, and the step server's largest RSS in it."""

    def __init__(self, settings: Settings) -> None:
        self.groups = _groups(settings)
        self.rss_mb = 0.0
        self._stop = threading.Event()

    def _cpu(self) -> dict[str, float]:
        return {
            name: sum(group_cpu_seconds(pid) for pid in pids) for name, pids in self.groups.items()
        }

    def _sample(self) -> None:
        while not self._stop.wait(1.0):
            rss = sum(group_rss_mb(pid) for pid in self.groups["step_server"])
            self.rss_mb = max(self.rss_mb, rss)

    def __enter__(self) -> _Cost:
        self._before = self._cpu()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        after = self._cpu()
        self.cpu_s = {name: round(after[name] - self._before[name], 1) for name in after}


def _pair(settings: Settings, pipeline: str = "web_events") -> dict[str, Any]:
    """Trigger the pipeline's ingest DAG, wait for the views run it feeds; the runs' timings."""
    from platformctl.airflow_rest import (
        runs_since,
        task_instances,
        trigger,
        wait_for_run,
        wait_for_run_fed_by,
    )

    def quiet(line: str) -> None:
        pass

    ingest, views = _dags(pipeline)
    after = datetime.now(UTC) - timedelta(seconds=1)
    started = time.monotonic()
    run_id = trigger(settings, ingest)
    if wait_for_run(settings, ingest, run_id, progress=quiet) != "success":
        raise RuntimeError(f"{ingest} {run_id} failed: see its task logs")
    state = wait_for_run_fed_by(settings, views, ingest, run_id, after=after, progress=quiet)
    seconds = time.monotonic() - started
    if state != "success":
        raise RuntimeError(f"{views} after {run_id} failed: see its task logs")
    views_run = [r for r in runs_since(settings, views, after) if r["state"] == "success"][-1]
    tasks = task_instances(settings, ingest, run_id) + task_instances(
        settings, views, views_run["dag_run_id"]
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


def _produce(settings: Settings, pipeline: str, events: int) -> int:
    """``events`` simulated events of the last ten minutes on the pipeline's topic."""
    now = datetime.now(UTC)
    if pipeline == "checkouts":
        from pipelines import pipeline as declared
        from pipelines.simulators.checkouts import CheckoutConfig, generate, produce

        records = generate(
            CheckoutConfig(
                seed=int(now.timestamp()),
                events=events,
                start=now - timedelta(minutes=10),
                rate=events / 600,
            )
        )
        topic = declared(pipeline).topic_of(settings)
        return produce(records, settings.kafka.client_config(), topic)
    from ingest.simulator import SimulatorConfig, generate
    from ingest.simulator.direct import produce_direct

    config = SimulatorConfig(
        seed=int(now.timestamp()),
        events=events,
        rate=events / 600,
        start=now - timedelta(minutes=10),
        duplicate_rate=0.01,
        late_rate=0.005,
        invalid_rate=0.002,
    )
    return sum(produce_direct(generate(config), settings).values())


def run_dag_pair(
    settings: Settings, events: int = 10_000, pipeline: str = "web_events"
) -> dict[str, Any]:
    """The pipeline's pair over ``events`` new events, after an untimed pair that takes in
    the backlog."""
    from platformctl import platform
    from platformctl.airflow_rest import unpause, wait_for_dags

    platform.up(settings)
    dags = _dags(pipeline)
    wait_for_dags(settings, dags)
    for dag_id in dags:
        unpause(settings, dag_id)
    print(f"[bench] {pipeline}: the pair once, untimed: the topic's backlog", flush=True)
    backlog = _pair(settings, pipeline)
    produced = _produce(settings, pipeline, events)
    print(
        f"[bench] {pipeline}: produced {produced}; the pair through the scheduler ...", flush=True
    )
    with _Cost(settings) as cost:
        timed = _pair(settings, pipeline)
    return {
        "pipeline": pipeline,
        "events": events,
        "produced": produced,
        "runner": settings.batch.runner,
        "backlog_pair_s": backlog["seconds"],
        "cpu_s": cost.cpu_s,
        "step_server_rss_mb": cost.rss_mb,
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
        f"\n{result.get('pipeline', 'web_events')}: the pair over {result['events']:,} events "
        f"({result['runner']} runner): {result['seconds']} s from trigger to the views run's "
        f"end (target <= 90 s); tasks ran {ran:.1f} s, waited {waited:.1f} s between them"
    )
    if "cpu_s" in result:
        print(
            f"  CPU seconds: step server {result['cpu_s']['step_server']}, Airflow "
            f"{result['cpu_s']['airflow']}; step server RSS max {result['step_server_rss_mb']} MB"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.batch_dags", description=__doc__)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--pipelines", nargs="+", default=["web_events", "checkouts"])
    args = parser.parse_args(argv)
    settings = load_settings()
    results = [run_dag_pair(settings, args.events, name) for name in args.pipelines]
    for result in results:
        _print(result)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
