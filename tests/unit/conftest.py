"""Fixtures of the unit tests of several packages (no service)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from views import ViewSpec


@pytest.fixture
def declare_views(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """``declare_views(*specs)``: pipelines resolve these views by name too, for one test.

    They join ``views.registry.view`` only, not the declared pipelines' views: like the
    views of a pipeline not declared here, which serving and the speed layer do not list.
    """
    import views.registry

    registered = views.registry.view

    def declare(*specs: ViewSpec) -> None:
        declared = {spec.name: spec for spec in specs}
        monkeypatch.setattr(
            views.registry, "view", lambda name: declared.get(name) or registered(name)
        )

    return declare
