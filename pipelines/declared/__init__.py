"""The declared pipelines: one module each, holding ``PIPELINE`` (docs/adding-a-pipeline.md)."""
