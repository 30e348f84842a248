"""The benchmarks' HTTP load generator, in Go (``main.go``, the standard library only).

The service under test and its load generator share this machine's two cores; a request
costs Python's asyncio about as much CPU as it costs the serving hot path to answer it, so
at 2,000 requests/s the generator took a third of the machine. The Go program sends the
same requests over the same keep-alive connections, open loop (latency from when each
request was due) or closed loop, for a small fraction of that. It is built once, with the
Go toolchain on this machine, into ``<state_dir>/bench/loadgen``; no module is downloaded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["available", "binary", "drive", "phase", "stalls", "summary"]

SOURCE = Path(__file__).with_name("main.go")


def available() -> bool:
    """Whether the Go toolchain is here to build the generator."""
    return shutil.which("go") is not None


def binary(state_dir: Path) -> Path:
    """The built generator, built again when its source is newer."""
    target = Path(state_dir) / "bench" / "loadgen"
    if not target.exists() or target.stat().st_mtime < SOURCE.stat().st_mtime:
        target.parent.mkdir(parents=True, exist_ok=True)
        env = os.environ | {"GOFLAGS": "-mod=mod", "GOPROXY": "off", "CGO_ENABLED": "0"}
        subprocess.run(
            ["go", "build", "-o", str(target), "."], cwd=SOURCE.parent, env=env, check=True
        )
    return target


def drive(
    program: Path,
    host: str,
    port: int,
    token: str,
    paths: list[str],
    *,
    connections: int,
    rate: float | None,
    seconds: float,
    warmup: float,
    headers: dict[str, str] | None = None,
    bodies: list[bytes] | None = None,
    sum_field: str | None = None,
) -> dict:
    """Run the generator; its counts and the sorted latencies (ms) of the measured part.

    ``token``: a bearer token ("" for none); ``headers``: more headers of every request;
    ``bodies``: POST them in turn to ``paths[0]`` instead of getting ``paths``;
    ``sum_field``: the output's ``summed`` adds up that integer field of every answer.
    """
    with tempfile.TemporaryDirectory() as tmp:
        listed, posted = Path(tmp) / "paths", Path(tmp) / "bodies"
        listed.write_text("\n".join(paths))
        command = [
            str(program),
            f"-addr={host}:{port}",
            f"-token={token}",
            f"-paths={listed}",
            f"-connections={connections}",
            f"-rate={rate or 0}",
            f"-seconds={seconds}",
            f"-warmup={warmup}",
            *(f"-header={name}: {value}" for name, value in (headers or {}).items()),
        ]
        if bodies:
            posted.write_bytes(b"".join(b"%d\n%s" % (len(body), body) for body in bodies))
            command.append(f"-bodies={posted}")
        if sum_field:
            command.append(f"-sum={sum_field}")
        done = subprocess.run(
            command, capture_output=True, text=True, check=True, timeout=seconds + warmup + 120
        )
    return json.loads(done.stdout)


def summary(name: str, got: dict) -> dict:
    """A phase's figures from :func:`drive`'s output, as the Python generator prints them."""
    kept, n = got["latencies_ms"] or [0.0], got["requests"]
    result = {
        "name": name,
        "requests": n,
        "rps": round(n / got["elapsed_s"], 1),
        "p50_ms": round(kept[len(kept) // 2], 2),
        "p99_ms": round(kept[min(len(kept) - 1, int(len(kept) * 0.99))], 2),
        "max_ms": round(kept[-1], 2),
        "errors": got["errors"],
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "cache_hits": round(got["cache_hits"] / max(1, n), 3),
    }
    if got.get("first_error"):
        result["first_error"] = got["first_error"]
    if got.get("slow"):
        result["stalls"] = stalls(got["slow"])
    return result


def stalls(slow: list[list[float]], *, gap_s: float = 0.05, top: int = 5) -> list[dict]:
    """The slow requests (``[due unix seconds, ms]``, by due time) as stalls: requests due
    within ``gap_s`` of each other are one stall. The ``top`` stalls with the most requests,
    each with when its first request was due (UTC), how many, and the worst latency.

    >>> stalls([[100.0, 30.0], [100.01, 45.0], [100.5, 25.0], [100.52, 21.0], [100.53, 22.0]])
    ... # doctest: +NORMALIZE_WHITESPACE
    [{'at': '00:01:40.500', 'requests': 3, 'max_ms': 25.0},
     {'at': '00:01:40.000', 'requests': 2, 'max_ms': 45.0}]
    """
    groups: list[list[list[float]]] = []
    for due, ms in slow:
        if groups and due - groups[-1][-1][0] <= gap_s:
            groups[-1].append([due, ms])
        else:
            groups.append([[due, ms]])
    groups.sort(key=len, reverse=True)
    return [
        {
            "at": datetime.fromtimestamp(g[0][0], UTC).strftime("%H:%M:%S.%f")[:-3],
            "requests": len(g),
            "max_ms": max(ms for _, ms in g),
        }
        for g in groups[:top]
    ]


def phase(program: Path, token: str, name: str, host: str, port: int, paths: list[str],
          connections: int, rate: float | None, seconds: float, warmup: float) -> dict:  # fmt: skip
    """One benchmark phase: :func:`drive`, then :func:`summary` (its name marked ``(go)``)."""
    got = drive(program, host, port, token, paths, connections=connections, rate=rate,
                seconds=seconds, warmup=warmup)  # fmt: skip
    return summary(f"{name} (go)", got)
