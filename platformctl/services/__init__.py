"""The local services, one module each, and :data:`REGISTRY`: their records in start order.

Each module holds how to configure and launch its service (argv, config and
environment builders) and exports its :class:`~platformctl.services.base.Service`
record(s); :mod:`platformctl.platform` starts, probes and stops them in this order.
"""

from platformctl.services import (
    airflow,
    batch,
    cassandra,
    collector,
    kafka,
    prometheus,
    serving,
    spark,
    speed,
    sql,
)
from platformctl.services.base import Service

__all__ = [
    "REGISTRY",
    "Service",
    "airflow",
    "base",
    "batch",
    "cassandra",
    "collector",
    "kafka",
    "prometheus",
    "serving",
    "spark",
    "speed",
    "sql",
]

REGISTRY: tuple[Service, ...] = (
    *kafka.SERVICES,
    *cassandra.SERVICES,
    *spark.SERVICES,
    collector.SERVICE,
    speed.SERVICE,
    sql.SERVICE,
    serving.SERVICE,
    batch.SERVICE,
    prometheus.SERVICE,
    *airflow.SERVICES,
)
"""Every local service, each after the services it requires; ``down`` stops in reverse."""
