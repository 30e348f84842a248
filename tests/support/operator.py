"""The operators' credential as the tests send it: the settings' metrics token."""

from __future__ import annotations

from core.settings import Settings

__all__ = ["operator"]


def operator(settings: Settings) -> dict[str, str]:
    """The ``Authorization`` header ``/metrics`` and ``/health``'s figures take."""
    return {"Authorization": f"Bearer {settings.monitoring.metrics_token.get_secret_value()}"}
