"""What differs between a view's published batch rows and its speed rows: pure functions.

The ``reconcile`` step (:mod:`batch_layer.reconcile`) reads both layers' rows
of each closed window and hands them here, one window at a time. A row is
``(window, key)``; both layers compute it with the same view function, so
on a closed window whose events all reached both layers they must match,
measure by measure, as the measure's kind says (:mod:`views.kinds`: each kind's
``comparable`` value and ``tolerance``): counts, maxima and minima exactly,
sums to floating-point rounding, HyperLogLog sketches by their registers'
estimates, KLL sketches by their number of values.

A row present on one side only is a difference (relative difference 1). A
row whose window and key received an event the speed layer may have dropped
as late (the step computes them) is skipped and counted, not compared: the
batch layer counts late events by design.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from views.kinds import HLL_TOLERANCE, SUM_TOLERANCE, kind
from views.spec import ViewSpec

__all__ = [
    "EXAMPLES",
    "HLL_TOLERANCE",
    "SUM_TOLERANCE",
    "WHAT_TO_DO",
    "RowDifference",
    "ViewDrift",
    "comparable",
    "compare_row",
    "iso",
    "relative_difference",
    "report_markdown",
    "within",
]

EXAMPLES = 20
"""Differing rows a result keeps, with both sides' values, for the report."""

Key = tuple[Any, ...]
Values = Sequence[Any]
"""A row's stored measure values, in the view's order (as the by-minute tables hold them)."""


def iso(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC.

    >>> iso(0)
    '1970-01-01T00:00:00Z'
    """
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def comparable(kind_name: str, value: Any) -> Any:
    """The number a stored measure value is compared by (its kind's
    :attr:`~views.kinds.Kind.comparable`).

    >>> comparable("count", None), comparable("sum", 2), comparable("max", None)
    (0, 2.0, None)
    """
    return kind(kind_name).comparable(value)


def relative_difference(batch: Any, speed: Any) -> float:
    """``|batch - speed| / max(|batch|, |speed|)``: 0 when equal, 1 when one side is absent.

    >>> relative_difference(10, 8), relative_difference(0, 0), relative_difference(None, 3.0)
    (0.2, 0.0, 1.0)
    """
    if batch == speed:
        return 0.0
    if batch is None or speed is None:
        return 1.0
    return abs(batch - speed) / max(abs(batch), abs(speed))


def within(kind_name: str, batch: Any, speed: Any) -> bool:
    """Whether two comparable values of a kind agree (its :meth:`~views.kinds.Kind.agrees`).

    >>> within("count", 3, 3), within("sum", 0.1 + 0.2, 0.3), within("hll", 100.0, 100.5)
    (True, True, True)
    """
    return kind(kind_name).agrees(batch, speed)


@dataclass(frozen=True)
class RowDifference:
    """One ``(window, key)`` row where the layers differ (or the largest difference seen)."""

    window: int
    """Window start, epoch ms."""
    key: Key
    measure: str
    """The measure with the largest relative difference (``row``: the row is on one side)."""
    batch: Mapping[str, Any] | None
    """The batch row's comparable values per measure; None: batch has no such row."""
    speed: Mapping[str, Any] | None
    relative: float
    differing: tuple[str, ...] = ()
    """Every measure beyond its tolerance (all of them for a row on one side only)."""

    def describe(self) -> str:
        """``2026-11-23T10:04:00Z ('/pricing',) page_views: batch 12 vs speed 11 (8.3%)``."""
        if self.batch is None or self.speed is None:
            side = "speed" if self.batch is None else "batch"
            return f"{iso(self.window)} {self.key} only in {side}"
        b, s = self.batch.get(self.measure), self.speed.get(self.measure)
        return (
            f"{iso(self.window)} {self.key} {self.measure}: batch {_short(b)} vs speed "
            f"{_short(s)} ({self.relative:.2%})"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "window": iso(self.window),
            "key": list(self.key),
            "measure": self.measure,
            "differing": list(self.differing),
            "batch": None if self.batch is None else dict(self.batch),
            "speed": None if self.speed is None else dict(self.speed),
            "relative": self.relative,
        }


def _short(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


@dataclass
class ViewDrift:
    """One view's reconciliation: what was compared and what differed."""

    view: str
    window_from: int | None = None
    """First window compared (epoch ms); None: none."""
    window_to: int | None = None
    """End of the last window compared (exclusive)."""
    speed_version: int = 0
    windows_compared: int = 0
    windows_differing: int = 0
    rows_compared: int = 0
    rows_differing: int = 0
    rows_skipped_late: int = 0
    largest: RowDifference | None = None
    """The largest relative difference of any compared value (within tolerance or not)."""
    differing_windows: list[int] = field(default_factory=list)
    examples: list[RowDifference] = field(default_factory=list)
    """The first :data:`EXAMPLES` differing rows."""
    note: str = ""
    """Why fewer windows than asked were compared, when so."""

    @property
    def largest_difference(self) -> float:
        return 0.0 if self.largest is None else self.largest.relative

    def add_window(
        self,
        spec: ViewSpec,
        window: int,
        batch: Mapping[Key, Values],
        speed: Mapping[Key, Values],
        late: Iterable[Key] = (),
    ) -> None:
        """Compare one window's rows of both layers (each ``key -> stored measure values``),
        skipping the keys in ``late``."""
        skip = set(late)
        differs = False
        for key in sorted(batch.keys() | speed.keys(), key=repr):
            if key in skip:
                self.rows_skipped_late += 1
                continue
            self.rows_compared += 1
            found = compare_row(spec, window, key, batch.get(key), speed.get(key))
            if found is None:
                continue
            if self.largest is None or found.relative > self.largest.relative:
                self.largest = found
            if found.differing:
                differs = True
                self.rows_differing += 1
                if len(self.examples) < EXAMPLES:
                    self.examples.append(found)
        self.windows_compared += 1
        if differs:
            self.windows_differing += 1
            self.differing_windows.append(window)

    def as_dict(self) -> dict[str, Any]:
        return {
            "view": self.view,
            "window_from": None if self.window_from is None else iso(self.window_from),
            "window_to": None if self.window_to is None else iso(self.window_to),
            "speed_version": self.speed_version,
            "windows_compared": self.windows_compared,
            "windows_differing": self.windows_differing,
            "rows_compared": self.rows_compared,
            "rows_differing": self.rows_differing,
            "rows_skipped_late": self.rows_skipped_late,
            "largest_difference": self.largest_difference,
            "largest_at": self.largest.describe() if self.largest else None,
            "differing_windows": [iso(w) for w in self.differing_windows],
            "examples": [e.as_dict() for e in self.examples],
            "note": self.note,
        }


def compare_row(
    spec: ViewSpec, window: int, key: Key, batch: Values | None, speed: Values | None
) -> RowDifference | None:
    """The difference of one row between the layers; None when every value is equal."""
    kinds = [(m.name, m.kind) for m in spec.measures]
    if batch is None or speed is None:
        values = {n: comparable(k, v) for (n, k), v in zip(kinds, batch or speed, strict=True)}
        names = tuple(n for n, _ in kinds)
        b, s = (values, None) if speed is None else (None, values)
        return RowDifference(window, key, "row", b, s, 1.0, names)
    b_values = {n: comparable(k, v) for (n, k), v in zip(kinds, batch, strict=True)}
    s_values = {n: comparable(k, v) for (n, k), v in zip(kinds, speed, strict=True)}
    largest, at = 0.0, kinds[0][0]
    differing = []
    for name, kind_name in kinds:
        relative = relative_difference(b_values[name], s_values[name])
        if relative > largest:
            largest, at = relative, name
        if not within(kind_name, b_values[name], s_values[name]):
            differing.append(name)
    if largest == 0.0 and not differing:
        return None
    return RowDifference(window, key, at, b_values, s_values, largest, tuple(differing))


WHAT_TO_DO = """\
What to do (docs/operations.md, "The speed and batch views disagree"):

1. Read the rows above: a row "only in batch" on many consecutive windows means the speed
   layer lost or never wrote them; values lower in speed mean it missed events.
2. Check the speed job: `python -m platformctl status` (lag, late and rejected rows, the
   live run and version) and its log (`.platform/logs/speed.log`, `speed.replay_*` and
   `speed.query_*` events).
3. Repair by rebuilding the live views from the log into a new version:
   `python -m speed_layer replay --from earliest --pipeline P`; serving switches to it once it has
   caught up (`platformctl status` shows the catch-up).
4. Re-run this task (clear it in Airflow, or `python -m batch_layer reconcile --pipeline P`):
   it compares the same windows again, against the version the replay switched to.

Serving answers windows before the batch boundary from the batch views, so answers there
are exact whatever the speed layer holds; the drift matters for windows after it, until
the batch layer publishes them.
"""


def report_markdown(
    pipeline: str,
    run_id: str,
    checked_at: datetime,
    results: Sequence[ViewDrift],
    threshold: int,
) -> str:
    """The reconciliation's report for people: per view, then each drifting view's rows."""
    drifting = [r for r in results if r.windows_differing > threshold]
    verdict = "DRIFT" if drifting else "OK"
    out = [
        f"# Reconciliation of {pipeline}: {verdict}",
        "",
        f"- run `{run_id}`, checked at {checked_at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}",
        f"- a view drifts when more than {threshold} closed window(s) differ between the "
        "published batch rows and the speed rows",
        "",
        "| view | windows | differing | rows compared | differing | skipped late "
        "| largest difference | speed version |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        span = (
            f"{iso(r.window_from)} .. {iso(r.window_to)} ({r.windows_compared})"
            if r.window_from is not None and r.window_to is not None
            else f"none{f' ({r.note})' if r.note else ''}"
        )
        largest = f"{r.largest_difference:.2%}" + (f": {r.largest.describe()}" if r.largest else "")
        out.append(
            f"| {r.view} | {span} | {r.windows_differing} | {r.rows_compared} | "
            f"{r.rows_differing} | {r.rows_skipped_late} | {largest} | {r.speed_version} |"
        )
    for r in drifting:
        shown = ", ".join(iso(w) for w in r.differing_windows[:30])
        more = len(r.differing_windows) - 30
        out += [
            "",
            f"## {r.view}: {r.windows_differing} of {r.windows_compared} windows differ",
            "",
            f"Windows: {shown}{f' and {more} more' if more > 0 else ''}",
            "",
            f"First {len(r.examples)} differing rows (comparable values: counts, sums, "
            "register estimates of HLL sketches, numbers of values of KLL sketches):",
            "",
            "| window | key | differing | batch | speed |",
            "| --- | --- | --- | --- | --- |",
        ]
        for e in r.examples:
            out.append(
                f"| {iso(e.window)} | {', '.join(map(str, e.key))} | {', '.join(e.differing)} "
                f"| {_values(e.batch)} | {_values(e.speed)} |"
            )
    if drifting:
        out += ["", WHAT_TO_DO]
    return "\n".join(out) + "\n"


def _values(values: Mapping[str, Any] | None) -> str:
    if values is None:
        return "(no row)"
    return ", ".join(f"{name} {_short(value)}" for name, value in values.items())
