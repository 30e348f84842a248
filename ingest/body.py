"""Read a request body as the collector's limits allow: plain or compressed.

Browsers send ``text/plain`` JSON (a simple request needs no CORS preflight)
and server libraries often compress (RudderStack's Python SDK gzips every
batch). The size limit applies to the body as decoded: a ``gzip`` or
``deflate`` body is inflated chunk by chunk, never more than the limit plus
one byte at a time, so a small body that inflates to gigabytes (a zip bomb)
is refused as soon as it passes the limit, with memory bounded by the limit.

>>> import asyncio, gzip
>>> async def chunks():
...     yield gzip.compress(b'{"batch": []}')
>>> asyncio.run(read_body(chunks(), {"content-encoding": "gzip"}, limit=1024))
b'{"batch": []}'
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Mapping

__all__ = ["BodyRefused", "read_body"]

_GZIP = 16 + zlib.MAX_WBITS
_ZLIB = zlib.MAX_WBITS
_RAW_DEFLATE = -zlib.MAX_WBITS


class BodyRefused(Exception):
    """A body the collector will not read; ``status``, ``code`` and ``message`` say why."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _too_large(size: int, limit: int, inflated: bool) -> BodyRefused:
    what = "inflates to" if inflated else "is"
    return BodyRefused(
        413,
        "too_large",
        f"The request {what} {size} bytes or more; the limit is {limit} bytes"
        f"{' after decompression' if inflated else ''}. Send smaller batches.",
    )


async def read_body(chunks: AsyncIterator[bytes], headers: Mapping[str, str], limit: int) -> bytes:
    """The body of a request, decoded per its ``Content-Encoding``, at most ``limit`` bytes.

    ``chunks``: the body as it arrives (Starlette's ``request.stream()``);
    ``headers``: the request headers (lower-case names). Raises
    :class:`BodyRefused`: 413 past the limit (on the wire or once decoded),
    415 for an encoding other than identity, gzip and deflate, 400 for a
    compressed body that is corrupt or truncated.
    """
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit, inflated=False)
    encoding = headers.get("content-encoding", "").strip().lower()
    if encoding in ("", "identity"):
        return await _plain(chunks, limit)
    if encoding in ("gzip", "x-gzip", "deflate"):
        return await _inflate(chunks, limit, encoding)
    raise BodyRefused(
        415,
        "unsupported_encoding",
        f"Content-Encoding {encoding!r} is not supported; send identity, gzip or deflate.",
    )


async def _plain(chunks: AsyncIterator[bytes], limit: int) -> bytes:
    parts, size = [], 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise _too_large(size, limit, inflated=False)
        parts.append(chunk)
    return b"".join(parts)


async def _inflate(chunks: AsyncIterator[bytes], limit: int, encoding: str) -> bytes:
    inflater: _Inflater | None = None
    wire = 0
    async for chunk in chunks:
        wire += len(chunk)
        if wire > limit:
            raise _too_large(wire, limit, inflated=False)
        if not chunk:
            continue
        if inflater is None:
            inflater = _Inflater(encoding, chunk, limit)
        inflater.feed(chunk)
    if inflater is None:
        return b""
    return inflater.finish()


class _Inflater:
    """Inflate with the output bounded by ``limit``; gzip may hold several members."""

    def __init__(self, encoding: str, first: bytes, limit: int) -> None:
        if encoding == "deflate":
            # RFC 9110 "deflate" is zlib-wrapped; some clients send raw deflate.
            zlib_header = len(first) >= 2 and (first[0] << 8 | first[1]) % 31 == 0
            self._wbits = _ZLIB if zlib_header and first[0] & 0x0F == 8 else _RAW_DEFLATE
        else:
            self._wbits = _GZIP
        self._encoding = encoding
        self._limit = limit
        self._decoder = zlib.decompressobj(self._wbits)
        self._parts: list[bytes] = []
        self._size = 0

    def feed(self, data: bytes) -> None:
        while data:
            try:
                out = self._decoder.decompress(data, self._limit - self._size + 1)
            except zlib.error as exc:
                raise BodyRefused(
                    400,
                    "invalid_encoding",
                    f"The body is not valid {self._encoding} data ({exc}).",
                ) from None
            self._size += len(out)
            if self._size > self._limit:
                raise _too_large(self._size, self._limit, inflated=True)
            self._parts.append(out)
            if self._decoder.eof:
                data = self._decoder.unused_data
                if not data.strip(b"\0"):  # the end (some writers pad with zeros)
                    return
                if self._wbits != _GZIP:
                    raise BodyRefused(
                        400,
                        "invalid_encoding",
                        f"Bytes follow the end of the {self._encoding} data.",
                    )
                self._decoder = zlib.decompressobj(self._wbits)  # the next gzip member
                continue
            data = self._decoder.unconsumed_tail

    def finish(self) -> bytes:
        if not self._decoder.eof:
            raise BodyRefused(
                400, "invalid_encoding", f"The {self._encoding} body ends before its data does."
            )
        return b"".join(self._parts)
