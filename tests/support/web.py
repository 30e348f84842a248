"""The web pipeline, as the tests that exercise one pipeline take it: its declaration, its
views in their declared order."""

from __future__ import annotations

from pipelines import pipeline

__all__ = ["WEB_EVENTS", "WEB_VIEWS"]

WEB_EVENTS = pipeline("web_events")
WEB_VIEWS = WEB_EVENTS.view_specs
"""``page_activity``, ``site_activity``, ``search_terms``, ``clicks``."""
