"""Deliberate trouble: late, invalid, duplicated and out-of-order events.

Each fault draws from its own random stream (``"{seed}/late"``,
``"{seed}/invalid"`` ...), and draws once per event (or per batch) whatever
the knob says. So turning one knob never changes what the others do, and the
clean traffic under the faults stays the same for the same seed.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from ingest.simulator.config import SimulatorConfig
from ingest.simulator.sessions import Draft

__all__ = ["make_invalid", "make_late", "plan_batches"]

_BAD_TYPES = {"page": "pageview", "track": "Track", "identify": "identity"}


def make_late(drafts: list[Draft], config: SimulatorConfig) -> list[Draft]:
    """A ``late_rate`` share of events happened ``late_by_s`` before they are sent.

    They keep their place in the stream (an offline client flushing its queue):
    only their event time moves into the past.
    """
    rng = random.Random(f"{config.seed}/late")
    late_by_ms = round(config.late_by_s * 1000)
    out = []
    for draft in drafts:
        if rng.random() < config.late_rate:
            draft = replace(draft, time_ms=draft.emit_ms - late_by_ms)
        out.append(draft)
    return out


def make_invalid(drafts: list[Draft], config: SimulatorConfig) -> list[Draft]:
    """An ``invalid_rate`` share of events breaks the contract in one labelled way each.

    The defect is drawn among those that fit the call (a page view can get a
    negative load time, a track call can lose its ``event`` ...). The
    ``not_an_object`` defect is applied when the payload is finalised.
    """
    rng = random.Random(f"{config.seed}/invalid")
    out = []
    for draft in drafts:
        if rng.random() < config.invalid_rate:
            defect = rng.choice(_defects_for(draft.body))
            draft = replace(draft, body=_break(draft.body, defect), defect=defect)
        out.append(draft)
    return out


def plan_batches(drafts: list[Draft], config: SimulatorConfig) -> list[list[tuple[Draft, bool]]]:
    """Cut the stream into batches of ``batch_size``, with duplicates and shuffles.

    A duplicated event is sent again 1 to 3 batches after the original (or
    after the last original, near the end of the run). Each batch is then,
    with probability ``out_of_order_rate``, shuffled. Returns ``(draft,
    is_duplicate)`` per message, batch by batch.
    """
    dup_rng = random.Random(f"{config.seed}/duplicates")
    order_rng = random.Random(f"{config.seed}/order")
    size, count = config.batch_size, len(drafts)
    keyed: list[tuple[float, int, int, Draft, bool]] = []
    for index, draft in enumerate(drafts):
        keyed.append((float(index), 0, draft.seq, draft, False))
        if dup_rng.random() < config.duplicate_rate:
            at = index + dup_rng.randint(size, 3 * size) + 0.5
            keyed.append((at if at < count else float(count + index), 1, draft.seq, draft, True))
    keyed.sort(key=lambda item: item[:3])
    messages = [(draft, duplicate) for *_, draft, duplicate in keyed]
    batches = [messages[i : i + size] for i in range(0, len(messages), size)]
    for batch in batches:
        if order_rng.random() < config.out_of_order_rate:
            order_rng.shuffle(batch)
    return batches


def _defects_for(body: dict[str, Any]) -> list[str]:
    defects = ["missing_identity", "bad_type", "not_an_object"]
    if body["type"] == "page":
        defects += ["negative_load_time", "wrong_property_type"]
    if body["type"] == "track":
        defects.append("track_without_event")
    if body.get("event") == "Site Searched":
        defects.append("wrong_property_type")
    return defects


def _break(body: dict[str, Any], defect: str) -> dict[str, Any]:
    broken = dict(body)
    properties = dict(body.get("properties") or {})
    if defect == "missing_identity":
        broken.pop("userId", None)
        broken.pop("anonymousId", None)
    elif defect == "bad_type":
        broken["type"] = _BAD_TYPES.get(body["type"], "unknown")
    elif defect == "track_without_event":
        del broken["event"]
    elif defect == "negative_load_time":
        properties["load_time_ms"] = -properties["load_time_ms"]
    elif defect == "wrong_property_type":
        field = "load_time_ms" if body["type"] == "page" else "results_count"
        properties[field] = str(properties[field])
    if "properties" in body:
        broken["properties"] = properties
    return broken
