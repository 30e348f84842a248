"""The pipeline declarations every layer reads, owned by none of them.

One module of :mod:`pipelines.declared` per pipeline declares its topic, contract,
views, how its events arrive, who owns it and which fields identify a person
(:class:`PipelineSpec`); :data:`PIPELINES` holds them all, checked. The
collector, the speed and batch layers, serving, the SQL server, forget, the
DAGs and the metrics iterate over them; nothing else names a pipeline.
Importable without Spark or Airflow.
"""

from pipelines.registry import (
    PIPELINES,
    DeclarationError,
    check_deployment,
    check_pipelines,
    collector_pipeline,
    collector_routes,
    declared_views,
    pipeline,
    pipeline_of_view,
    validate_all,
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
    "PIPELINES",
    "Arrival",
    "Collector",
    "DeclarationError",
    "PipelineSpec",
    "Producer",
    "Reconciliation",
    "SpeedOptions",
    "check_deployment",
    "check_pipelines",
    "collector_pipeline",
    "collector_routes",
    "declared_views",
    "pipeline",
    "pipeline_of_view",
    "topic_table_name",
    "validate_all",
]
