"""Cross-cutting pieces every deployable shares: settings, Spark session, logging."""

from core.settings import Settings, load_settings

__all__ = ["Settings", "load_settings"]
