"""Entry point of the `humanwork-operator` console script (and `python -m agent_operator`).

Runs kopf with the operator's handlers, cluster-wide or for the namespaces given, with
kopf's liveness endpoint. One replica is the supported shape (`--standalone`, the
Deployment uses the `Recreate` strategy); see docs/operations.md.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket

import kopf
from kopf._core.engines.peering import Identity


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="humanwork-operator", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[],
        help="watch only this namespace (repeatable; glob patterns allowed); default: all",
    )
    parser.add_argument(
        "--liveness",
        default="http://0.0.0.0:8080/healthz",
        help="kopf's liveness endpoint URL (empty to disable)",
    )
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    from agent_operator import handlers  # noqa: F401  (registers the handlers with kopf)

    asyncio.run(
        kopf.operator(
            standalone=True,
            clusterwide=not args.namespace,
            namespaces=args.namespace,
            liveness_endpoint=args.liveness or None,
            # kopf's default identity asks the password database for the user, which a
            # container's numeric user (10001) is not in: the host name (the pod's) instead
            identity=Identity(socket.gethostname()),
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
