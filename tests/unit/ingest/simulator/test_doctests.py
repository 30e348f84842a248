from __future__ import annotations

import doctest

import pytest

import ingest.simulator
import ingest.simulator.clock


@pytest.mark.parametrize("module", [ingest.simulator, ingest.simulator.clock])
def test_docstring_examples(module):
    failed, attempted = doctest.testmod(module)
    assert attempted > 0 and failed == 0
