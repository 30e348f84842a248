"""Every view of the platform: each module of :mod:`views` that holds a ``SPEC``.

A view is one module (its build function and its ``SPEC``, a
:class:`~views.spec.ViewSpec`); nothing lists it. :func:`view` resolves a name
among them all. Which views a layer computes is what the pipelines declare
(``PipelineSpec.view_specs``, :func:`pipelines.declared_views`): no view list
here stands for "the" pipeline.

>>> view("clicks").columns
('window_start', 'target', 'clicks')
>>> view("orders_by_currency").keys
('currency',)
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from views.spec import ViewSpec

__all__ = ["all_views", "view"]


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
    found = all_views().get(name)
    if found is None:
        raise KeyError(f"No view {name!r}; the views are: {', '.join(all_views())}.")
    return found
