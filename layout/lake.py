"""Where the lake tables serving reads live: the gold table of each view.

Gold is written by the batch layer and read by serving's SQL views
(:mod:`serving.sql`), so its place is part of the shared layout, not of
either side. Bronze, silver and the ledger are the batch layer's own
(:mod:`batch_layer.bronze`, :mod:`batch_layer.silver`).

>>> from core.settings import LakeSettings, Settings
>>> from views import view
>>> gold_path(Settings(lake=LakeSettings(root="s3a://lake/prod/")), view("clicks"))
's3a://lake/prod/gold/clicks'
"""

from __future__ import annotations

from core.settings import Settings
from views.spec import ViewSpec

__all__ = ["gold_path"]


def gold_path(settings: Settings, spec: ViewSpec) -> str:
    """The Delta table of view ``spec``'s gold rows, partitioned by ``window_date``."""
    return f"{settings.lake.root.rstrip('/')}/gold/{spec.name}"
