"""Serve the fake Shopify and Amazon as a long-running process (for `make up`'s demo):

    python -m humanwork_dev.fakes --shopify-port 8091 --amazon-port 8092 --credentials FILE

writes the integration credentials pointing at them to FILE (JSON: {"shopify": {...},
"amazon": {...}}; `-`: to stdout) and serves until interrupted. In a pod (the real node's
in-cluster stack, humanwork_dev.incluster): `--host 0.0.0.0` and the Service's URLs as
`--shopify-url` / `--amazon-url`, which the credentials then point at, and
`--control-port` for the harness to see the fake Shopify's side effects and make it
misbehave (humanwork_dev.fakes.control).
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from contextlib import ExitStack
from pathlib import Path

from humanwork_dev.fakes.amazon import FakeAmazon
from humanwork_dev.fakes.control import control_app
from humanwork_dev.fakes.server import BackgroundServer
from humanwork_dev.fakes.shopify import FakeShopify


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m humanwork_dev.fakes", description=__doc__)
    parser.add_argument("--shopify-port", type=int, default=0)
    parser.add_argument("--amazon-port", type=int, default=0)
    parser.add_argument("--credentials", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    parser.add_argument("--shopify-url", default=None, help="the base URL in the credentials")
    parser.add_argument("--amazon-url", default=None, help="the base URL in the credentials")
    parser.add_argument("--control-port", type=int, default=None, help="the harness's port")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with (
        FakeShopify(host=args.host, port=args.shopify_port) as shop,
        FakeAmazon(host=args.host, port=args.amazon_port) as amazon,
        ExitStack() as control,
    ):
        if args.control_port is not None:
            server = BackgroundServer(control_app(shop), host=args.host, port=args.control_port)
            control.enter_context(server)
        amazon_url = args.amazon_url or amazon.url
        credentials = json.dumps(
            {
                "shopify": shop.credentials(baseUrl=args.shopify_url or shop.url),
                "amazon": amazon.credentials(
                    baseUrl=amazon_url, tokenUrl=amazon.token_url.replace(amazon.url, amazon_url)
                ),
            }
        )
        if str(args.credentials) == "-":
            print(credentials, flush=True)
        else:
            args.credentials.write_text(credentials)
            args.credentials.chmod(0o600)
        print(f"fake Shopify at {shop.url}, fake Amazon at {amazon.url}", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
