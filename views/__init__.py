"""The derived views: one pure function per view, shared by the speed and batch layers.

Each view turns parsed, deduplicated events (contract schema plus
``event_time``) into rows keyed by ``(window_start, *keys)`` with mergeable
measures; :mod:`views.registry` finds them, :mod:`views.merge` re-aggregates them
over any range, :mod:`views.sketches` reads their sketches without Spark.
"""

from views.clicks import build_clicks
from views.merge import estimates, merge_partials
from views.page_activity import build_page_activity
from views.registry import view
from views.search_terms import build_search_terms
from views.site_activity import build_site_activity, session_start
from views.spec import MEASURE_KINDS, Measure, MeasureKind, ViewSpec

__all__ = [
    "MEASURE_KINDS",
    "Measure",
    "MeasureKind",
    "ViewSpec",
    "build_clicks",
    "build_page_activity",
    "build_search_terms",
    "build_site_activity",
    "estimates",
    "merge_partials",
    "session_start",
    "view",
]
