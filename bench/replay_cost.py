"""Kappa replay of a retained log: replay rate, time to switch, against a plain Spark read.

Runs on the local platform (it brings Kafka and Cassandra up if needed), on a
bench-only topic, keyspace and checkpoints:

1. one simulated day of ``--events`` events is produced to the topic (the
   retained log);
2. the real speed job (``python -m speed_layer``) starts on it: its first run
   reads the whole log (the **first pass**, alone on the machine);
3. ``python -m speed_layer replay --from earliest`` is asked while the job
   runs: the **replay** reads the whole log again into version 1, beside the
   live query, and the job switches serving to it once its lag has stayed
   within ``replay_max_lag`` for ``replay_sustain_s``. Timed: the request,
   the replay's first progress, its catch-up (lag within the threshold) and the
   switch; the replay's rate is the log's records over request -> caught up
   (the job's poll and the query's start included);
4. **raw**: a plain Spark streaming read of the same topic that only counts
   records (same session settings), events/s.

The replayed version is checked against the first: every view's total of its
count measure must be equal. Figures are printed (JSON last) and written to
``.platform/artifacts/bench_replay.json``; nothing is asserted.

    .venv/bin/python -m bench.replay_cost --events 1000000
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from bench.batch_throughput import _topic_settings, produce_day
from bench.procs import group_rss_mb
from bench.speed_freshness import ceiling
from core.settings import (
    PROJECT_ROOT,
    LakeSettings,
    Settings,
    child_env,
    load_settings,
)
from pipelines import pipeline
from platformctl import platform

ARTIFACT = PROJECT_ROOT / ".platform" / "artifacts" / "bench_replay.json"
# (view, count measure) whose totals must agree between the versions.
_TOTALS = (
    ("site_activity", "events"),
    ("page_activity", "page_views"),
    ("clicks", "clicks"),
    ("search_terms", "searches"),
)


def _settings(base: Settings, run: str, folder: Path) -> Settings:
    settings = _topic_settings(base, f"bench-replay-{run}")
    speed = settings.speed.model_copy(
        update={
            "replay_sustain_s": 10.0,
            "replay_grace_s": 30.0,
            "replay_poll_s": 2.0,
            "pipelines": ["web_events"],  # the pipeline whose topic it fills
        }
    )
    return settings.model_copy(
        update={
            "cassandra": settings.cassandra.model_copy(update={"keyspace": f"bench_replay_{run}"}),
            "lake": LakeSettings(root=str(folder / "lake"), checkpoint_root=str(folder / "cp")),
            "speed": speed,
        }
    )


def _totals(session, settings: Settings, version: int) -> dict[str, int]:
    from layout import ViewTables
    from views import view

    out = {}
    for name, measure in _TOTALS:
        tables = ViewTables(view(name), settings.cassandra.keyspace, "speed", table_version=version)
        rows = session.execute(f"SELECT {measure} FROM {tables.by_minute}")
        out[name] = sum(getattr(r, measure) or 0 for r in rows)
    return out


def _progress(session, settings: Settings) -> tuple[int | None, int]:
    """(the live run's Kafka lag, its input rows so far) from ``speed_progress``."""
    row = session.execute(
        f"SELECT kafka_lag, batch_id FROM {settings.cassandra.keyspace}.speed_progress "
        "WHERE view_name = 'site_activity'"
    ).one()
    return (row.kafka_lag, row.batch_id) if row else (None, -1)


def _replay_row(session, settings: Settings, generation: int):
    return session.execute(
        f"SELECT state, kafka_lag, progress_at, switched_at FROM "
        f"{settings.cassandra.keyspace}.speed_runs WHERE checkpoint_name = %s AND generation = %s",
        (pipeline("web_events").stream_settings(settings).speed.checkpoint_name, generation),
    ).one()


def first_pass(session, settings: Settings, job: subprocess.Popen, records: int) -> float:
    """Seconds until the live run has read the whole log (its lag at 0 after a batch)."""
    started = time.monotonic()
    while True:
        if job.poll() is not None:
            raise RuntimeError(f"the speed job exited with {job.returncode}")
        lag, batch = _progress(session, settings)
        if lag == 0 and batch >= 0:
            return time.monotonic() - started
        print(f"[bench]   first pass: lag {lag}, batch {batch}", flush=True)
        time.sleep(2)


def replay(session, settings: Settings, job: subprocess.Popen) -> dict:
    """Ask for a replay and time it: request, start, caught up, switch."""
    from layout import read_speed_versions

    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "speed_layer", "replay", "--from", "earliest"],
        env=child_env(settings),
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    requested = time.monotonic() - t0
    generation = 1
    print(f"[bench] {done.stdout.strip()}", flush=True)
    started = caught = None
    peak_rss = 0.0
    while True:
        peak_rss = max(peak_rss, group_rss_mb(job.pid))
        if job.poll() is not None:
            raise RuntimeError(f"the speed job exited with {job.returncode}")
        now = time.monotonic() - t0
        row = _replay_row(session, settings, generation)
        if started is None and row is not None and row.progress_at is not None:
            started = now
        lag = row.kafka_lag if row is not None else None
        if caught is None and lag is not None and lag <= settings.speed.replay_max_lag:
            caught = now
        version = read_speed_versions(session, settings.cassandra.keyspace, ["site_activity"])
        if version["site_activity"] == 1:
            switched = now
            break
        print(f"[bench]   replay: {now:5.0f}s, lag {lag}", flush=True)
        time.sleep(1)
    return {
        "request_s": round(requested, 1),
        "first_progress_s": round(started, 1) if started else None,
        "caught_up_s": round(caught, 1) if caught else None,
        "switched_s": round(switched, 1),
        "caught_up_to_switch_s": round(switched - caught, 1) if caught else None,
        "job_rss_mb_peak_during_replay": peak_rss,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replay_cost", description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=71)
    parser.add_argument("--keep", action="store_true", help="keep the topic and keyspace")
    args = parser.parse_args(argv)

    base = load_settings()
    platform.up(base, ["kafka", "cassandra"])
    run = uuid.uuid4().hex[:8]
    folder = PROJECT_ROOT / ".platform" / "bench" / f"replay-{run}"
    settings = _settings(base, run, folder)

    from confluent_kafka.admin import AdminClient

    from core.cassandra import connect, ensure_keyspace
    from ingest.topics import ensure_topics, platform_topics
    from layout import create_tables

    admin = AdminClient(settings.kafka.client_config())
    ensure_topics(admin, platform_topics(settings.kafka))
    cluster, session = connect(settings.cassandra)
    ensure_keyspace(
        session, settings.cassandra.keyspace, {"class": "SimpleStrategy", "replication_factor": 1}
    )
    create_tables(settings)
    log = folder / "speed.log"
    job = None
    try:
        print(f"[bench] simulating {args.events:,} events", flush=True)
        end = produce_day(settings, args.events, args.seed)
        records = sum(end.values())
        folder.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as handle:
            job = subprocess.Popen(
                [sys.executable, "-m", "speed_layer", "--instance", "bench"],
                env=child_env(settings),
                cwd=PROJECT_ROOT,
                stdout=subprocess.DEVNULL,
                stderr=handle,
                start_new_session=True,
            )
        first_s = first_pass(session, settings, job, records)
        before = _totals(session, settings, 0)
        rss_alone = group_rss_mb(job.pid)
        print(f"[bench] first pass: {records:,} records in {first_s:.1f}s", flush=True)
        timings = replay(session, settings, job)
        after = _totals(session, settings, 1)
        job.send_signal(signal.SIGTERM)
        job.wait(120)
        job = None
        # From the request's end (the job starts the query at its next poll) to caught up.
        replay_s = timings["caught_up_s"] - timings["request_s"]
        raw = ceiling(settings, records)
        result = {
            "records": records,
            "first_pass_s": round(first_s, 1),
            "first_pass_events_per_s": round(records / first_s),
            "job_rss_mb_live_only": rss_alone,
            "replay": timings,
            "replay_events_per_s": round(records / replay_s) if replay_s > 0 else None,
            "raw_read_events_per_s": raw["events_per_s"],
            "replay_vs_raw": round(records / replay_s / raw["events_per_s"], 4)
            if replay_s > 0 and raw["events_per_s"]
            else None,
            "versions_agree": before == after,
            "totals": {"version_0": before, "version_1": after},
            "settings": {
                "replay_max_lag": settings.speed.replay_max_lag,
                "replay_sustain_s": settings.speed.replay_sustain_s,
                "replay_poll_s": settings.speed.replay_poll_s,
                "max_offsets_per_trigger": settings.speed.max_offsets_per_trigger,
            },
        }
    finally:
        if job is not None:
            job.send_signal(signal.SIGTERM)
            job.wait(120)
        if not args.keep:
            session.execute(f"DROP KEYSPACE IF EXISTS {settings.cassandra.keyspace}")
            admin.delete_topics([settings.kafka.events_topic, settings.kafka.dlq_topic])
            shutil.rmtree(folder, ignore_errors=True)
        cluster.shutdown()
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
