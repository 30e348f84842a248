"""Traffic simulators of declared pipelines whose events do not come through the collector:
each produces its pipeline's records straight to Kafka and keeps their ground truth."""
