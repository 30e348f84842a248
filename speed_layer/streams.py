"""Every pipeline the speed job streams, in one Spark application, each on its own.

``python -m speed_layer`` streams the declared pipelines (:mod:`pipelines`)
whose ``speed.live`` is set, or those ``speed.pipelines`` names. Each gets a
:class:`~speed_layer.service.SpeedService` of its own on a SQL session of its
own (``spark.newSession()``): its query, checkpoint and runs under
``<speed.checkpoint_name>/<pipeline>``, its progress rows, replays and
switches. They share the driver's JVM and cores, nothing else: a session's
streaming queries and listeners see only that session's queries.

One pipeline failing does not stop the others' live answers. Its service is
stopped and started again from its checkpoint after ``speed.restart_backoff_s``
(doubling, at most :data:`MAX_BACKOFF_S`), while the others run on; the job
exits with an error only when no pipeline is left running (as it did with one
pipeline: the supervisor then restarts the whole process). A drain ends with
an error when any pipeline failed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from core.log import get_logger, log_event
from core.settings import Settings
from core.suppressions import SuppressionList
from pipelines import PIPELINES, PipelineSpec, pipeline

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from speed_layer.metrics import SpeedMetrics
    from speed_layer.service import SpeedService

__all__ = ["MAX_BACKOFF_S", "Streams", "streamed"]

_log = get_logger(__name__)

MAX_BACKOFF_S = 300.0
"""The longest wait before a failed pipeline is started again."""


def streamed(settings: Settings) -> tuple[PipelineSpec, ...]:
    """The pipelines the speed job streams: ``speed.pipelines`` (each must be declared), or
    every declared pipeline whose ``speed.live`` is set.

    >>> from core.settings import SpeedSettings
    >>> names = [s.name for s in streamed(Settings(speed=SpeedSettings()))]
    >>> names == [s.name for s in PIPELINES if s.speed.live] and "web_events" in names
    True
    >>> [s.name for s in streamed(Settings(speed=SpeedSettings(pipelines=["web_events"])))]
    ['web_events']
    """
    if settings.speed.pipelines:
        return tuple(pipeline(name) for name in settings.speed.pipelines)
    return tuple(spec for spec in PIPELINES if spec.speed.live)


class Streams:
    """The speed layer of every streamed pipeline, started, supervised and stopped together,
    failing apart."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        specs: Sequence[PipelineSpec],
        *,
        available_now: bool = False,
        metrics: SpeedMetrics | None = None,
    ) -> None:
        if not specs:
            raise ValueError(
                "the speed job streams no pipeline: every declared pipeline has "
                "speed=SpeedOptions(live=False), or WAP_SPEED__PIPELINES is empty of names"
            )
        self.spark, self.settings, self.specs = spark, settings, tuple(specs)
        self.available_now = available_now
        self.metrics = metrics
        self.services: dict[str, SpeedService] = {}
        """The running pipelines' services, by pipeline name."""
        self.failed: set[str] = set()
        """Pipelines that failed since the start (a drain reports them)."""
        self._restart_at: dict[str, float] = {}
        self._backoff: dict[str, float] = {}
        self.suppressions: SuppressionList | None = None
        """The suppression list every pipeline's queries read while they run (a drain reads
        it once, as its queries start)."""

    def start(self) -> None:
        """Start every pipeline; one that cannot start is retried later (or fails a drain)."""
        if not self.available_now and self.suppressions is None:
            self.suppressions = SuppressionList(self.settings.kafka)
        for spec in self.specs:
            self._start(spec)

    def _start(self, spec: PipelineSpec) -> None:
        from speed_layer.job import speed_sql_conf
        from speed_layer.service import SpeedService

        settings = spec.stream_settings(self.settings)
        session = self.spark.newSession()  # its own queries, listeners and SQL settings
        for key, value in speed_sql_conf(settings).items():
            session.conf.set(key, value)
        service = None
        try:
            service = SpeedService(
                session,
                settings,
                spec,
                available_now=self.available_now,
                metrics=self.metrics,
                pool=spec.name,
                suppressions=self.suppressions,
            )
            service.start()
        except Exception as exc:
            if service is not None:
                _quietly(service.stop)
                _quietly(service.close)
            self._failed(spec.name, exc)
            return
        self.services[spec.name] = service
        self._restart_at.pop(spec.name, None)
        self._up(spec.name, True)
        start = service.live
        log_event(
            _log,
            "speed.run",
            pipeline=spec.name,
            topic=settings.kafka.events_topic,
            generation=start.generation,
            version=start.version,
            requested=start.requested,
            checkpoint=start.checkpoint_dir(settings),
            floor=start.floor.isoformat() if start.floor else None,
        )

    def run(self, stopping: threading.Event, poll_s: float = 1.0) -> int:
        """Supervise until ``stopping`` is set or (draining) every query ended; 0, or 1 when
        no pipeline is left running (or a drained pipeline failed)."""
        from speed_layer.service import supervise

        while self.services:
            failed = supervise(self._queries, stopping, poll_s, self._tick)
            if not failed:
                return 1 if self.available_now and self.failed else 0
            for query in failed:
                name = self._owner(query)
                if name in self.services:
                    self._failed(name, query.exception(), self.services.pop(name))
        return 1  # every pipeline failed: nothing is left to answer for

    def _queries(self) -> list[Any]:
        return [q for service in self.services.values() for q in service.running()]

    def _owner(self, query: Any) -> str:
        for name, service in self.services.items():
            if any(q is query for q in service.queries.values()):
                return name
        return ""  # its pipeline was taken out already

    def _tick(self) -> None:
        for service in self.services.values():
            service.tick()
        now = time.monotonic()
        for name, at in list(self._restart_at.items()):
            if now >= at:
                log_event(_log, "speed.pipeline_restarting", pipeline=name)
                self._start(next(spec for spec in self.specs if spec.name == name))

    def _failed(self, name: str, error: object, service: SpeedService | None = None) -> None:
        """``name`` failed: stop what is left of it, and start it again later (not when
        draining)."""
        self.failed.add(name)
        self._up(name, False)
        if service is not None:
            _quietly(service.stop)
            _quietly(service.close)
        wait = min(
            self._backoff.get(name, 0) * 2 or self.settings.speed.restart_backoff_s, MAX_BACKOFF_S
        )
        self._backoff[name] = wait
        if not self.available_now:
            self._restart_at[name] = time.monotonic() + wait
        log_event(
            _log,
            "speed.pipeline_failed",
            logging.ERROR,
            pipeline=name,
            error=str(error)[:2000],
            restart_in_s=None if self.available_now else wait,
            running=sorted(self.services),
        )

    def _up(self, name: str, up: bool) -> None:
        if self.metrics is not None:
            self.metrics.pipeline_up(name, up)

    def stop(self) -> bool:
        """Stop every pipeline's queries gracefully; False if a last progress was lost."""
        return all([service.stop() for service in self.services.values()])

    def stopped(self) -> None:
        """Record that each running pipeline stopped on purpose (a reset may follow)."""
        for service in self.services.values():
            service.recorder.stopped([spec.name for spec in service.views])

    def close(self) -> None:
        for service in self.services.values():
            _quietly(service.close)
        if self.suppressions is not None:
            _quietly(self.suppressions.close)


def _quietly(call: Any) -> None:
    try:
        call()
    except Exception as exc:  # cleaning up after a failure: say so, go on
        log_event(_log, "speed.cleanup_failed", logging.WARNING, error=repr(exc)[:500])
