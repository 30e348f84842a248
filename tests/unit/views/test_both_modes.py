"""Both modes, one test: the same rows through a batch read and a streaming query."""

from __future__ import annotations

import pytest

from tests.support.web import WEB_VIEWS

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("spec", WEB_VIEWS, ids=lambda spec: spec.name)
def test_batch_and_stream_give_the_same_view(spec, simulated):
    batch = simulated("batch", spec)
    stream = simulated("stream", spec)
    assert len(batch) > 3, "the simulated run should give this view several rows"
    assert sorted(stream) == sorted(batch)
    for key, measures in batch.items():
        assert stream[key] == measures, key
