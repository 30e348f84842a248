"""A derived pipeline's table in the SQL server's catalog, as its contract lets SQL show it.

The view is named after the pipeline (``web_sessions``) and reads the table's
current version; the fields the contract hides from SQL (``exposeInSql: false``,
the default for a ``restricted`` field) are left out, nested ones too. Until
the table's first build the view has the same columns and no rows, so a query
written before the first run is not an error. The columns come from the
contract, not from reading the table: a refresh in which nothing changed makes
the same statement, which the catalog does not make again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from serving.connect.catalog import empty_view_sql, table_view_sql

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from core.settings import Settings
    from pipelines import DerivedSpec

__all__ = ["derived_view_sql"]


def derived_view_sql(spark: SparkSession, settings: Settings, spec: DerivedSpec) -> str:
    """The ``CREATE OR REPLACE VIEW`` of ``spec``'s table (empty before its first build)."""
    from data_contracts.derive import to_spark_schema
    from data_contracts.derive.privacy import sql_view
    from layout.lake import derived_path, table_version

    stored = to_spark_schema(spec.load_contract())
    exposed = sql_view(spark.createDataFrame([], stored), spec.load_contract()).schema
    path = derived_path(settings, spec.name)
    if table_version(spark, path) is None:
        return empty_view_sql(spec.name, exposed)
    return table_view_sql(spec.name, stored, exposed, path)
