"""The hostile requests of the bad-input campaign (:mod:`bench.bad_input_campaign`).

:class:`Forge` builds them from a seeded RNG: random bytes, truncated JSON,
deep nesting, huge batches (just under and over 500 KB), bad, missing and
malformed auth, gzip/deflate bodies and bogus encodings, lone surrogates and
invalid UTF-8, extreme numbers, extreme and malformed dates, wrong types for
every field, wrong endpoints and methods, empty bodies, and a share of valid
events. Each request is a :class:`Shot` tagged with its kind.
"""

from __future__ import annotations

import base64
import gzip
import json
import random
import uuid
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

SINGLE = ("track", "page", "screen", "identify", "alias", "group")
PATHS = [f"/v1/{c}" for c in SINGLE] + ["/v1/batch", "/v1/import"]
PATHS += ["/v1/t", "/v1/p", "/v1/i", "/v1/b", "/beacon/v1/batch"]
LIMIT = 500 * 1024
# fmt: off
_FIELDS = [
    "type", "messageId", "anonymousId", "userId", "event", "name", "properties", "traits",
    "context", "timestamp", "originalTimestamp", "sentAt", "integrations", "groupId",
    "previousId", "category", "writeKey",
]
_WRONG = [None, True, False, 0, -1, 1.5, "", " ", "x" * 300, [], {}, [1, "a"], {"a": {"b": []}}]
_NUMBERS = [
    "1e309", "-1e309", "-0", "-0.0", "1e-400", "4.9e-324", "1.7976931348623157e308",
    "18446744073709551616", "-9223372036854775809", "NaN", "Infinity", "-Infinity", "0x10",
    "1.", "01", ".5", "1e", "+1", "1" + "0" * 400, "-" + "9" * 4000,
]
_DATES = [
    "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999-23:59",
    "0001-01-01T00:00:00+23:59", "2016-12-31T23:59:60Z", "2026-06-30T23:59:60.5+14:00",
    "2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "10000-01-01T00:00:00Z", "yesterday",
    "", "1700000000", "2026-01-01", "2026-01-01T00:00:00", "2026-01-01 00:00:00+00:00",
    "2026-01-01T24:00:00Z", "-2026-01-01T00:00:00Z", "2026-W01-1", "2026-01-01T00:00:00+99:99",
]
_STRINGS = [  # lone surrogates (escaped and UTF-8 encoded), invalid and overlong UTF-8, NULs
    b'"\\ud800"', b'"\\udfff x"', b'"\\ud800\\u0041"', b'"\\ud83d\\ude00"', b'"\\u0000"',
    b'"\xed\xa0\x80"', b'"\xff\xfe"', b'"\xc0\xaf"', b'"\xf4\x90\x80\x80"', b'"a\x00b"',
    b'"\\uZZZZ"', b'"\\', b'"\xe2\x82"', b'"\\u00e9\xc3\xa9"',
]
# fmt: on


@dataclass(frozen=True, slots=True)
class Shot:
    kind: str
    method: str
    path: str
    headers: dict[str, str]
    body: bytes = b""


class Forge:
    """Builds the campaign's requests from a seeded RNG."""

    def __init__(self, seed: int, write_key: str) -> None:
        self.rng = random.Random(seed)
        self.key = write_key
        self.auth = "Basic " + base64.b64encode(f"{write_key}:".encode()).decode()
        # fmt: off
        self.kinds = [
            (self.valid, 14), (self.random_bytes, 7), (self.truncated, 7), (self.deep, 5),
            (self.auth_variants, 8), (self.encodings, 8), (self.unicode, 7), (self.numbers, 7),
            (self.dates, 10), (self.wrong_types, 12), (self.endpoints, 8), (self.empty, 4),
            (self.garbage_batches, 2), (self.huge, 0.5),
        ]
        # fmt: on
        self._huge: list[tuple[str, bytes, dict[str, str]]] | None = None

    def shot(self) -> Shot:
        make = self.rng.choices([k for k, _ in self.kinds], [w for _, w in self.kinds])[0]
        return make()

    # --- helpers -------------------------------------------------------------------------
    def _now(self, shift_s: float = 0.0) -> str:
        return (datetime.now(UTC) + timedelta(seconds=shift_s)).isoformat()

    def _event(self, kind: str | None = None) -> dict:
        kind = kind or self.rng.choice(("page", "track", "identify"))
        event = {
            "type": kind,
            "messageId": uuid.uuid4().hex,
            "anonymousId": f"campaign-{self.rng.randrange(5000)}",
            "timestamp": self._now(-self.rng.uniform(0, 5)),
            "context": {"page": {"path": f"/c/{self.rng.randrange(50)}"}},
            "properties": {"path": f"/c/{self.rng.randrange(50)}", "load_time_ms": 120},
        }
        if kind == "track":
            event["event"] = "Element Clicked"
        return event

    def _post(self, kind: str, path: str, body: bytes, **headers: str) -> Shot:
        base = {"authorization": self.auth, "content-type": "application/json"}
        return Shot(kind, "POST", path, {**base, **headers}, body)

    def _batch(self, events: list, **extra) -> bytes:
        return json.dumps({"batch": events, "sentAt": self._now(), **extra}).encode()

    def _one(self, kind: str, event: dict) -> Shot:
        if self.rng.random() < 0.5:
            return self._post(kind, "/v1/batch", self._batch([event]))
        path = f"/v1/{event['type']}" if event.get("type") in SINGLE else "/v1/track"
        return self._post(kind, path, json.dumps(event).encode())

    # --- kinds ---------------------------------------------------------------------------
    def valid(self) -> Shot:
        r = self.rng.random()
        if r < 0.5:
            events = [self._event() for _ in range(self.rng.randint(1, 20))]
            return self._post("valid", "/v1/batch", self._batch(events))
        if r < 0.7:
            event = self._event()
            return self._post("valid", f"/v1/{event['type']}", json.dumps(event).encode())
        if r < 0.85:  # analytics.js in a browser: text/plain, key in the body, one-letter path
            body = json.dumps({**self._event("page"), "writeKey": self.key}).encode()
            return Shot("valid", "POST", "/v1/p", {"content-type": "text/plain"}, body)
        body = gzip.compress(self._batch([self._event() for _ in range(10)]))
        return self._post("valid", "/v1/batch", body, **{"content-encoding": "gzip"})

    def random_bytes(self) -> Shot:
        body = self.rng.randbytes(self.rng.randrange(0, 4096))
        return self._post("random_bytes", self.rng.choice(PATHS), body)

    def truncated(self) -> Shot:
        body = self._batch([self._event() for _ in range(self.rng.randint(1, 5))])
        return self._post(
            "truncated_json", self.rng.choice(PATHS), body[: self.rng.randrange(len(body))]
        )

    def deep(self) -> Shot:
        depth = self.rng.choice((63, 64, 65, 200, 254, 256, 999, 1000, 1023, 1024, 1025, 20000))
        opener, closer = self.rng.choice(((b'{"a":', b"}"), (b"[", b"]")))
        nested = opener * depth + b"1" + closer * depth
        if self.rng.random() < 0.3:
            return self._post("deep_nesting", self.rng.choice(PATHS), nested)
        event = json.dumps(self._event("page")).encode()[:-1] + b', "properties": ' + nested + b"}"
        if self.rng.random() < 0.5:
            return self._post("deep_nesting", "/v1/page", event)
        return self._post("deep_nesting", "/v1/batch", b'{"batch": [' + event + b"]}")

    def huge(self) -> Shot:
        if self._huge is None:
            page = json.dumps(self._event("page")).encode()
            under = b'{"batch": [' + b",".join([page] * ((LIMIT - 100) // (len(page) + 1))) + b"]}"
            ones = b'{"batch": [' + b",".join([b"1"] * ((LIMIT - 20) // 2)) + b"]}"
            many = b'{"batch": [' + b",".join([b"{}"] * 2501) + b"]}"
            over = under[:-2] + b"," + b" " * (LIMIT - len(under)) + b"]}"
            bomb = gzip.compress(b'{"batch": [' + b" " * (20 * LIMIT) + b"]}")
            self._huge = [
                ("valid_under_limit", under, {}),
                ("garbage_under_limit", ones, {}),
                ("too_many_calls", many, {}),
                ("over_limit", over, {}),
                ("over_limit_gzip", gzip.compress(over), {"content-encoding": "gzip"}),
                ("gzip_bomb", bomb, {"content-encoding": "gzip"}),
            ]
        name, body, headers = self.rng.choice(self._huge)
        return self._post(f"huge:{name}", "/v1/batch", body, **headers)

    def garbage_batches(self) -> Shot:
        items = self.rng.choice(([1] * 500, [None] * 50, ["x"] * 10, [[]] * 3, [{}] * 2600))
        return self._post(
            "garbage_batch", self.rng.choice(("/v1/batch", "/v1/import")), self._batch(items)
        )

    def auth_variants(self) -> Shot:
        body = json.dumps(self._event("page")).encode()
        b64 = lambda raw: base64.b64encode(raw).decode()  # noqa: E731
        header = self.rng.choice(
            [
                None,
                "Basic " + b64(b"wrong-key:"),
                "Basic !!!not-base64",
                "Basic " + b64(b"\xff\xfe:"),
                "Bearer " + self.key,
                "Basic",
                "Basic x",
                "basic " + b64(f"{self.key}:x".encode()),
                "Basic " + b64(b":"),
                "Basic " + "A" * 6000,
                "Digest username=x",
                "Basic " + b64(b"\x00:"),
            ]
        )
        headers = {"content-type": "application/json"}
        if header is not None:
            headers["authorization"] = header
        if self.rng.random() < 0.4:  # the key in the body, of any type
            key = self.rng.choice([self.key, "wrong", 17, None, [self.key], {"k": 1}, ""])
            body = json.dumps({**self._event("page"), "writeKey": key}).encode()
        return Shot("auth", "POST", "/v1/page", headers, body)

    def encodings(self) -> Shot:
        plain = self._batch([self._event() for _ in range(3)])
        choice = self.rng.randrange(10)
        encoding, body = [
            ("gzip", gzip.compress(plain)),
            ("deflate", zlib.compress(plain)),
            ("deflate", zlib.compress(plain)[2:-4]),  # raw deflate
            ("gzip", b"\x1f\x8b" + self.rng.randbytes(200)),  # corrupt
            ("gzip", gzip.compress(plain)[:-12]),  # truncated
            ("gzip", gzip.compress(plain) + b"trailing"),
            ("gzip", plain),  # says gzip, is not
            (
                self.rng.choice(("br", "compress", "zstd", "gzip, gzip", "GZIP", "x-gzip", "*")),
                plain,
            ),
            ("gzip", gzip.compress(gzip.compress(plain))),
            ("identity", plain),
        ][choice]
        return self._post("encoding", "/v1/batch", body, **{"content-encoding": encoding})

    def unicode(self) -> Shot:
        text = self.rng.choice(_STRINGS)
        field = self.rng.choice([b"anonymousId", b"userId", b"event", b"messageId", b"timestamp"])
        body = (
            b'{"type": "track", "event": "E", "anonymousId": "u", "' + field + b'": ' + text + b"}"
        )
        if self.rng.random() < 0.2:
            body = b"\xef\xbb\xbf" + body  # a byte-order mark
        if self.rng.random() < 0.3:
            body = b'{"batch": [' + body + b"]}"
            return self._post("unicode", "/v1/batch", body)
        return self._post("unicode", "/v1/track", body)

    def numbers(self) -> Shot:
        token = self.rng.choice(_NUMBERS).encode()
        field = self.rng.choice([b"load_time_ms", b"results_count", b"depth"])
        body = (
            b'{"type": "page", "anonymousId": "n", "properties": {"' + field + b'": ' + token + b"}"
        )
        if self.rng.random() < 0.3:
            body += (
                b', "' + self.rng.choice([b"timestamp", b"messageId", b"userId"]) + b'": ' + token
            )
        body += b"}"
        return self._post("numbers", "/v1/page", body)

    def _hostile_time(self) -> str:
        shift = self.rng.choice((-1e9, -8 * 86400, 61, 1e9))  # far past, too old, ahead, far ahead
        return self.rng.choice([*_DATES, self._now(shift)])

    def dates(self) -> Shot:
        event = self._event()
        fields = ["timestamp", "originalTimestamp", "sentAt"]
        for field in self.rng.sample(fields, self.rng.randint(1, 3)):
            event[field] = self._hostile_time()
        if self.rng.random() < 0.5:
            body = self._batch([event], sentAt=self._hostile_time())
            return self._post("dates", self.rng.choice(("/v1/batch", "/v1/import")), body)
        return self._one("dates", event)

    def wrong_types(self) -> Shot:
        if self.rng.random() < 0.2:  # the batch envelope itself
            field = self.rng.choice(["batch", "sentAt", "context", "writeKey"])
            body = {"batch": [self._event()], "sentAt": self._now(), field: self.rng.choice(_WRONG)}
            return self._post("wrong_types", "/v1/batch", json.dumps(body).encode())
        event = self._event(self.rng.choice(("page", "track", "identify", "group", "alias")))
        for field in self.rng.sample(_FIELDS, self.rng.randint(1, 3)):
            event[field] = self.rng.choice(_WRONG)
        return self._one("wrong_types", event)

    def endpoints(self) -> Shot:
        body = json.dumps(self._event("page")).encode()
        r = self.rng.randrange(4)
        if r == 0:
            method = self.rng.choice(("GET", "PUT", "DELETE", "PATCH", "HEAD"))
            return Shot(
                "endpoints", method, self.rng.choice(PATHS), {"authorization": self.auth}, body
            )
        if r == 1:
            path = self.rng.choice(
                [
                    "/v1/trak",
                    "/v2/track",
                    "/v1",
                    "/",
                    "/v1/batch/",
                    "/v1//batch",
                    "/v1/track?x=1&x=2",
                    "/v1/%2e%2e/track",
                    "/v1/" + "a" * 4000,
                    "/v1/m",
                    "/v1/projects/%00/settings",
                    "/sourceConfig/?writeKey=%ff",
                    "/analytics-next/bundles/..%2f..%2fsecret.js",
                    "/analytics-next/bundles/none.js",
                    "/v1/track%00",
                    "/V1/TRACK",
                ]
            )
            return self._post("endpoints", path, body)
        if r == 2:  # CORS preflights, sane and not
            headers = {
                "origin": self.rng.choice(
                    ["https://shop.example", "null", "x", "https://a.b:99999"]
                ),
                "access-control-request-method": self.rng.choice(["POST", "GET", "TRACE", ""]),
                "access-control-request-headers": self.rng.choice(
                    ["content-type", "a b", ",,", "x" * 500]
                ),
            }
            return Shot("endpoints", "OPTIONS", self.rng.choice(PATHS), headers)
        path = self.rng.choice(["/metrics", "/openapi.json", "/docs", "/v1/projects/k/settings"])
        return Shot("endpoints", "GET", path, {})

    def empty(self) -> Shot:
        body = self.rng.choice([b"", b"null", b"{}", b"[]", b'""', b" ", b"\n", b"0", b"true"])
        ctype = self.rng.choice(["application/json", "text/plain", "", "multipart/form-data"])
        shot = self._post("empty", self.rng.choice(PATHS), body)
        return Shot(shot.kind, "POST", shot.path, {**shot.headers, "content-type": ctype}, body)
