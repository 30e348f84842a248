"""The pipeline declarations every layer reads, owned by none of them.

One module of :mod:`pipelines.declared` per pipeline declares its topic, contract,
views, how its events arrive, who owns it and which fields identify a person
(:class:`PipelineSpec`); :data:`PIPELINES` holds them all, checked. The
collector, the speed and batch layers, serving, the SQL server, forget, the
DAGs and the metrics iterate over them; nothing else names a pipeline. A
module may instead declare a pipeline over other pipelines' data
(:class:`DerivedSpec`, in :data:`DERIVED`): a table built by a
transformation of :mod:`derived` from their silver events or tables.
Importable without Spark or Airflow.
"""

from pipelines.derived import DerivedSpec, Input
from pipelines.registry import (
    DERIVED,
    PIPELINES,
    DeclarationError,
    check_deployment,
    check_pipelines,
    collector_pipeline,
    collector_routes,
    declared_pipeline,
    declared_views,
    derived_pipeline,
    pipeline,
    pipeline_of_view,
    validate_all,
    validated,
)
from pipelines.spec import (
    Arrival,
    Collector,
    PipelineSpec,
    Producer,
    Reconciliation,
    SpeedOptions,
    topic_table_name,
)

__all__ = [
    "DERIVED",
    "PIPELINES",
    "Arrival",
    "Collector",
    "DeclarationError",
    "DerivedSpec",
    "Input",
    "PipelineSpec",
    "Producer",
    "Reconciliation",
    "SpeedOptions",
    "check_deployment",
    "check_pipelines",
    "collector_pipeline",
    "collector_routes",
    "declared_pipeline",
    "declared_views",
    "derived_pipeline",
    "pipeline",
    "pipeline_of_view",
    "topic_table_name",
    "validate_all",
    "validated",
]
