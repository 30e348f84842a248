"""``python -m ingest``: run the collector (uvicorn) with settings from WAP_* variables."""

from __future__ import annotations

import argparse

import uvicorn

from core.log import configure_logging
from core.settings import Settings, load_settings
from ingest.app import create_app


def server_config(settings: Settings) -> uvicorn.Config:
    """The collector's HTTP server: its app, address and connection limits."""
    return uvicorn.Config(
        create_app(settings),
        host=settings.collector.host,
        port=settings.collector.port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=30,
        timeout_keep_alive=settings.collector.keep_alive_s,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ingest", description=__doc__)
    parser.add_argument(
        "--instance", default="collector", help="a name for this process in logs and pid checks"
    )
    parser.parse_args(argv)
    configure_logging()
    uvicorn.Server(server_config(load_settings())).run()


if __name__ == "__main__":
    main()
