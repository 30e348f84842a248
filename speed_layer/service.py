"""The speed job as a service: the live run's query, and a replay's beside it until it switches.

:class:`SpeedService` is what ``python -m speed_layer`` runs. It starts the
live run's query (:func:`speed_layer.job.start_queries`) and then, every
``replay_poll_s``, does what the run records in ``speed_runs`` ask for
(:mod:`speed_layer.replay`):

- a replay was requested: start its query in the same Spark application
  (one JVM: on a laptop both fit in the driver's memory; they share its
  cores, so the live query's micro-batches are slower while the replay
  catches up);
- the replay has caught up (:class:`speed_layer.replay.CatchUp`): switch
  the pointers, stop the old query, report the new run's progress as the
  views' (:meth:`ProgressRecorder.go_live`);
- a switch was interrupted (a statement failed, or the job died half way):
  complete it from what ``speed_runs`` recorded
  (:func:`speed_layer.replay.resume_switch`), follow the run that is now
  live and stop the query of the run it replaced; the job's start does the
  same before it starts any query;
- the replay was abandoned: stop its query;
- a superseded version's grace period is over: drop its tables.

A query that fails ends the service with an error (the supervisor restarts
it), as before: the checkpoints resume both runs where they were. One
exception: while a replay runs, a live query that fails (or cannot start,
say on a damaged checkpoint) is let go with an error logged, and the replay
takes over when it has caught up: a replay is how a damaged speed layer is
repaired.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from core.log import get_logger, log_event
from core.settings import Settings
from layout import ViewTables, create_view_tables
from speed_layer.job import start_queries
from speed_layer.progress import ProgressRecorder
from speed_layer.replay import (
    CatchUp,
    ReplayAbandoned,
    drop_superseded,
    point_new_views,
    replay_for_forget,
    resume_switch,
    switch,
)
from speed_layer.start import (
    LIVE,
    REPLAYING,
    RETIRED,
    StartPosition,
    current_start,
    pending_replay,
    read_runs,
)
from views import ViewSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from core.suppressions import SuppressionList
    from pipelines import PipelineSpec
    from speed_layer.metrics import SpeedMetrics

__all__ = ["SpeedService", "recount_due", "supervise"]

_log = get_logger(__name__)

MAX_REPLAY_BACKOFF_S = 300.0
"""Longest wait between two tries to start a replay's query."""
RECORD_MARGIN = timedelta(seconds=10)
"""A run that began this long after a forget was asked read its suppression as its queries
started (the request's time is taken before its record reaches Kafka)."""


class SpeedService:
    """The live run's query, a replay's query while one catches up, and the switch between."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        pipeline: PipelineSpec,
        *,
        views: Sequence[ViewSpec] | None = None,
        available_now: bool = False,
        metrics: SpeedMetrics | None = None,
        on_switch_step: Callable[[str], None] | None = None,
        pool: str | None = None,
        suppressions: SuppressionList | None = None,
    ) -> None:
        """``pipeline``'s speed layer: ``settings`` are its stream settings
        (:meth:`pipelines.PipelineSpec.stream_settings`), ``views`` its views (default: the
        pipeline's; a release's new definitions otherwise); its contract parses the
        records, its identity fields are digested.

        ``on_switch_step(step)`` is called before each statement of a switch
        (:data:`speed_layer.replay.SWITCH_STEPS`), before the old query is stopped
        (``"stop"``) and before a replay's query is started (``"start"``); an exception it
        raises interrupts the switch (or the start) there. ``pool``: the
        Spark scheduler pool its queries' jobs run in. ``suppressions``: the job's live
        suppression list, so a person forgotten while a query runs is left out of its next
        micro-batches (:mod:`speed_layer.forgotten`)."""
        from core.cassandra import connect

        self.spark, self.settings, self.spec = spark, settings, pipeline
        self.views = tuple(pipeline.view_specs if views is None else views)
        self.available_now = available_now
        self._on_step = on_switch_step
        self.pool = pool
        self.suppressions = suppressions
        self._cluster, self.session = connect(settings.cassandra)
        resume_switch(self.session, settings, self.views, on_step=on_switch_step)
        self.live: StartPosition = current_start(self.session, settings)
        point_new_views(self.session, settings, self.live, self.views)
        self.replay: StartPosition | None = None
        self.queries: dict[int, StreamingQuery] = {}
        """The running queries by run generation."""
        self.recorder = ProgressRecorder(
            settings,
            self.views,
            self.live.generation,
            live_query=self.live.query_name,
            metrics=metrics,
        )
        self._catch_up = CatchUp(settings.speed.replay_max_lag, settings.speed.replay_sustain_s)
        self._polled = 0.0
        self._listener: Any = None
        self.metrics = metrics
        self.pipeline = pipeline.name
        self._replay_failures = 0
        self._replay_retry_at = 0.0
        self._recounted: datetime | None = None
        """The latest forget a replay was requested for by this process."""
        self._recount_failures = 0
        self._recount_retry_at = 0.0

    def start(self) -> None:
        self._listener = self.recorder.listener()
        self.spark.streams.addListener(self._listener)
        try:
            self._start(self.live)
        except Exception as exc:
            # A damaged live run (a bad checkpoint) is repaired by a replay: keep going when
            # one is asked for, serving the live version's rows until it switches.
            if self.available_now or pending_replay(self.session, self.settings) is None:
                raise
            self._live_failed(exc)
        if not self.available_now:
            self.poll()

    def _live_failed(self, error: object) -> None:
        log_event(
            _log,
            "speed.live_failed",
            logging.ERROR,
            generation=self.live.generation,
            error=str(error)[:2000],
            fix="a replay is catching up and takes over when it has; serving keeps the live "
            "version's rows until then",
        )

    def running(self) -> list[StreamingQuery]:
        """The queries to supervise; a failed live query is let go while a replay runs."""
        live = self.queries.get(self.live.generation)
        if (
            live is not None
            and self.replay is not None
            and not live.isActive
            and live.exception() is not None
        ):
            self._live_failed(live.exception())
            del self.queries[self.live.generation]
        return list(self.queries.values())

    def _start(self, run: StartPosition) -> None:
        keyspace, ttl_s = self.settings.cassandra.keyspace, self.settings.speed.ttl_s
        for spec in self.views:  # its tables, with every column and today's TTL
            tables = ViewTables(spec, keyspace, "speed", table_version=run.version)
            create_view_tables(self.session, tables, ttl_s)
        if self.pool is not None:
            # Its queries' jobs in a scheduler pool of their own (when the application's
            # scheduler is FAIR: settings.speed.scheduler): a query's thread inherits the
            # local properties of the thread that starts it; the sink passes them on.
            self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", self.pool)
        (query,) = start_queries(
            self.spark,
            self.settings,
            self.spec,
            views=self.views,
            available_now=self.available_now,
            start=run,
            suppressions=self.suppressions,
        )
        self.queries[run.generation] = query

    def poll(self) -> None:
        """Do what the runs ask for: complete an interrupted switch; start, switch or stop a
        replay; drop superseded versions."""
        self._polled = time.monotonic()
        self._settle()
        wanted = pending_replay(self.session, self.settings)
        if self._recount_forgotten(wanted):
            wanted = pending_replay(self.session, self.settings)
        if self.replay is not None and (
            wanted is None or wanted.generation != self.replay.generation
        ):
            self._stop_replay()  # abandoned (or replaced by an operator)
        if self.replay is None and wanted is not None and self._replay_start_due():
            self._start_replay(wanted)
        if self.replay is not None and self._caught_up():
            self._switch()
        drop_superseded(self.session, self.settings, self.views)

    def _recount_forgotten(self, wanted: StartPosition | None) -> bool:
        """Request a replay if a person was forgotten in the pipeline after the run that
        serving reads next (the replay catching up, else the live run) began: that run's rows
        may count them, and sketches cannot take one person out. The replay recounts the
        windows after the batch boundary without them (:func:`replay_for_forget`), once
        the suppression list has been quiet for ``speed.forget_recount_after_s``. Whether
        one was requested."""
        suppressions = self.suppressions
        if suppressions is None or not self.spec.identity or not suppressions.loaded.is_set():
            return False
        forgotten_at = suppressions.last_request(self.pipeline)
        due = recount_due(
            forgotten_at,
            self._recounted,
            (wanted or self.live).created_at,
            datetime.now(UTC),
            timedelta(seconds=self.settings.speed.forget_recount_after_s),
        )
        if not due or forgotten_at is None or time.monotonic() < self._recount_retry_at:
            return False
        try:
            replay = replay_for_forget(self.settings, self.views)
        except Exception as exc:  # the rest of the poll goes on; tried again later
            self._recount_failures += 1
            wait = min(
                self.settings.speed.replay_poll_s * 2**self._recount_failures, MAX_REPLAY_BACKOFF_S
            )
            self._recount_retry_at = time.monotonic() + wait
            log_event(
                _log,
                "speed.forget_recount_failed",
                logging.ERROR,
                pipeline=self.pipeline,
                retry_in_s=wait,
                error=str(exc)[:2000],
            )
            return False
        self._recounted, self._recount_failures = forgotten_at, 0
        log_event(
            _log,
            "speed.forget_recount",
            pipeline=self.pipeline,
            forgotten_at=forgotten_at.isoformat(),
            generation=replay.generation,
        )
        return True

    def _replay_start_due(self) -> bool:
        return time.monotonic() >= self._replay_retry_at

    def _start_replay(self, wanted: StartPosition) -> None:
        """Start ``wanted``'s query; it is the replay only once it runs. A start that fails (a
        Cassandra schema-agreement timeout, say) is tried again at a later poll, the wait
        doubling up to ``MAX_REPLAY_BACKOFF_S``, and counted
        (``wap_speed_replay_start_failures_total``); the live query goes on meanwhile."""
        self.recorder.follow_replay(wanted.query_name, wanted.generation)
        self._catch_up.since = None
        try:
            if self._on_step is not None:
                self._on_step("start")
            self._start(wanted)
        except Exception as exc:
            self.recorder.follow_replay(None)
            self._replay_failures += 1
            wait = min(
                self.settings.speed.replay_poll_s * 2 ** (self._replay_failures - 1),
                MAX_REPLAY_BACKOFF_S,
            )
            self._replay_retry_at = time.monotonic() + wait
            if self.metrics is not None:
                self.metrics.replay_start_failed(self.pipeline)
            log_event(
                _log,
                "speed.replay_start_failed",
                logging.ERROR,
                pipeline=self.pipeline,
                generation=wanted.generation,
                attempt=self._replay_failures,
                retry_in_s=wait,
                error=str(exc)[:2000],
            )
            return
        self.replay, self._replay_failures, self._replay_retry_at = wanted, 0, 0.0
        log_event(
            _log,
            "speed.replay_started",
            generation=wanted.generation,
            version=wanted.version,
            requested=wanted.requested,
        )

    def _caught_up(self) -> bool:
        if self.recorder.replay_progress_at is None:
            return False
        return self._catch_up.observe(self.recorder.replay_lag, time.monotonic())

    def _switch(self) -> None:
        assert self.replay is not None
        old, new = self.live, self.replay
        try:
            switch(self.session, self.settings, old, new, self.views, on_step=self._on_step)
        except ReplayAbandoned:
            log_event(
                _log, "speed.switch_abandoned", pipeline=self.pipeline, generation=new.generation
            )
            self._stop_replay()
            return
        self._go_live(replace(new, state=LIVE))
        self._stop_others()

    def _settle(self) -> None:
        """Make the queries match the runs: complete a switch interrupted after its intent,
        follow the run a switch made live, stop the queries of runs no longer live or
        replaying. A forced reset's new run is left for the next start, as before."""
        resume_switch(self.session, self.settings, self.views, on_step=self._on_step)
        runs = {run.generation: run for run in read_runs(self.session, self.settings)}
        live = current_start(self.session, self.settings)
        ours = runs.get(self.live.generation)
        switched_from_ours = ours is not None and ours.state == RETIRED
        if live.generation != self.live.generation and (
            switched_from_ours or (self.replay and self.replay.generation == live.generation)
        ):
            self._go_live(live)
        self._stop_others()

    def _go_live(self, run: StartPosition) -> None:
        """``run`` is the live run now: its progress is the views', its query runs."""
        log_event(_log, "speed.live_run", generation=run.generation, previous=self.live.generation)
        self.recorder.go_live(run.query_name, run.generation)
        if self.replay is not None and self.replay.generation == run.generation:
            self.replay = None
        self.live = run
        if run.generation not in self.queries:
            self._start(run)

    def _stop_others(self) -> None:
        """Stop the queries of runs neither live nor replaying (the run a switch replaced)."""
        keep = {self.live.generation, *([self.replay.generation] if self.replay else [])}
        for generation, query in list(self.queries.items()):
            if generation in keep:
                continue
            if self._on_step is not None:
                self._on_step("stop")
            if query.isActive:
                query.stop()
            del self.queries[generation]
            log_event(_log, "speed.query_stopped", generation=generation)

    def _stop_replay(self) -> None:
        assert self.replay is not None
        query = self.queries.pop(self.replay.generation, None)
        if query is not None and query.isActive:
            query.stop()
        log_event(_log, "speed.replay_stopped", generation=self.replay.generation)
        self.recorder.follow_replay(None)
        self.replay = None

    def supervise(self, stopping: threading.Event, poll_s: float = 1.0) -> list[StreamingQuery]:
        """Run until a stop is asked, every query ended, or one failed; return the failed ones.
        Between checks, :meth:`poll` every ``replay_poll_s`` (not when draining)."""
        return supervise(self.running, stopping, poll_s, self.tick)

    def tick(self) -> None:
        if self.available_now:
            return
        if time.monotonic() - self._polled >= self.settings.speed.replay_poll_s:
            try:
                self.poll()
            except Exception as exc:  # a Cassandra hiccup must not stop the streams
                log_event(_log, "speed.poll_failed", logging.WARNING, error=repr(exc))

    def stop(self) -> bool:
        """Stop every query gracefully (the current micro-batch finishes, the checkpoint
        commits) and wait for their last progress; False if it was not recorded in time."""
        queries = list(self.queries.values())
        for query in queries:
            if query.isActive:
                query.stop()
        return self.recorder.wait_for(queries)

    def close(self) -> None:
        if self._listener is not None:
            self.spark.streams.removeListener(self._listener)
        self.recorder.close()
        self._cluster.shutdown()

    @property
    def replaying(self) -> bool:
        return self.replay is not None and self.replay.state == REPLAYING


def recount_due(
    forgotten_at: datetime | None,
    recounted: datetime | None,
    began: datetime | None,
    now: datetime,
    quiet: timedelta,
) -> bool:
    """Whether the latest forget of a pipeline (``forgotten_at``) calls for a replay now: this
    process has not asked one for it (``recounted``), the run serving reads next did not
    begin after it (``began``: that run's queries read the suppression as they started;
    None, a run begun before runs kept their start time), and no forget came for ``quiet``.

    >>> t = datetime(2026, 1, 1, 12, tzinfo=UTC)
    >>> q = timedelta(seconds=30)
    >>> recount_due(None, None, t, t, q)  # no one was forgotten
    False
    >>> recount_due(t, None, t - timedelta(hours=1), t + timedelta(seconds=31), q)
    True
    >>> recount_due(t, None, t - timedelta(hours=1), t + timedelta(seconds=5), q)  # not quiet yet
    False
    >>> recount_due(t, t, t - timedelta(hours=1), t + timedelta(minutes=5), q)  # asked already
    False
    >>> recount_due(t, None, t + timedelta(minutes=1), t + timedelta(minutes=5), q)  # run after
    False
    >>> recount_due(t, None, None, t + timedelta(minutes=5), q)
    True
    """
    if forgotten_at is None or (recounted is not None and forgotten_at <= recounted):
        return False
    if began is not None and forgotten_at + RECORD_MARGIN <= began:
        return False
    return now - forgotten_at >= quiet


class _Query(Protocol):
    name: str

    @property
    def isActive(self) -> bool: ...

    def exception(self) -> Any: ...


def supervise(
    queries: Callable[[], Sequence[_Query]],
    stopping: threading.Event,
    poll_s: float = 1.0,
    tick: Callable[[], None] = lambda: None,
) -> list[Any]:
    """Wait until a stop is asked, every query ended, or one failed; return the failed ones.

    A query that ended with an exception is a failure even when every other
    query ended too (a Cassandra outage kills them all between two polls;
    ``--drain`` ends them all by design). ``queries`` is asked at every check
    (a switch replaces them); ``tick`` runs between checks. No query at all is not an end:
    a pipeline whose live query was let go waits for its replay's start, which ``tick``
    tries again.
    """
    while True:
        current = queries()
        failed = [q for q in current if not q.isActive and q.exception() is not None]
        ended = bool(current) and all(not q.isActive for q in current)
        if failed or ended or stopping.is_set():
            return failed
        tick()
        stopping.wait(poll_s)
