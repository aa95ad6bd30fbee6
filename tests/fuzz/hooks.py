"""schemathesis hooks for the platform fuzz run (`SCHEMATHESIS_HOOKS=tests.fuzz.hooks`).

- Path parameters: each generated value is kept or, as often, replaced by an id that
  exists (`FUZZ_IDS`, JSON `{parameter name: value}`), so that generated queries and
  bodies reach the handlers behind the 404s.
- The network guard (tests/fuzz/network.py) watches the fuzzer's own process; what it saw
  is written to `FUZZ_NETWORK_LOG` at exit.
"""

from __future__ import annotations

import atexit
import json
import os
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import strategies as st

from tests.fuzz import network

IDS: dict[str, str] = json.loads(os.environ.get("FUZZ_IDS", "{}"))

network.install()


@atexit.register
def _report() -> None:
    log = os.environ.get("FUZZ_NETWORK_LOG")
    if log:
        Path(log).write_text("\n".join(network.foreign()))


@schemathesis.hook
def flatmap_path_parameters(
    context: schemathesis.HookContext, path_parameters: dict[str, Any] | None
) -> st.SearchStrategy[dict[str, Any] | None]:
    if not path_parameters:
        return st.just(path_parameters)
    known = {name: IDS[name] for name in path_parameters if name in IDS}
    if not known:
        return st.just(path_parameters)
    return st.fixed_dictionaries(
        {
            name: st.sampled_from([value, known[name]]) if name in known else st.just(value)
            for name, value in path_parameters.items()
        }
    )
