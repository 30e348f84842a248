"""The serving API and dashboard (``python -m serving serve``) as a local service."""

from __future__ import annotations

from core.settings import Settings
from platformctl.process import ManagedProcess
from platformctl.services.base import Service, http_health, python_process

__all__ = ["SERVICE", "healthy", "process"]


def process(settings: Settings) -> ManagedProcess:
    """The serving API and dashboard (uvicorn workers), run from this Python environment."""
    return python_process(settings, "serving", ["serving", "serve"], ports=(settings.serving.port,))


def healthy(settings: Settings) -> tuple[bool, str]:
    """Probe: the serving API's /health answers 200; detail = boundary and freshness per view."""
    answer, why_not = http_health(settings.serving.host, settings.serving.port)
    if answer is None:
        return False, why_not
    body = answer.json()
    if answer.status_code != 200:
        return False, str(body.get("message"))
    parts = [f"DEGRADED {body.get('message')}"] if body.get("status") == "degraded" else []
    for view, boundary in body.get("boundary", {}).items():
        lag = body.get("freshness", {}).get(view, {}).get("lag_s")
        parts.append(f"{view}: boundary {boundary or 'none'}, speed lag {lag}s")
    return True, f"{answer.url.join('/dashboard')}; " + "; ".join(parts)


SERVICE = Service(name="serving", process=process, probe=healthy, requires=("cassandra",))
