"""The serving layer: one answer from the batch and speed views.

Windows before a view's batch boundary come from the batch view (final),
windows at or after it from the speed view (provisional); counts add, HLL
sketches union, KLL sketches merge. :mod:`serving.query` is the query core,
:mod:`serving.app` the HTTP API and live dashboard, :mod:`serving.client`
a thin client, :mod:`serving.sql` the same views in Spark SQL, and
:mod:`serving.report` the answers the demo prints. Submodules are imported
where used, so the client stays light.
"""

from serving.errors import QueryError

__all__ = ["QueryError"]
