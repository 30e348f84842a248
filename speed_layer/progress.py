"""The speed layer's progress in Cassandra: each micro-batch of the live query, per view.

:class:`ProgressRecorder` writes the query's progress (batch, newest event time,
watermark, rates, Kafka lag, rows dropped and rejected) to ``speed_progress``, where
``status`` and the serving layer read freshness; :func:`batch_counts` and
:func:`add_counts` are what it counts per micro-batch and across them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from core.cassandra import prepare
from core.log import get_logger, log_event
from core.settings import Settings
from layout import PointerTables
from speed_layer.job import EDGE_METRICS, QUERY_NAME, REJECT_METRICS, reject_metric
from views import ViewSpec
from views.input import REJECT_REASONS

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

    from speed_layer.metrics import SpeedMetrics

__all__ = ["ProgressRecorder", "add_counts", "batch_counts"]

_log = get_logger(__name__)


def _kafka_lag(progress: Any) -> int | None:
    """Records the query is behind the newest offsets (the most of any partition)."""
    lag = None
    for source in progress.sources:
        behind = (source.metrics or {}).get("maxOffsetsBehindLatest")
        lag = int(behind) if behind is not None else lag
    return lag


def _ts(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


_COUNTERS = ("late_rows_dropped", "future_rows_dropped", "before_floor_rows")
_REJECTED = "rejected_rows"
_WRITTEN = (
    "batch_id",
    "max_event_time",
    "watermark",
    "written_at",
    "heartbeat_at",
    "input_rows",
    "input_rows_per_s",
    "processed_rows_per_s",
    *_COUNTERS,
    _REJECTED,
    "kafka_lag",
    "batch_duration_ms",
    "run_generation",
)
"""The progress columns a micro-batch with rows writes, in the order they are bound."""


def batch_counts(progress: Any) -> dict[str, Any]:
    """The rows one micro-batch dropped (late, future, before the run's floor) and rejected.

    Read from its progress: the state operators' rows dropped by the watermark
    and the observed metrics :data:`EDGE_METRICS` and :data:`REJECT_METRICS`.
    ``rejected_rows`` maps each reason with rejects to their number.
    """
    observed = progress.observedMetrics or {}
    edge, rejects = observed.get(EDGE_METRICS), observed.get(REJECT_METRICS)
    return {
        "late_rows_dropped": sum(op.numRowsDroppedByWatermark for op in progress.stateOperators),
        "future_rows_dropped": (edge["future_rows"] or 0) if edge is not None else 0,
        "before_floor_rows": (edge["before_floor_rows"] or 0) if edge is not None else 0,
        _REJECTED: {
            reason: rejects[reject_metric(reason)]
            for reason in REJECT_REASONS
            if rejects is not None and rejects[reject_metric(reason)]
        },
    }


def add_counts(total: dict[str, Any], batch: dict[str, Any]) -> dict[str, Any]:
    """``total`` plus one batch's :func:`batch_counts` (counters and rejects per reason)."""
    out = {name: (total.get(name) or 0) + batch[name] for name in _COUNTERS}
    rejected = dict(total.get(_REJECTED) or {})
    for reason, rows in batch[_REJECTED].items():
        rejected[reason] = rejected.get(reason, 0) + rows
    return out | {_REJECTED: rejected}


class ProgressRecorder:
    """Record each micro-batch's progress in ``speed_progress`` (driver side), per view.

    The live run's query serves every view of ``views``, so each batch's
    progress is written to each view's row (serving and ``status`` read
    freshness per view). The row counters (late, future, before the run's
    floor, rejected per reason) are cumulative across batches and restarts
    (:func:`add_counts`). A replay's query (:meth:`follow_replay`) reports to
    its ``speed_runs`` row instead, and its lag to :attr:`replay_lag`.
    """

    def __init__(
        self,
        settings: Settings,
        views: Sequence[ViewSpec],
        generation: int = 0,
        live_query: str = QUERY_NAME,
        metrics: SpeedMetrics | None = None,
    ) -> None:
        from core.cassandra import connect

        self.metrics = metrics
        """Prometheus gauges fed with each progress of the live query (None: none kept)."""
        self._settings = settings
        self._views = tuple(spec.name for spec in views)
        self._cluster, self._session = connect(settings.cassandra)
        self._generation = generation
        self.live_query = live_query
        """The name of the live run's query, whose progress goes to ``speed_progress``."""
        self._replay: tuple[str, int] | None = None
        self.replay_lag: int | None = None
        """The replay query's Kafka lag at its last progress (None: none yet)."""
        self.replay_progress_at: float | None = None
        self._tolerance = timedelta(seconds=settings.event_time.future_tolerance_s)
        self._warned: set[str] = set()
        pointers = PointerTables(settings.cassandra.keyspace)
        session = self._session
        self._batch = prepare(session, pointers.insert_progress(_WRITTEN))
        counts = prepare(session, pointers.select_progress_of((*_COUNTERS, _REJECTED)))
        self._counts: dict[str, dict[str, Any]] = {
            row.view_name: {name: getattr(row, name) or 0 for name in _COUNTERS}
            | {_REJECTED: dict(row.rejected_rows or {})}
            for row in session.execute(counts, (list(self._views),))
        }
        self._touch = prepare(session, pointers.update_heartbeat)
        self._heartbeat = prepare(session, pointers.update_empty_batch)
        self._stopped = prepare(session, pointers.update_stopped)
        self._recorded: dict[str, int] = {}
        """Per query name, the last batch whose progress was written."""
        self._progress_seen = threading.Condition()

    def listener(self) -> Any:
        from pyspark.sql.streaming import StreamingQueryListener

        recorder = self

        names: dict[str, str] = {}

        class _Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                names[str(event.id)] = event.name or ""

            def onQueryProgress(self, event: Any) -> None:
                recorder.record(event.progress)

            def onQueryIdle(self, event: Any) -> None:
                recorder.heartbeat(names.get(str(event.id), ""))

            def onQueryTerminated(self, event: Any) -> None:
                log_event(_log, "speed.query_terminated", id=str(event.id), error=event.exception)

        return _Listener()

    def go_live(self, query_name: str, generation: int) -> None:
        """The live run is now ``query_name`` (a replay switched): its progress is the views'."""
        self.live_query, self._generation = query_name, generation
        self._replay = None

    def follow_replay(self, query_name: str | None, generation: int = 0) -> None:
        """Report ``query_name``'s progress as the catch-up of replay run ``generation``."""
        self._replay = None if query_name is None else (query_name, generation)
        self.replay_lag = self.replay_progress_at = None

    def record(self, progress: Any) -> None:
        name = progress.name or ""
        try:
            if self._replay is not None and name == self._replay[0]:
                self._record_replay(self._replay[1], progress)
            elif name == self.live_query:
                for view in self._views:
                    self._write(view, progress)
        finally:
            with self._progress_seen:
                self._recorded[name] = progress.batchId
                self._progress_seen.notify_all()

    def wait_for(self, queries: list[StreamingQuery], timeout_s: float = 30.0) -> bool:
        """Wait until the last progress of every query is written (the listener runs late).

        A drained or stopping job ends right after its last micro-batch; the
        listener bus delivers that batch's progress afterwards, and it carries
        the watermark and the rows dropped, which must not be lost.
        """
        wanted = {}
        for query in queries:
            last = query.lastProgress
            if last is not None:
                wanted[query.name] = last["batchId"] if isinstance(last, dict) else last.batchId
        with self._progress_seen:
            return self._progress_seen.wait_for(
                lambda: all(self._recorded.get(n, -1) >= b for n, b in wanted.items()), timeout_s
            )

    def _record_replay(self, generation: int, progress: Any) -> None:
        from speed_layer.start import update_run

        lag = _kafka_lag(progress)
        self.replay_lag, self.replay_progress_at = lag, time.monotonic()
        update_run(
            self._session,
            self._settings,
            generation,
            progress_at=datetime.now(UTC),
            batch_id=progress.batchId,
            kafka_lag=lag,
            max_event_time=_ts((progress.eventTime or {}).get("max")),
            input_rows_per_s=progress.inputRowsPerSecond,
            processed_rows_per_s=progress.processedRowsPerSecond,
        )

    def _write(self, view: str, progress: Any) -> None:
        event_time = progress.eventTime or {}
        lag = _kafka_lag(progress)
        now = datetime.now(UTC)
        watermark = _ts(event_time.get("watermark"))
        ahead = watermark is not None and watermark - now > self._tolerance  # never overflows
        if ahead and view not in self._warned:
            self._warned.add(view)  # once per view: the checkpoint carries it until a reset
            log_event(
                _log,
                "speed.watermark_ahead",
                logging.ERROR,
                view=view,
                watermark=watermark.isoformat(),
                fix="every new event is dropped as late; stop the job and run "
                "python -m speed_layer reset --from-offsets ... (docs/operations.md)",
            )
        if progress.numInputRows:
            batch = batch_counts(progress)
            counts = self._counts[view] = add_counts(self._counts.get(view, {}), batch)
            if batch["future_rows_dropped"]:
                log_event(
                    _log,
                    "speed.future_rows_dropped",
                    logging.WARNING,
                    view=view,
                    batch_id=progress.batchId,
                    rows=batch["future_rows_dropped"],
                )
            if batch[_REJECTED]:
                log_event(
                    _log,
                    "speed.rows_rejected",
                    logging.WARNING,
                    view=view,
                    batch_id=progress.batchId,
                    reasons=batch[_REJECTED],
                )
            self._session.execute(
                self._batch,
                (
                    view,
                    progress.batchId,
                    _ts(event_time.get("max")),
                    watermark,
                    now,
                    now,
                    progress.numInputRows,
                    progress.inputRowsPerSecond,
                    progress.processedRowsPerSecond,
                    counts["late_rows_dropped"],
                    counts["future_rows_dropped"],
                    counts["before_floor_rows"],
                    counts[_REJECTED],
                    lag,
                    int(progress.batchDuration),
                    self._generation,
                ),
            )
        else:
            self._session.execute(self._heartbeat, (now, lag, watermark, self._generation, view))
        if self.metrics is not None:
            self.metrics.observe(view, progress, lag, self._counts.get(view))

    def heartbeat(self, name: str) -> None:
        """An idle query is alive: refresh its heartbeat only."""
        if name == self.live_query:
            now = datetime.now(UTC)
            for view in self._views:
                self._session.execute(self._touch, (now, view))
                if self.metrics is not None:
                    self.metrics.observe(view, None, None, None)

    def stopped(self, views: list[str]) -> None:
        """The job stopped on purpose: say so, so an operator may reset it at once."""
        now = datetime.now(UTC)
        for view in views:
            self._session.execute(self._stopped, (now, view))

    def close(self) -> None:
        self._cluster.shutdown()
