"""Send simulated messages to a Segment-compatible collector (``/v1/batch`` or ``/v1/import``).

Requests go out at a target rate over one keep-alive connection, with HTTP
Basic auth (write key as user, empty password). 429 and 5xx answers and
connection errors are retried, honouring ``Retry-After``, a bounded number of
times; then :class:`SendError` is raised with what was sent so far.

**sentAt.** Every attempt re-stamps each message's ``sentAt`` with the real
moment the request leaves, read on the client's clock: ``now + skew``
(:func:`~ingest.simulator.events.stamp_sent_at`); the body's batch-level
``sentAt`` is the sender's own (unskewed) clock. ``originalTimestamp`` is
left alone, so the collector's ``receivedAt - (sentAt - originalTimestamp)``
gives back each event's true ``time`` plus the network latency (a few ms),
however fast or slow the replay and however long a retry waited.

**Time modes.**

- ``replay``: timestamps stay on the simulated clock (``config.start``, a
  fixed past date by default). The pipeline windows the events in those
  historical minutes, and the ground truth of the generated events holds as is.
  Requests go to ``/v1/import`` (historical import): the live endpoints
  refuse events older than the event log's retention.
- ``live``: the whole run is first shifted so that the first request's
  simulated send time is now (:func:`~ingest.simulator.events.shift_events`):
  events carry ``originalTimestamp`` close to the real time they are sent
  (late ones ``late_by_s`` in the past) when ``rate`` is the rate they were
  generated at. Compute the ground truth from ``SendReport.events``, which
  carry the times actually assigned.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Literal, TextIO

import httpx

from ingest.simulator.clock import format_ts, from_ms, to_ms
from ingest.simulator.events import SimEvent, shift_events, stamp_sent_at

__all__ = ["RequestResult", "SendError", "SendReport", "send"]

TimeMode = Literal["replay", "live"]
_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RequestResult:
    """The outcome of one batch request."""

    index: int
    events: int
    status: int
    """Final HTTP status; 0 when the last attempt got no answer."""
    attempts: int
    accepted: int
    rejected: int
    seconds: float
    """From the first attempt to the final answer, waits included."""


@dataclass(frozen=True)
class SendReport:
    """What was sent and how the collector answered."""

    events: tuple[SimEvent, ...]
    """The messages as sent, with the ``sentAt`` (and in live mode all times) stamped."""
    requests: tuple[RequestResult, ...]
    rejected_by_reason: dict[str, int]
    """The collector's rejection reasons, as listed in its answers."""
    shift: timedelta
    """How far live mode moved the simulated clock (zero in replay mode)."""
    elapsed_s: float

    @property
    def sent(self) -> int:
        """Messages the collector answered with 2xx."""
        return sum(r.events for r in self.requests if 200 <= r.status < 300)

    @property
    def accepted(self) -> int:
        return sum(r.accepted for r in self.requests)

    @property
    def rejected(self) -> int:
        return sum(r.rejected for r in self.requests)


class SendError(RuntimeError):
    """Sending stopped; ``report`` holds what was sent before."""

    def __init__(self, message: str, report: SendReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class _Run:
    started: float
    shift: timedelta
    events: list[SimEvent] = field(default_factory=list)
    requests: list[RequestResult] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)

    def report(self) -> SendReport:
        return SendReport(
            tuple(self.events),
            tuple(self.requests),
            dict(sorted(self.reasons.items())),
            self.shift,
            time.monotonic() - self.started,
        )


def send(
    events: Sequence[SimEvent],
    url: str,
    write_key: str,
    rate: float | None = None,
    batch_size: int = 100,
    progress: bool = True,
    *,
    time_mode: TimeMode = "replay",
    max_retries: int = 5,
    max_wait_s: float = 60.0,
    timeout_s: float = 10.0,
    progress_every_s: float = 2.0,
    progress_stream: TextIO | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], None] = time.sleep,
) -> SendReport:
    """POST ``events`` in order to the collector, ``batch_size`` per request.

    ``replay`` mode posts to ``/v1/import`` (historical times), ``live`` mode to
    ``/v1/batch``.

    ``rate`` is the target in events per second (None: as fast as the
    collector answers). Progress is one JSON line every ``progress_every_s``
    on stderr (or ``progress_stream``) when ``progress`` is true.
    """
    if not write_key:
        raise ValueError("write_key is empty; pass the source's write key (HTTP Basic user).")
    if rate is not None and rate <= 0:
        raise ValueError(f"rate must be positive events per second or None, got {rate}.")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
    if time_mode not in ("replay", "live"):
        raise ValueError(f"time_mode must be 'replay' or 'live', got {time_mode!r}.")
    shift = timedelta(0)
    if time_mode == "live" and events:
        shift = from_ms(to_ms(now())) - min(event.sent_at for event in events)
        events = shift_events(events, shift)
    run = _Run(time.monotonic(), shift)
    path = "/v1/import" if time_mode == "replay" else "/v1/batch"
    ticker = _Progress(progress_stream or sys.stderr, progress_every_s) if progress else None
    with httpx.Client(base_url=url.rstrip("/"), auth=(write_key, ""), timeout=timeout_s) as client:
        done = 0
        for index, start in enumerate(range(0, len(events), batch_size)):
            if rate is not None:
                wait = run.started + done / rate - time.monotonic()
                if wait > 0:
                    sleep(wait)
            chunk = events[start : start + batch_size]
            _post(client, path, index, chunk, run, max_retries, max_wait_s, now, sleep)
            done += len(chunk)
            if ticker is not None:
                ticker.tick(run, force=False)
    if ticker is not None:
        ticker.tick(run, force=True)
    return run.report()


def _post(
    client: httpx.Client,
    path: str,
    index: int,
    chunk: Sequence[SimEvent],
    run: _Run,
    max_retries: int,
    max_wait_s: float,
    now: Callable[[], datetime],
    sleep: Callable[[float], None],
) -> None:
    first = time.monotonic()
    for attempt in range(1, max_retries + 2):
        moment = now()
        stamped = [stamp_sent_at(event, moment) for event in chunk]
        body = {"batch": [event.payload for event in stamped], "sentAt": format_ts(moment)}
        status, wait, answer = 0, None, None
        try:
            response = client.post(
                path,
                content=json.dumps(body, separators=(",", ":")).encode(),
                headers={"content-type": "application/json"},
            )
            status, answer = response.status_code, response
            wait = _retry_after(response.headers.get("retry-after"), moment)
        except httpx.TransportError as exc:
            answer = exc
        if 200 <= status < 300:
            accepted, rejected = _outcome(answer, len(chunk), run.reasons)
            run.events.extend(stamped)
            run.requests.append(
                RequestResult(
                    index, len(chunk), status, attempt, accepted, rejected, time.monotonic() - first
                )
            )
            return
        if (status and status not in _RETRY_STATUSES) or attempt > max_retries:
            run.requests.append(
                RequestResult(index, len(chunk), status, attempt, 0, 0, time.monotonic() - first)
            )
            raise SendError(_failure(index, status, attempt, answer), run.report())
        sleep(min(max_wait_s, wait if wait is not None else 0.5 * 2 ** (attempt - 1)))
    raise AssertionError("unreachable")  # pragma: no cover


def _retry_after(value: str | None, moment: datetime) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP-date)."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - moment).total_seconds())


def _outcome(response: httpx.Response, count: int, reasons: Counter[str]) -> tuple[int, int]:
    try:
        answer = response.json()
    except ValueError:
        return count, 0
    rejected = answer.get("rejected") if isinstance(answer, dict) else None
    if not isinstance(rejected, list):
        return count, 0
    for item in rejected:
        reasons[str(item.get("reason") if isinstance(item, dict) else item)] += 1
    accepted = answer.get("accepted")
    return (accepted if isinstance(accepted, int) else count - len(rejected)), len(rejected)


def _failure(index: int, status: int, attempts: int, answer: object) -> str:
    if isinstance(answer, httpx.TransportError):
        return (
            f"request {index}: no answer after {attempts} attempts ({answer!r}); "
            "is the collector running at that URL?"
        )
    assert isinstance(answer, httpx.Response)
    detail = answer.text[:300]
    if status in _RETRY_STATUSES:
        return (
            f"request {index}: still {status} after {attempts} attempts ({detail}); "
            "the collector keeps refusing, check its health (Kafka up?)."
        )
    hint = {
        401: "check the write key",
        413: "use a smaller batch_size",
    }.get(status, "the request itself was refused")
    return f"request {index}: HTTP {status} ({detail}); {hint}."


class _Progress:
    """One JSON line every ``every_s`` seconds: sent, accepted, rejected, rate."""

    def __init__(self, stream: TextIO, every_s: float) -> None:
        self._stream, self._every_s = stream, every_s
        self._last = time.monotonic()

    def tick(self, run: _Run, *, force: bool) -> None:
        moment = time.monotonic()
        if not force and moment - self._last < self._every_s:
            return
        self._last = moment
        elapsed = max(moment - run.started, 1e-9)
        sent = sum(r.events for r in run.requests)
        line = {
            "event": "simulator.done" if force else "simulator.progress",
            "sent": sent,
            "accepted": sum(r.accepted for r in run.requests),
            "rejected": sum(r.rejected for r in run.requests),
            "requests": len(run.requests),
            "retries": sum(r.attempts - 1 for r in run.requests),
            "rate": round(sent / elapsed, 1),
            "elapsed_s": round(elapsed, 3),
        }
        self._stream.write(json.dumps(line) + "\n")
        self._stream.flush()
