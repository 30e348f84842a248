"""The SQL server: Spark Connect over the serving views and silver's events (docs/sql.md)."""
