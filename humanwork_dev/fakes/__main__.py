"""Serve the fake Shopify and Amazon as a long-running process (for `make up`'s demo):

    python -m humanwork_dev.fakes --shopify-port 8091 --amazon-port 8092 --credentials FILE

writes the integration credentials pointing at them to FILE (JSON: {"shopify": {...},
"amazon": {...}}) and serves until interrupted.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from pathlib import Path

from humanwork_dev.fakes.amazon import FakeAmazon
from humanwork_dev.fakes.shopify import FakeShopify


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m humanwork_dev.fakes", description=__doc__)
    parser.add_argument("--shopify-port", type=int, default=0)
    parser.add_argument("--amazon-port", type=int, default=0)
    parser.add_argument("--credentials", type=Path, required=True)
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with FakeShopify(port=args.shopify_port) as shop, FakeAmazon(port=args.amazon_port) as amazon:
        args.credentials.write_text(
            json.dumps({"shopify": shop.credentials(), "amazon": amazon.credentials()})
        )
        args.credentials.chmod(0o600)
        print(f"fake Shopify at {shop.url}, fake Amazon at {amazon.url}", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
