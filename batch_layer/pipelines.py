"""The pipeline declarations, as the batch layer names them (they live in :mod:`pipelines`).

>>> WEB_EVENTS.views[0]
'page_activity'
"""

from __future__ import annotations

from pipelines import PIPELINES, PipelineSpec, Reconciliation, collector_pipeline, pipeline

__all__ = ["PIPELINES", "WEB_EVENTS", "PipelineSpec", "Reconciliation", "pipeline"]

WEB_EVENTS = collector_pipeline()
"""The collector's pipeline (web events, ``pipelines/declared/web_events.py``)."""
