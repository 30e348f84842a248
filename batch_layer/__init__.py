"""The batch layer: the retained Kafka log reprocessed into Delta (bronze, silver, gold)."""

__all__ = ["bronze", "gold", "silver"]
