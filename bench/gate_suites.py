"""The quality gates' figures: the gates' share of a Kafka -> gold run, and their suites by
Great Expectations alone against the one pass, over the same lake.

:func:`run_suites` takes the lake a pipeline run has just left and evaluates
the suites ``check_silver`` and ``check_gold`` run, on the same rows they
read (silver's typed columns of the run's days; each gold view's rows of
those days), first as GX alone evaluates them (``validate_with_gx``, one
table at a time, cached as the gate cached it before the one pass), then as
the gates do now (``validate_dataframes``: silver's suite in one query, the
four views' in one); each in Spark jobs, seconds and JVM cores, and both
must give the same summaries. :func:`gate_figures` and :func:`print_gates`
read the gates' own steps from a pipeline run's figures.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from bench.meter import Meter
from core.settings import Settings

__all__ = ["gate_figures", "print_gates", "run_suites"]

GATES = ("check_silver", "check_gold")


def _tables(spark: Any, settings: Settings, days: list[date]) -> dict[str, list]:
    """(table, suite) pairs each gate validates, read as the gates read them."""
    from pyspark.sql import functions as F

    from batch_layer.gold import gold_path
    from batch_layer.quality import view_suite
    from batch_layer.silver import SILVER_COLUMNS, silver_path
    from data_contracts import load_contract
    from data_contracts.derive import expectation_suite
    from pipelines import collector_pipeline
    from views.input import PAYLOAD

    WEB_EVENTS = collector_pipeline()

    contract = load_contract(WEB_EVENTS.contract, WEB_EVENTS.contract_major)
    silver = spark.read.format("delta").load(silver_path(settings, WEB_EVENTS))
    chosen = silver.where(F.col("event_date").isin(days))
    typed = chosen.select(*[c for c in chosen.columns if c != PAYLOAD])
    gold = [
        (
            spark.read.format("delta")
            .load(gold_path(settings, view))
            .where(F.col("window_date").isin(days)),
            view_suite(view),
        )
        for view in WEB_EVENTS.view_specs
    ]
    suite = expectation_suite(contract, extra_columns=SILVER_COLUMNS)
    return {"check_silver": [(typed, suite)], "check_gold": gold}


def run_suites(spark: Any, settings: Settings, days: list[date], meter: Meter) -> dict:
    """Each gate's suites by GX alone, then in one pass: {gate: {engine: figures}}."""
    from data_contracts.derive import validate_dataframes, validate_with_gx

    out: dict[str, dict] = {}
    for gate, tables in _tables(spark, settings, days).items():
        figures: dict[str, dict] = {}
        summaries = {}
        with meter.measure(figures.setdefault("gx", {})):
            summaries["gx"] = [validate_with_gx(df, suite) for df, suite in tables]
        with meter.measure(figures.setdefault("one_pass", {})):
            summaries["one_pass"] = validate_dataframes(tables)
        if summaries["gx"] != summaries["one_pass"]:
            raise RuntimeError(f"{gate}: the one pass and GX disagree: {summaries}")
        expectations = sum(len(suite.expectations) for _, suite in tables)
        figures["expectations"] = expectations
        figures["left_to_gx"] = sum(s.engines["gx"] for s in summaries["one_pass"])
        figures["passed"] = all(s.success for s in summaries["one_pass"])
        out[gate] = figures
        print(
            f"[bench]   {gate} suites ({expectations} expectations): GX alone "
            f"{figures['gx']['seconds']:.1f}s / {figures['gx']['jobs']} jobs, one pass "
            f"{figures['one_pass']['seconds']:.1f}s / {figures['one_pass']['jobs']} jobs",
            flush=True,
        )
    return out


def gate_figures(pipeline: dict) -> dict:
    """The gates' seconds, jobs and share of a pipeline run (``_summary``'s figures)."""
    steps = pipeline["steps"]
    seconds = sum(steps[g]["seconds"] for g in GATES if g in steps)
    return {
        "seconds": round(seconds, 2),
        "jobs": sum(steps[g]["jobs"] for g in GATES if g in steps),
        "share": round(seconds / pipeline["seconds"], 4) if pipeline["seconds"] else None,
        **{g: {k: steps[g][k] for k in ("seconds", "jobs")} for g in GATES if g in steps},
    }


def print_gates(label: str, pipeline: dict, raw: dict, suites: dict | None) -> None:
    """One line for the gates of a run, next to the raw job's, and the suites' A/B."""
    gates = gate_figures(pipeline)
    per_gate = ", ".join(
        f"{g} {gates[g]['seconds']:.1f}s / {gates[g]['jobs']} jobs" for g in GATES if g in gates
    )
    print(
        f"{label}: gates {gates['seconds']:.1f}s of Kafka -> gold {pipeline['seconds']:.1f}s "
        f"({gates['share']:.1%}; {per_gate}); raw Kafka -> Parquet {raw['seconds']:.1f}s"
    )
    for gate, figures in (suites or {}).items():
        gx, one = figures["gx"], figures["one_pass"]
        print(
            f"  {gate} suites, {figures['expectations']} expectations "
            f"({figures['left_to_gx']} left to GX): GX alone {gx['seconds']:.1f}s / "
            f"{gx['jobs']} jobs -> one pass {one['seconds']:.1f}s / {one['jobs']} jobs"
        )
