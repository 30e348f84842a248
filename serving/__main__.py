"""``python -m serving``: run the serving API, or ask it a quick question.

    python -m serving serve                       # the API and dashboard (uvicorn workers)
    python -m serving timeseries page_activity /pricing --start now-1h
    python -m serving top page_activity page_views --start now-1h -n 5
    python -m serving top page_activity load_sketch --start now-1m -n 5   # slowest (p95)
    python -m serving top search_terms searches --start now-1d
    python -m serving reach --page /pricing --start now-1d
    python -m serving health

Questions go to ``http://<settings.serving.host>:<port>`` with the first token
of ``settings.serving.api_tokens`` unless ``--url``/``--token`` say otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["app_factory", "main"]


def app_factory():
    """The app of one uvicorn worker, with settings from WAP_* variables (an entry point)."""
    import gc

    from core.log import configure_logging
    from core.settings import load_settings
    from serving.app import create_app

    configure_logging()
    app = create_app(load_settings())
    # Answers allocate many short-lived dicts: collect the young generation less often.
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m serving",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--url", help="the serving API (default: from settings)")
    parser.add_argument("--token", help="an analyst token (default: the first in settings)")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the API and the dashboard")
    serve.add_argument("--instance", default="serving", help="a name for logs and pid checks")
    ts = commands.add_parser("timeseries", help="merged buckets of a view for keys")
    ts.add_argument("view")
    ts.add_argument("keys", nargs="*", help="key values (none for site_activity)")
    ts.add_argument("--granularity", default="minute", choices=["minute", "hour", "day"])
    top = commands.add_parser("top", help="top-N keys by a merged measure")
    top.add_argument("view")
    top.add_argument("measure")
    top.add_argument("-n", type=int, default=10)
    top.add_argument("--quantile", type=float)
    reach = commands.add_parser("reach", help="distinct visitors of a page or the site")
    reach.add_argument("--page")
    for sub in (ts, top, reach):
        sub.add_argument("--start", default="now-1h")
        sub.add_argument("--end", default="now")
    commands.add_parser("health", help="boundary and freshness per view")
    args = parser.parse_args(argv)

    from core.settings import load_settings

    settings = load_settings()
    if args.command == "serve":
        from serving.server import serve

        serve(settings)
        return 0
    from serving.client import ServingAPIError, ServingClient

    host = "127.0.0.1" if settings.serving.host == "0.0.0.0" else settings.serving.host
    url = args.url or f"http://{host}:{settings.serving.port}"
    token = args.token or next(iter(settings.serving.api_tokens.values())).get_secret_value()
    try:
        with ServingClient(url, token) as client:
            if args.command == "timeseries":
                answer = client.timeseries(
                    args.view, args.keys or None, args.start, args.end, args.granularity
                )
            elif args.command == "top":
                answer = client.top(
                    args.view, args.measure, args.start, args.end, args.n, args.quantile
                )
            elif args.command == "reach":
                answer = client.reach(args.page, args.start, args.end)
            else:
                answer = client.health()
    except ServingAPIError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(answer, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
