"""The HTTP collector (``python -m ingest``) as a local service."""

from __future__ import annotations

from core.settings import Settings
from platformctl.process import ManagedProcess
from platformctl.services.base import Service, http_health, python_process

__all__ = ["SERVICE", "healthy", "process"]


def process(settings: Settings) -> ManagedProcess:
    """The HTTP collector, run from this Python environment with these settings."""
    return python_process(settings, "collector", ["ingest"], ports=(settings.collector.port,))


def healthy(settings: Settings) -> tuple[bool, str]:
    """Probe: the collector's /health answers 200 (it checks Kafka itself, and that every
    worker listens)."""
    collector = settings.collector
    answer, why_not = http_health(collector.host, collector.port, settings.monitoring.metrics_token)
    if answer is None:
        return False, why_not
    body = answer.json()
    workers = body.get("workers") or {}
    return answer.status_code == 200, (
        f"{body.get('status')}, kafka {body.get('kafka')}, "
        f"workers {workers.get('listening')}/{workers.get('of')} listening, "
        f"queue depth {body.get('queue_depth')}, {body.get('contract')}"
    )


SERVICE = Service(name="collector", process=process, probe=healthy, requires=("kafka",))
