"""Request bodies: plain, gzip and deflate, with the limit on the decoded size."""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc
import zlib

import pytest

from ingest.body import BodyRefused, read_body

LIMIT = 500 * 1024
JSON = b'{"batch": [{"type": "page", "anonymousId": "a"}]}'


async def _stream(data: bytes, size: int = 16 * 1024):
    for start in range(0, len(data), size):
        yield data[start : start + size]


def _read(data: bytes, limit: int = LIMIT, **headers: str) -> bytes:
    headers = {k.replace("_", "-"): v for k, v in headers.items()}
    return asyncio.run(read_body(_stream(data), headers, limit))


def _refused(data: bytes, limit: int = LIMIT, **headers: str) -> BodyRefused:
    with pytest.raises(BodyRefused) as caught:
        _read(data, limit, **headers)
    return caught.value


def test_plain_and_identity_bodies_pass_unchanged() -> None:
    assert _read(JSON) == JSON
    assert _read(JSON, content_encoding="identity") == JSON


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("gzip", gzip.compress),
        ("x-gzip", gzip.compress),
        ("GZip", gzip.compress),
        ("deflate", zlib.compress),  # RFC 9110: zlib-wrapped
        ("deflate", lambda d: zlib.compress(d)[2:-4]),  # raw deflate, as some clients send
    ],
)
def test_compressed_bodies_are_decoded(encoding: str, encode) -> None:
    body = JSON * 2000  # ~100 KB, many chunks
    assert _read(encode(body), content_encoding=encoding) == body


def test_gzip_with_several_members_and_zero_padding() -> None:
    data = gzip.compress(b'{"a": ') + gzip.compress(b"1}") + b"\0" * 8
    assert _read(data, content_encoding="gzip") == b'{"a": 1}'


def test_the_limit_applies_to_the_decoded_body() -> None:
    body = b" " * (LIMIT + 1)
    refused = _refused(gzip.compress(body), content_encoding="gzip")
    assert refused.status == 413 and refused.code == "too_large"
    assert "after decompression" in refused.message
    assert _read(gzip.compress(b" " * LIMIT), content_encoding="gzip") == b" " * LIMIT


def test_a_gzip_bomb_is_refused_early_with_bounded_memory() -> None:
    bomb = gzip.compress(b"\0" * (1 << 30), compresslevel=9)  # 1 GiB in about 1 MB
    assert len(bomb) < 1.1 * (1 << 20)
    received: list[int] = []

    async def counted():
        async for chunk in _stream(bomb):
            received.append(len(chunk))
            yield chunk

    tracemalloc.start()
    with pytest.raises(BodyRefused) as caught:
        asyncio.run(read_body(counted(), {"content-encoding": "gzip"}, 2 * (1 << 20)))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert caught.value.status == 413
    # 2 MiB of zeros inflate from about 2 KB: refused within the first chunks, not after
    # inflating the whole megabyte sent.
    assert sum(received) <= 4 * 16 * 1024, sum(received)
    assert peak < 16 * (1 << 20), f"peak {peak} bytes while inflating"


def test_plain_bodies_over_the_limit_are_refused_by_declared_and_actual_size() -> None:
    assert _refused(JSON, limit=10, content_length=str(len(JSON))).status == 413
    assert _refused(b"x" * 2048, limit=1024).status == 413


@pytest.mark.parametrize(
    ("data", "encoding", "status", "code"),
    [
        (b"not gzip at all", "gzip", 400, "invalid_encoding"),
        (gzip.compress(JSON)[:-12], "gzip", 400, "invalid_encoding"),  # truncated
        (zlib.compress(JSON) + b"junk", "deflate", 400, "invalid_encoding"),
        (JSON, "br", 415, "unsupported_encoding"),
    ],
    ids=["not-gzip", "truncated-gzip", "deflate-with-junk", "brotli"],  # stable across workers
)
def test_bad_encodings_get_a_clear_refusal(data, encoding, status, code) -> None:
    refused = _refused(data, content_encoding=encoding)
    assert (refused.status, refused.code) == (status, code)
    assert refused.message


def test_an_empty_compressed_body_is_empty() -> None:
    assert _read(b"", content_encoding="gzip") == b""
