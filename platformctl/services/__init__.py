"""How to configure and launch each local service (pure argv/config/env builders)."""

__all__ = ["airflow", "cassandra", "kafka"]
