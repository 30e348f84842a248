"""Every view of the platform, declared once.

The speed layer, the batch layer and serving iterate over :data:`VIEWS`;
adding a view is one module (its build function and its ``SPEC``) plus one
line here.

>>> [spec.name for spec in VIEWS]
['page_activity', 'site_activity', 'search_terms', 'clicks']
>>> view("clicks").columns
('window_start', 'target', 'clicks')
"""

from __future__ import annotations

from views import clicks, page_activity, search_terms, site_activity
from views.spec import ViewSpec

__all__ = ["VIEWS", "view"]

VIEWS: tuple[ViewSpec, ...] = (
    page_activity.SPEC,
    site_activity.SPEC,
    search_terms.SPEC,
    clicks.SPEC,
)


def view(name: str) -> ViewSpec:
    """The view called ``name``."""
    for spec in VIEWS:
        if spec.name == name:
            return spec
    known = ", ".join(spec.name for spec in VIEWS)
    raise KeyError(f"No view {name!r}; the views are: {known}.")
