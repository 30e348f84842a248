"""Traffic simulator: realistic, seeded website sessions as Segment calls, and their truth.

``generate(config)`` builds every message of a run (page views, clicks,
searches, identifies, plus the duplicates, late, skewed, shuffled and invalid
ones the knobs ask for); ``build_truth(events)`` says what a correct pipeline
must report for them; ``send(...)`` posts them to the collector.

>>> events = generate(SimulatorConfig(seed=1, events=50))
>>> build_truth(events).valid_events
50
"""

from ingest.simulator.clock import corrected_time, format_ts, minute_key, parse_ts
from ingest.simulator.config import DEFAULT_START, SimulatorConfig
from ingest.simulator.events import DEFECTS, SimEvent, shift_events, stamp_sent_at
from ingest.simulator.generate import generate
from ingest.simulator.send import RequestResult, SendError, SendReport, send
from ingest.simulator.sessions import LIBRARY_VERSION
from ingest.simulator.site import Page, SearchTerm, Site, build_site
from ingest.simulator.truth import (
    GroundTruth,
    LoadTime,
    build_truth,
    identity_of,
    normalise_query,
)

__version__ = LIBRARY_VERSION

__all__ = [
    "DEFAULT_START",
    "DEFECTS",
    "GroundTruth",
    "LoadTime",
    "Page",
    "RequestResult",
    "SearchTerm",
    "SendError",
    "SendReport",
    "SimEvent",
    "SimulatorConfig",
    "Site",
    "__version__",
    "build_site",
    "build_truth",
    "corrected_time",
    "format_ts",
    "generate",
    "identity_of",
    "minute_key",
    "normalise_query",
    "parse_ts",
    "send",
    "shift_events",
    "stamp_sent_at",
]
