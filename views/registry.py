"""Every view of the platform: each module of :mod:`views` that holds a ``SPEC``.

A view is one module (its build function and its ``SPEC``, a
:class:`~views.spec.ViewSpec`); nothing lists it. :func:`view` resolves a name
among them all; :data:`VIEWS` holds the views of the collector's events, the
ones the speed layer, serving and the SQL server iterate over today.

>>> [spec.name for spec in VIEWS]
['page_activity', 'site_activity', 'search_terms', 'clicks']
>>> view("clicks").columns
('window_start', 'target', 'clicks')
>>> view("orders_by_currency").keys
('currency',)
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from views import clicks, page_activity, search_terms, site_activity
from views.spec import ViewSpec

__all__ = ["VIEWS", "all_views", "view"]

VIEWS: tuple[ViewSpec, ...] = (
    page_activity.SPEC,
    site_activity.SPEC,
    search_terms.SPEC,
    clicks.SPEC,
)


@cache
def all_views() -> dict[str, ViewSpec]:
    """Every view module's ``SPEC`` by view name, in module-name order."""
    import views

    found: dict[str, ViewSpec] = {}
    for info in sorted(pkgutil.iter_modules(views.__path__), key=lambda m: m.name):
        spec = getattr(importlib.import_module(f"views.{info.name}"), "SPEC", None)
        if isinstance(spec, ViewSpec):
            if spec.name in found:
                raise ValueError(
                    f"View {spec.name!r} is defined twice (views/{info.name}.py and another "
                    "module): a view's name names its tables; rename one."
                )
            found[spec.name] = spec
    return found


def view(name: str) -> ViewSpec:
    """The view called ``name``."""
    for spec in VIEWS:
        if spec.name == name:
            return spec
    found = all_views().get(name)
    if found is None:
        known = ", ".join(spec.name for spec in (*VIEWS, *all_views().values()))
        known = ", ".join(dict.fromkeys(known.split(", ")))
        raise KeyError(f"No view {name!r}; the views are: {known}.")
    return found
