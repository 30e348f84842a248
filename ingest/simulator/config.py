"""The simulator's knobs: one frozen, validated object, built by the caller."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["DEFAULT_START", "SimulatorConfig"]

DEFAULT_START = datetime(2024, 1, 1, tzinfo=UTC)
"""Where the simulated clock starts unless told otherwise (fixed, for reproducible runs)."""

_SHARES = (
    "known_user_rate",
    "duplicate_rate",
    "late_rate",
    "out_of_order_rate",
    "skewed_client_rate",
    "invalid_rate",
    "checkout_rate",
)


@dataclass(frozen=True)
class SimulatorConfig:
    """Everything that shapes one simulated run; the same config and seed give the same events."""

    seed: int = 7
    """Seed of every random stream (one ``random.Random`` per concern, derived from it)."""
    pages: int = 200
    """Number of pages of the simulated site."""
    zipf_exponent: float = 1.1
    """Exponent of the Zipf law of page (and search term) popularity."""
    users: int = 1000
    """Number of distinct browsers (anonymousIds) that visit the site."""
    known_user_rate: float = 0.3
    """Share of users who have an account: they identify once, then carry a userId."""
    events: int | None = 10_000
    """Number of distinct events to generate (duplicates come on top); or use ``duration_s``."""
    duration_s: float | None = None
    """Length of the simulated run in seconds, instead of ``events``."""
    rate: float = 100.0
    """Events per second of the simulated clock, and the target rate when sending."""
    start: datetime = DEFAULT_START
    """Simulated time of the start of the run (timezone-aware)."""
    think_time_s: float = 20.0
    """Mean time between two events of one session; with ``rate`` it sets the concurrency."""
    batch_size: int = 100
    """Events per request to ``/v1/batch`` (keep requests under the collector's 500 KB)."""
    duplicate_rate: float = 0.0
    """Share of events sent a second time, same messageId, in a later batch."""
    late_rate: float = 0.0
    """Share of events that happened ``late_by_s`` before they are sent (offline clients)."""
    late_by_s: float = 600.0
    """How long late events wait on the client before they are sent."""
    out_of_order_rate: float = 0.0
    """Share of batches whose events are sent shuffled instead of in the order they happened."""
    skewed_client_rate: float = 0.0
    """Share of users whose device clock is off by ``skew_s`` (ahead or behind, at random)."""
    skew_s: float = 3600.0
    """Clock error of skewed clients, in seconds."""
    invalid_rate: float = 0.0
    """Share of events made invalid on purpose, each with a labelled defect."""
    checkout_rate: float = 0.0
    """Share of a logged-in user's events followed by a completed checkout (an ``Order
    Completed`` track call; the checkout service records the same order,
    :func:`pipelines.simulators.checkouts.orders_of_visits`). 0: no checkout, and the
    traffic of a seed is what it was without this knob."""

    def __post_init__(self) -> None:
        if (self.events is None) == (self.duration_s is None):
            raise ValueError(
                "Set exactly one of events (a count) and duration_s (simulated seconds; "
                "pass events=None with it); "
                f"got events={self.events!r}, duration_s={self.duration_s!r}."
            )
        if self.events is not None and self.events < 1:
            raise ValueError(f"events must be at least 1, got {self.events}.")
        if self.duration_s is not None and self.duration_s <= 0:
            raise ValueError(f"duration_s must be positive, got {self.duration_s}.")
        for name, value in (("pages", self.pages), ("users", self.users)):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}.")
        if not 1 <= self.batch_size <= 2500:
            raise ValueError(f"batch_size must be between 1 and 2500, got {self.batch_size}.")
        for name, value in (
            ("rate", self.rate),
            ("zipf_exponent", self.zipf_exponent),
            ("think_time_s", self.think_time_s),
        ):
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {value}.")
        for name, value in (("late_by_s", self.late_by_s), ("skew_s", self.skew_s)):
            if value < 0:
                raise ValueError(f"{name} must not be negative, got {value}.")
        for name in _SHARES:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} is a share and must be between 0 and 1, got {value}.")
        if self.start.tzinfo is None:
            raise ValueError(
                f"start must be timezone-aware (e.g. 2024-01-01T00:00:00Z), got {self.start!r}."
            )
