"""The batch step server (``python -m batch_layer serve``) as a local service.

One long-lived Spark application the DAGs' tasks submit their steps to
(:mod:`batch_layer.server`), so an hourly pipeline does not start a JVM per
task. Airflow needs it running when ``WAP_BATCH__RUNNER`` is ``server``
(the local default); with ``submit`` the tasks ``spark-submit`` instead.
"""

from __future__ import annotations

from core.settings import Settings
from platformctl.process import ManagedProcess
from platformctl.services.base import Service, http_health, python_process

__all__ = ["SERVICE", "healthy", "process"]


def process(settings: Settings) -> ManagedProcess:
    """The step server: a Spark driver (``local[2]`` here) and its HTTP endpoint."""
    return python_process(
        settings, "batch", ["batch_layer", "serve"], ports=(settings.batch.step_server_port,)
    )


def healthy(settings: Settings) -> tuple[bool, str]:
    """Probe: ``/health`` answers; detail = the Spark application, steps running and run."""
    batch = settings.batch
    answer, why_not = http_health(
        batch.step_server_host, batch.step_server_port, settings.monitoring.metrics_token
    )
    if answer is None:
        return False, why_not
    body = answer.json()
    running = ", ".join(" ".join(r["args"][:3]) for r in body["running"]) or "none"
    last = body["last"][-1] if body["last"] else None
    done = (
        f"; last {' '.join(last['args'][:3])} {last['state']} in {last['seconds']}s" if last else ""
    )
    return answer.status_code == 200, (
        f"spark {body['spark']['application_id']} ({body['spark']['master']}), up "
        f"{body['uptime_s']}s; running: {running}; {body['finished']} steps run{done}"
    )


SERVICE = Service(name="batch", process=process, probe=healthy, requires=("kafka", "cassandra"))
