"""Who reads the platform, and what each may read.

Identities (:mod:`access.identity`) are proved by issued tokens
(:mod:`access.tokens`, kept as digests by :mod:`access.store`), by an identity
provider's signed tokens (:mod:`access.oidc`) or by the services' own tokens;
:mod:`access.directory` is where a service asks who a credential is. What an
identity may read follows from the pipelines' declarations (owner, readers) and
the teams of :mod:`pipelines.teams`. Importable without Spark.
"""

from access.directory import Directory
from access.identity import Identity, readable_pipelines, readable_views

__all__ = ["Directory", "Identity", "readable_pipelines", "readable_views"]
