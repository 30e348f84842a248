"""``python -m speed_layer``: run the speed layer until SIGTERM, ``--drain`` to catch up and stop,
``replay --from earliest|TIMESTAMP`` to rebuild the live views into a new version beside the
running job (Kappa), or ``reset --from-offsets earliest|latest|TIMESTAMP`` to open a new run on
fresh checkpoints into the same tables."""

from __future__ import annotations

import argparse
import signal
import threading
from typing import TYPE_CHECKING

from core.log import configure_logging, get_logger, log_event
from core.settings import Settings, load_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from speed_layer.metrics import SpeedMetrics

_log = get_logger("speed_layer")


def serve(
    spark: SparkSession,
    settings: Settings,
    *,
    drain: bool,
    stopping: threading.Event,
    metrics: SpeedMetrics,
) -> int:
    """The speed layer of every streamed pipeline (:func:`speed_layer.streams.streamed`) on
    ``spark`` until ``stopping`` is set, or (``drain``) until it has processed everything in
    the log; 0, or 1 when no pipeline is left running (a drain: when one failed)."""
    from layout import create_tables
    from speed_layer.streams import Streams, streamed

    specs = streamed(settings)
    create_tables(settings, [view for spec in specs for view in spec.view_specs])
    streams = Streams(spark, settings, specs, available_now=drain, metrics=metrics)
    streams.start()
    code = streams.run(stopping)
    if not streams.stop():
        log_event(_log, "speed.progress_not_recorded", pipelines=sorted(streams.services))
    if code == 0:
        streams.stopped()
    streams.close()
    if code:
        log_event(_log, "speed.failed", pipelines=sorted(streams.failed))
        return 1
    log_event(_log, "speed.stopped")
    return 0


def drain(spark: SparkSession, settings: Settings) -> int:
    """``--drain`` inside a running JVM: catch up, each pipeline on a new SQL session of
    ``spark`` with the speed layer's SQL settings, and stop. What a one-off catch-up, a
    notebook or a test runs without starting a Spark application of its own."""
    from speed_layer.metrics import SpeedMetrics

    return serve(spark, settings, drain=True, stopping=threading.Event(), metrics=SpeedMetrics())


def _with_pipelines(settings: Settings, names: list[str] | None) -> Settings:
    """``settings`` streaming only ``names`` (``--pipeline``), when given."""
    if not names:
        return settings
    speed = settings.speed.model_copy(update={"pipelines": names})
    return settings.model_copy(update={"speed": speed})


def _one_pipeline(settings: Settings, name: str | None):
    """The pipeline a reset or replay is for: ``--pipeline``, or the only one streamed."""
    from pipelines import pipeline
    from speed_layer.streams import streamed

    if name is not None:
        return pipeline(name)
    specs = streamed(settings)
    if len(specs) != 1:
        raise ValueError("name the pipeline: --pipeline " + "|".join(spec.name for spec in specs))
    return specs[0]


def scheduler_conf(settings: Settings) -> dict[str, str]:
    """The job's Spark scheduler (``speed.scheduler``); FAIR: a pool per streamed pipeline,
    each running its jobs in order (a :class:`~speed_layer.service.SpeedService` names its
    pool), the pools sharing the task slots equally."""
    import tempfile

    from core.spark import fair_allocations
    from speed_layer.streams import streamed

    conf = {"spark.scheduler.mode": settings.speed.scheduler}
    if settings.speed.scheduler == "FAIR":
        pools = {spec.name: ("FIFO", 1, 0) for spec in streamed(settings)}
        with tempfile.NamedTemporaryFile(
            "w", prefix="speed-pools-", suffix=".xml", delete=False
        ) as file:
            file.write(fair_allocations(pools))
        conf["spark.scheduler.allocation.file"] = file.name
    return conf


def run(drain: bool, pipelines: list[str] | None = None) -> int:
    from core.spark import build_spark_session
    from speed_layer.metrics import SpeedMetrics

    settings = _with_pipelines(load_settings(), pipelines)
    spark = build_spark_session(settings, app_name="speed-layer", extra=scheduler_conf(settings))
    metrics = SpeedMetrics()
    if not drain:  # a drain is a one-off run: nothing scrapes it
        metrics.serve(settings.speed.metrics_host, settings.speed.metrics_port)

    stopping = threading.Event()

    def stop(signum: int, _frame: object) -> None:
        log_event(_log, "speed.stopping", signal=signum)
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    code = serve(spark, settings, drain=drain, stopping=stopping, metrics=metrics)
    spark.stop()
    return code


def reset_command(from_offsets: str, force: bool, name: str | None = None) -> int:
    from speed_layer.reset import ResetRefused, reset

    try:
        base = load_settings()
        spec = _one_pipeline(base, name)
        settings = spec.stream_settings(base)
        start = reset(settings, from_offsets, force=force, views=spec.view_specs)
    except (ResetRefused, KeyError, ValueError) as exc:
        log_event(_log, "speed.reset_refused", error=str(exc))
        print(f"reset refused: {exc}")
        return 2
    floor = start.floor.isoformat() if start.floor else "none (every window is recomputed)"
    print(
        f"speed layer reset of {spec.name}: run {start.generation} starts at {start.requested} "
        f"({start.starting_offsets}) on {start.checkpoint_dir(settings)}; it writes windows "
        f"from {floor}. Start the job (python -m platformctl up speed) to run it."
    )
    return 0


def replay_command(
    from_offsets: str | None, force: bool, abandon: bool, wait_s: float, name: str | None = None
) -> int:
    from speed_layer.replay import ReplayRefused, abandon_replay, request_replay

    base = load_settings()
    try:
        spec = _one_pipeline(base, name)
    except (KeyError, ValueError) as exc:
        print(f"replay refused: {exc}")
        return 2
    settings = spec.stream_settings(base)
    if abandon:
        gone = abandon_replay(settings)
        print(
            "no replay was catching up (or its switch had begun)"
            if gone is None
            else f"replay run {gone.generation} (version {gone.version}) abandoned; the job "
            f"stops its query and drops its tables after {settings.speed.replay_grace_s:.0f}s"
        )
        return 0
    if from_offsets is None:
        print("replay needs --from earliest|TIMESTAMP (or --abandon)")
        return 2
    try:
        replay = request_replay(settings, from_offsets, force=force, views=spec.view_specs)
    except (ReplayRefused, ValueError) as exc:
        log_event(_log, "speed.replay_refused", error=str(exc))
        print(f"replay refused: {exc}")
        return 2
    floor = replay.floor.isoformat() if replay.floor else "none (every retained window)"
    print(
        f"replay run {replay.generation} of {spec.name} recorded: version {replay.version} from "
        f"{replay.requested} ({replay.starting_offsets}), windows from {floor}. The running "
        "speed job starts it within seconds and switches serving to it once it has caught "
        "up; python -m platformctl status shows its catch-up."
    )
    return _follow(settings, replay.generation, wait_s) if wait_s > 0 else 0


def _follow(settings, generation: int, wait_s: float) -> int:
    """Print the replay's catch-up until it is live (0) or ``wait_s`` passed (1)."""
    import time

    from core.cassandra import connect, prepare
    from layout import PointerTables
    from speed_layer.start import LIVE, REPLAYING, SWITCHING, read_runs

    cluster, session = connect(settings.cassandra)
    try:
        select = prepare(session, PointerTables(settings.cassandra.keyspace).select_runs)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            run = next(r for r in read_runs(session, settings) if r.generation == generation)
            if run.state == LIVE:
                print(f"replay run {generation} is live: serving reads version {run.version}")
                return 0
            if run.state not in (REPLAYING, SWITCHING):
                print(f"replay run {generation} ended {run.state}")
                return 1
            row = next(
                r
                for r in session.execute(select, (settings.speed.checkpoint_name,))
                if r.generation == generation
            )
            print(f"catching up: lag {row.kafka_lag} records, event time {row.max_event_time}")
            time.sleep(5)
        print(f"replay run {generation} has not switched within {wait_s:.0f}s")
        return 1
    finally:
        cluster.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed_layer", description=__doc__)
    parser.add_argument("--instance", default="speed", help="a name for logs and pid checks")
    parser.add_argument(
        "--drain",
        action="store_true",
        help="process what is in the log now, then stop (availableNow)",
    )
    parser.add_argument(
        "--pipeline",
        action="append",
        metavar="NAME",
        help="stream only this pipeline (repeatable; default: WAP_SPEED__PIPELINES, or every "
        "live pipeline)",
    )
    commands = parser.add_subparsers(dest="command")
    reset = commands.add_parser(
        "reset",
        help="open a new run on fresh checkpoints (stop the job first); see docs/operations.md",
    )
    reset.add_argument(
        "--from-offsets",
        required=True,
        metavar="earliest|latest|TIMESTAMP",
        help="where the new run starts reading the log (TIMESTAMP: ISO-8601, e.g. "
        "2026-11-23T08:00:00Z)",
    )
    reset.add_argument("--force", action="store_true", help="reset even though the job looks alive")
    reset.add_argument(
        "--pipeline",
        dest="one",
        metavar="NAME",
        help="the pipeline to reset (needed when the job streams several)",
    )
    replay = commands.add_parser(
        "replay",
        help="rebuild the live views from the log into a new version beside the running job, "
        "switched to once caught up (Kappa); see docs/operations.md",
    )
    replay.add_argument(
        "--from",
        dest="from_offsets",
        metavar="earliest|TIMESTAMP",
        help="where the replay starts reading the log (TIMESTAMP: ISO-8601)",
    )
    replay.add_argument(
        "--force", action="store_true", help="start even though the new version would miss windows"
    )
    replay.add_argument("--abandon", action="store_true", help="give up the replay catching up")
    replay.add_argument(
        "--pipeline",
        dest="one",
        metavar="NAME",
        help="the pipeline to replay (needed when the job streams several)",
    )
    replay.add_argument(
        "--wait", type=float, default=0, metavar="SECONDS", help="follow it until it is live"
    )
    args = parser.parse_args(argv)
    configure_logging()
    if args.command == "reset":
        return reset_command(args.from_offsets, args.force, args.one)
    if args.command == "replay":
        return replay_command(args.from_offsets, args.force, args.abandon, args.wait, args.one)
    return run(args.drain, args.pipeline)
