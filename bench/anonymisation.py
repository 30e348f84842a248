"""What anonymising personal data costs the collector per event, in one process.

Routes the collector benchmark's events through the collector's intake
(anonymise, enrich, validate with msgspec, encode) with each IP setting and
with none at all, and prints microseconds per event and the difference. The
traffic: events without an address (the request's is filled in, once per
request); events sending a client address, the same for a request's calls;
and events each sending an address of its own, all distinct, so that no
memoised rewrite helps (the worst case). No Kafka, no HTTP: what is measured
is CPU time of the intake alone, best of several repeats.

    .venv/bin/python -m bench.anonymisation --events 20000 --repeats 11
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from ipaddress import IPv4Address, IPv6Address

from bench.collector_throughput import _events
from core.collector_settings import CollectorSettings
from data_contracts import load_contract
from data_contracts.derive import compile_fast_validator
from ingest.anonymise import Anonymiser
from ingest.enrich import RequestFacts
from ingest.intake import Intake

_KEY = "bench-only-key-" + "0" * 32


def _with_addresses(events: list[dict], version: int, per: int = 1) -> list[dict]:
    """``events`` with client addresses of IP ``version``, a new one every ``per`` events."""
    out = []
    for i, event in enumerate(events):
        n = i // per
        address = IPv4Address(0xC6120000 + n) if version == 4 else IPv6Address((0x2001 << 112) + n)
        out.append({**event, "context": {**event["context"], "ip": str(address)}})
    return out


def _per_event_us(intake: Intake, events: list[dict], batch: int, repeats: int) -> float:
    """Best CPU time per event of routing ``events`` in requests of ``batch`` calls."""
    facts = RequestFacts(datetime.now(UTC), "bench", "1.0.0", ip="127.0.0.1")
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        for i in range(0, len(events), batch):
            intake.route(events[i : i + batch], facts)
        best = min(best, time.process_time() - started)
    return 1e6 * best / len(events)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100, help="events per request")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)

    contract = load_contract("web_events", 1)
    validate = compile_fast_validator(contract)
    base = [{k: v for k, v in e.items() if v is not None} for e in _events(args.events, "b")]
    traffic = {
        "request address": base,
        "IPv4 per request": _with_addresses(base, 4, args.batch),
        "distinct IPv4": _with_addresses(base, 4),
        "distinct IPv6": _with_addresses(base, 6),
    }
    anonymisers = {"none": Anonymiser({})} | {
        mode: Anonymiser.for_contract(
            contract, CollectorSettings(ip_anonymisation=mode, hash_key=_KEY)
        )
        for mode in ("keep", "truncate", "hash")
    }
    print(f"[bench] {args.events} events in requests of {args.batch}, best of {args.repeats}")
    print(f"{'traffic':<18} {'setting':<9} {'us/event':>9} {'vs none':>8}")
    for name, events in traffic.items():
        baseline = None
        for mode, anonymiser in anonymisers.items():
            intake = Intake(contract, validate, 32 * 1024, 64, anonymiser)
            cost = _per_event_us(intake, events, args.batch, args.repeats)
            baseline = cost if baseline is None else baseline
            print(f"{name:<18} {mode:<9} {cost:9.2f} {cost - baseline:+8.2f}", flush=True)


if __name__ == "__main__":
    main()
