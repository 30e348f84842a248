from __future__ import annotations

from datetime import datetime

import pytest

from ingest.simulator import SimulatorConfig, build_site


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"events": None}, "exactly one of events"),
        ({"duration_s": 60}, "exactly one of events"),
        ({"invalid_rate": -0.1}, "invalid_rate is a share"),
        ({"rate": 0}, "rate must be positive"),
        ({"batch_size": 0}, "batch_size"),
        ({"start": datetime(2024, 1, 1)}, "timezone-aware"),
    ],
)
def test_config_refuses_bad_knobs(knobs, message):
    with pytest.raises(ValueError, match=message):
        SimulatorConfig(**knobs)


def test_site_is_seeded_and_has_a_handful_of_slow_pages():
    site = build_site(7)
    assert site == build_site(7) and site != build_site(8)
    assert len(site.pages) == 200 and len({p.path for p in site.pages}) == 200
    assert site.pages[0].path == "/"
    slow = [p for p in site.pages if p.slow]
    assert 3 <= len(slow) <= 8
    fastest_slow = min(p.load_median_ms for p in slow)
    assert all(p.load_median_ms < fastest_slow for p in site.pages if not p.slow)
    assert len(build_site(7, pages=3).pages) == 3
