"""How to configure and launch each local JVM service (pure argv/config builders)."""

__all__ = ["cassandra", "kafka"]
