"""The Cassandra layout: every table the platform writes and serves from, and its statements.

The speed layer, the batch layer and serving take their tables and CQL from
here and from nowhere else: :mod:`layout.views` (a view's two tables in a
layer), :mod:`layout.pointers` (the batch pointers and the speed
bookkeeping), :mod:`layout.reads` (the reads of those pointers),
:mod:`layout.ddl` (creating all of them), and the one lake table both
sides use, gold (:mod:`layout.lake`). Importing it needs neither Spark nor
a Cassandra driver.
"""

from layout.ddl import (
    apply_ttl,
    create_statements,
    create_tables,
    create_view_tables,
    ensure_columns,
)
from layout.lake import gold_path
from layout.pointers import (
    BOUNDARY_TABLE,
    DAYS_COLUMNS,
    DAYS_TABLE,
    PROGRESS_COLUMNS,
    PROGRESS_TABLE,
    RECONCILE_COLUMNS,
    RECONCILE_TABLE,
    RUNS_COLUMNS,
    RUNS_TABLE,
    SPEED_VERSIONS_TABLE,
    SUPERSEDED_TABLE,
    PointerTables,
    missing_columns,
)
from layout.reads import (
    Boundary,
    SpeedProgress,
    read_boundaries,
    read_live_floor,
    read_reconcile_results,
    read_speed_progress,
    read_speed_versions,
    read_watermarks,
)
from layout.views import GRAINS, LAYERS, Grain, Layer, LayerShape, ViewTables, view_tables

__all__ = [
    "BOUNDARY_TABLE",
    "DAYS_COLUMNS",
    "DAYS_TABLE",
    "GRAINS",
    "LAYERS",
    "PROGRESS_COLUMNS",
    "PROGRESS_TABLE",
    "RECONCILE_COLUMNS",
    "RECONCILE_TABLE",
    "RUNS_COLUMNS",
    "RUNS_TABLE",
    "SPEED_VERSIONS_TABLE",
    "SUPERSEDED_TABLE",
    "Boundary",
    "Grain",
    "Layer",
    "LayerShape",
    "PointerTables",
    "SpeedProgress",
    "ViewTables",
    "apply_ttl",
    "create_statements",
    "create_tables",
    "create_view_tables",
    "ensure_columns",
    "gold_path",
    "missing_columns",
    "read_boundaries",
    "read_live_floor",
    "read_reconcile_results",
    "read_speed_progress",
    "read_speed_versions",
    "read_watermarks",
    "view_tables",
]
