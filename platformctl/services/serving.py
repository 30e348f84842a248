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
    return True, f"{answer.url.join('/dashboard')}; {health_detail(body)}"


def health_detail(body: dict) -> str:
    """Each view's boundary and speed lag from serving's ``/health`` answer.

    >>> health_detail({"boundary": {"clicks": "2026-11-29T10:00:00Z", "orders": None},
    ...                "freshness": {"clicks": {"lag_s": 2.5}, "orders": {"lag_s": None}}})
    'clicks: boundary 2026-11-29T10:00:00Z, speed lag 2.5s; orders: boundary none, speed lag none'
    """
    parts = [f"DEGRADED {body.get('message')}"] if body.get("status") == "degraded" else []
    for view, boundary in body.get("boundary", {}).items():
        lag = body.get("freshness", {}).get(view, {}).get("lag_s")
        lag_text = "none" if lag is None else f"{lag}s"  # no speed row of the view yet
        parts.append(f"{view}: boundary {boundary or 'none'}, speed lag {lag_text}")
    return "; ".join(parts)


SERVICE = Service(name="serving", process=process, probe=healthy, requires=("cassandra",))
