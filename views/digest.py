"""Personal ids as the views see them: a keyed digest in place of each id.

A pipeline declares the fields that identify a person
(:attr:`pipelines.PipelineSpec.identity`: ``userId`` and ``anonymousId``,
``buyer_id``). Both layers replace each of them in the views' input with its
HMAC-SHA256 under the platform's secret ``views.identity_key`` (64 hex
digits) before any view is built (:func:`pseudonymise`: the speed layer after
its deduplication, gold over silver's days). So no view sees a person's id,
and its distinct-count sketches (``visitors``, ``buyers``) hold digests: a
sketch of a candidate id that anyone without the key builds
(``hll_sketch_agg('buyer-0007')``) fills other registers than the digest the
view counted, and a union with a view's sketch tells nothing about who is in
it. Estimates, and unions across windows, grains and the two layers, are
those of the ids: one id has one digest wherever the key is the same.

An empty id stays empty (a view's ``identity()`` takes ``anonymousId`` for an
empty ``userId``) and a null one null. The key reaches Spark only inside the
digest's Python function, pickled with the tasks: it is no literal of a plan
(no plan string, query progress, failure message or lineage event shows it)
and no Spark setting.

>>> keyed_digest(b"k" * 32, "buyer-0007")
'0f8723edbb8c20a100371b8d54cc2467186e8db6f49d68c9eaef1aba8966af0d'
>>> keyed_digest(b"k" * 32, ""), keyed_digest(b"k" * 32, None)
('', None)
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import SecretStr
    from pyspark.sql import Column, DataFrame

__all__ = ["DIGEST_CHARS", "keyed_digest", "pseudonymise"]

DIGEST_CHARS = 64
"""Characters of a digest as the views see it (hex SHA-256)."""


def keyed_digest(key: bytes, value: str | None) -> str | None:
    """HMAC-SHA256 of ``value``'s UTF-8 bytes under ``key``, as 64 hex digits; an empty or
    null ``value`` as it is."""
    if not value:
        return value
    return hmac.digest(key, value.encode("utf-8", "surrogatepass"), "sha256").hex()


def _digest_column(key: bytes) -> Callable[[Column], Column]:
    """The digest as a Spark function of a string column (an Arrow-batched Python UDF)."""
    from pyspark.sql import functions as F

    def identity_digest(value: str | None) -> str | None:
        return keyed_digest(key, value)

    return F.udf(identity_digest, "string", useArrow=True)


def pseudonymise(events: DataFrame, fields: Sequence[str], key: SecretStr) -> DataFrame:
    """``events`` with each of ``fields`` it holds (top-level strings) replaced by its
    :func:`keyed_digest` under ``key``; fields it lacks (a parse that left them out) are
    skipped. Works on batch and streaming DataFrames alike."""
    if not key.get_secret_value():
        raise ValueError("pseudonymise needs a key; set views.identity_key.")
    present = [name for name in fields if name in events.columns]
    if not present:
        return events
    from pyspark.sql import functions as F

    digest = _digest_column(key.get_secret_value().encode())
    return events.withColumns({name: digest(F.col(name)) for name in present})
