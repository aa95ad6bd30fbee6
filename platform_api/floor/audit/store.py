"""Where signed audit checkpoints are kept: outside the database, out of the database
roles' reach.

`CheckpointStore` is what the audit commands need; `FileCheckpointStore` keeps one file per
checkpoint, `<directory>/<chain>/<seq, 12 digits>-<first 16 hex of the head hash>.json`, in
a directory that is a volume in Kubernetes (`HUMANWORK_AUDIT_CHECKPOINT_DIR`). A file is
written once and never overwritten (a temporary file linked into place), so two writers of
the same checkpoint cannot corrupt it; older checkpoints of a chain are pruned beyond a
number to keep.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from typing import Protocol

from platform_api.floor.audit.checkpoints import Checkpoint, Stored

_CHAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")
_FILE = re.compile(r"[0-9]{12}-[0-9a-f]{16}\.json")


class CheckpointStore(Protocol):
    """Keeps signed checkpoints and hands them back for verification."""

    def put(self, checkpoint: Checkpoint) -> bool:
        """Store a checkpoint; False when that exact checkpoint is already stored."""
        ...

    def read_all(self) -> list[Stored]:
        """Every stored checkpoint, of every chain."""
        ...

    def prune(self, chain: str, keep: int) -> int:
        """Remove all but the `keep` newest checkpoints of `chain`; how many went."""
        ...


def _chain_dir(root: Path, chain: str) -> Path:
    if not _CHAIN.fullmatch(chain):
        raise ValueError(f"not a chain name: {chain!r}")
    return root / chain


class FileCheckpointStore:
    """Checkpoints as files under one directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, checkpoint: Checkpoint) -> bool:
        directory = _chain_dir(self.root, checkpoint.chain)
        directory.mkdir(parents=True, exist_ok=True)
        final = directory / f"{checkpoint.seq:012d}-{checkpoint.hash[:16]}.json"
        temporary = directory / f".tmp-{secrets.token_hex(8)}"
        with open(temporary, "xb") as out:
            out.write(checkpoint.encode())
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(temporary, final)
        except FileExistsError:
            return False
        finally:
            temporary.unlink()
        return True

    def read_all(self) -> list[Stored]:
        if not self.root.is_dir():
            raise FileNotFoundError(f"no checkpoint directory {self.root}")
        found: list[Stored] = []
        for directory in sorted(p for p in self.root.iterdir() if p.is_dir()):
            for path in sorted(directory.iterdir()):
                if path.is_file() and not path.name.startswith(".tmp-"):
                    found.append(Stored(f"{directory.name}/{path.name}", path.read_bytes()))
        return found

    def prune(self, chain: str, keep: int) -> int:
        directory = _chain_dir(self.root, chain)
        names = sorted(p for p in directory.iterdir() if _FILE.fullmatch(p.name))
        old = names[: max(len(names) - keep, 0)]
        for path in old:
            path.unlink()
        return len(old)
