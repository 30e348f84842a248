"""Where the lake tables serving reads live: the gold table of each view, and silver.

Gold and silver are written by the batch layer and read by serving's SQL
views (:mod:`serving.sql`, the SQL server's ``events``), so their places are
part of the shared layout, not of either side. Bronze, staging and the
ledger are the batch layer's own (:mod:`batch_layer.bronze`).

>>> from core.settings import LakeSettings, Settings
>>> from views import view
>>> gold_path(Settings(lake=LakeSettings(root="s3a://lake/prod/")), view("clicks"))
's3a://lake/prod/gold/clicks'
>>> silver_path(Settings(lake=LakeSettings(root="s3a://lake/prod")), "web.events.v1")
's3a://lake/prod/silver/web_events_v1'
"""

from __future__ import annotations

from core.settings import Settings
from views.spec import ViewSpec

__all__ = ["gold_path", "silver_path", "topic_table_name", "user_agents_path"]


def gold_path(settings: Settings, spec: ViewSpec) -> str:
    """The Delta table of view ``spec``'s gold rows, partitioned by ``window_date``."""
    return f"{settings.lake.root.rstrip('/')}/gold/{spec.name}"


def topic_table_name(topic: str) -> str:
    """The Delta table name of a topic's bronze and silver (``web.events.v1`` ->
    ``web_events_v1``)."""
    return topic.replace(".", "_").replace("-", "_")


def silver_path(settings: Settings, topic: str) -> str:
    """The silver Delta table of the events read from ``topic``."""
    return f"{settings.lake.root.rstrip('/')}/silver/{topic_table_name(topic)}"


def user_agents_path(settings: Settings) -> str:
    """The user-agent dimension the SQL server keeps (:mod:`serving.connect.user_agents`)."""
    return f"{settings.lake.root.rstrip('/')}/dims/user_agents"
