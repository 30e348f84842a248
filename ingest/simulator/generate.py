"""From a config to the messages to send: site, users, traffic, faults, batches.

``generate(config)`` is a pure function of the config: the same seed gives the
same events, message ids and timestamps, byte for byte.

How the wire timestamps are set (see :mod:`ingest.simulator.events` for the
time model): each batch leaves the client at ``sent_at`` = the newest event
the batch carries + a simulated network delay of 20-250 ms. For every message
``originalTimestamp`` = true time + client skew and ``sentAt`` = ``sent_at`` +
client skew. :func:`ingest.simulator.send.send` re-stamps ``sentAt`` with the
real moment each request leaves, so the collector's correction gives back the
true time whatever the replay speed.
"""

from __future__ import annotations

import copy
import json
import random
from datetime import timedelta

from ingest.simulator.clock import format_ts, from_ms
from ingest.simulator.config import SimulatorConfig
from ingest.simulator.events import SimEvent
from ingest.simulator.faults import make_invalid, make_late, plan_batches
from ingest.simulator.sessions import Draft, build_users, simulate_traffic
from ingest.simulator.site import build_site

__all__ = ["generate"]


def generate(config: SimulatorConfig) -> list[SimEvent]:
    """Every message of the run, in the order they are sent (duplicates included)."""
    site = build_site(config.seed, config.pages, config.zipf_exponent)
    drafts = simulate_traffic(config, site, build_users(config))
    drafts = make_invalid(make_late(drafts, config), config)
    network = random.Random(f"{config.seed}/network")
    events = []
    for batch in plan_batches(drafts, config):
        sent_ms = max(draft.emit_ms for draft, _ in batch) + network.randint(20, 250)
        events.extend(_message(draft, sent_ms, duplicate) for draft, duplicate in batch)
    return events


def _message(draft: Draft, sent_ms: int, duplicate: bool) -> SimEvent:
    payload = copy.deepcopy(draft.body) if duplicate else dict(draft.body)
    payload["originalTimestamp"] = format_ts(from_ms(draft.time_ms + draft.skew_ms))
    payload["sentAt"] = format_ts(from_ms(sent_ms + draft.skew_ms))
    return SimEvent(
        seq=draft.seq,
        payload=json.dumps(payload) if draft.defect == "not_an_object" else payload,
        time=from_ms(draft.time_ms),
        sent_at=from_ms(sent_ms),
        skew=timedelta(milliseconds=draft.skew_ms),
        defect=draft.defect,
        duplicate=duplicate,
    )
