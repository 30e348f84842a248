"""What tests share about the local Cassandra."""

from __future__ import annotations

__all__ = ["SCHEMA_TIMEOUT_S"]

SCHEMA_TIMEOUT_S = 120.0
"""Seconds a test's schema change (a keyspace dropped at teardown) may take: the node agrees
the change with itself and rewrites its schema tables, which takes far longer than a read
while the suite's Spark jobs hold both cores (the driver's default is 10 s)."""
