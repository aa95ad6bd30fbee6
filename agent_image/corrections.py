"""The local few-shot store of expert corrections (seed 002 UC-21, UC-23).

The platform pushes corrections (`POST /v1/corrections`): a client message, the draft the
agent wrote, and the reply the expert sent instead. They are appended to
`<state dir>/corrections.jsonl` (the agent has no database) and kept in memory; later
prompts take the closest ones as few-shot examples, and the offline responder answers
with the corrected reply of a close enough correction. Closeness is a plain word-overlap
score (Jaccard over normalised words), enough for a few hundred examples.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

LOG = logging.getLogger("humanwork.agent.corrections")

MAX_CORRECTIONS = 1000
"""The store keeps the newest this many (older ones are forgotten at load)."""

_WORD = re.compile(r"[a-z0-9]+")
_STOP_WORDS = (
    "a an and are as at be by can do does for from has have how i in is it its me my of on "
    "or our please the their there this to was we what when where which who why will with "
    "you your"
)
_STOP = frozenset(_STOP_WORDS.split(" "))


def words(text: str) -> frozenset[str]:
    """The content words of `text`, lower-cased, without stop words."""
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _STOP)


def similarity(a: str, b: str) -> float:
    """Jaccard overlap of the content words of `a` and `b`, 0 to 1."""
    left, right = words(a), words(b)
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


@dataclass(frozen=True)
class Correction:
    """One expert correction."""

    message: str
    """The client message the draft answered."""
    corrected: str
    """The reply the expert sent instead (what the agent should have said)."""
    draft: str | None = None
    """What the agent drafted."""
    note: str | None = None
    """Why, in the expert's words."""
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    conversation_id: str | None = None
    by: str | None = None
    at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    kind: str = "reply"
    """What was corrected: `reply` or `reply_edit` (a reply the expert sent
    instead: the responder's examples), `reply_rejected`, `step_edit`, `step_rejected`."""


REPLY_KINDS = frozenset({"reply", "reply_edit"})
"""The kinds of correction whose `corrected` text is a reply the responder may reuse."""


def _same(stored: Correction | None, given: Correction) -> bool:
    """Whether `given` is stored already with the same content (its `at` aside)."""
    if stored is None:
        return False
    return asdict(stored) | {"at": ""} == asdict(given) | {"at": ""}


@dataclass(frozen=True)
class Match:
    """A stored correction and how close it is to a message."""

    correction: Correction
    score: float


class CorrectionStore:
    """Corrections in a JSON-lines file under the agent's state folder, and in memory."""

    FILE_NAME = "corrections.jsonl"

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / self.FILE_NAME
        self._lock = threading.Lock()
        self._items: list[Correction] = self._load()

    def _load(self) -> list[Correction]:
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        except OSError as exc:
            LOG.warning("cannot read %s: %s", self.path, exc)
            return []
        items: dict[str, Correction] = {}
        for line in lines:
            try:
                data = json.loads(line)
                item = Correction(**data)
            except (ValueError, TypeError) as exc:
                LOG.warning("skipping a broken line of %s: %s", self.path, exc)
                continue
            items.pop(item.id, None)
            items[item.id] = item
        return list(items.values())[-MAX_CORRECTIONS:]

    def __len__(self) -> int:
        return len(self._items)

    def all(self) -> tuple[Correction, ...]:
        return tuple(self._items)

    def add(self, corrections: list[Correction]) -> int:
        """Store corrections (one with an id already stored replaces it); the count now."""
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as out:
                for item in corrections:
                    out.write(json.dumps(asdict(item), ensure_ascii=False) + "\n")
            ids = {c.id for c in corrections}
            kept = [c for c in self._items if c.id not in ids]
            self._items = (kept + corrections)[-MAX_CORRECTIONS:]
            return len(self._items)

    def missing(self, corrections: list[Correction]) -> list[Correction]:
        """Those of `corrections` not stored as they are (the platform sends the
        org's corrections with each chat command, so a restarted agent or a new replica
        has them; only the new or changed ones are written)."""
        known = {c.id: c for c in self._items}
        return [c for c in corrections if not _same(known.get(c.id), c)]

    def closest(
        self,
        message: str,
        *,
        limit: int = 3,
        min_score: float = 0.2,
        kinds: frozenset[str] = REPLY_KINDS,
    ) -> list[Match]:
        """The corrections of `kinds` most like `message` (best first, newest first on
        ties)."""
        scored = [
            Match(item, similarity(message, item.message))
            for item in reversed(self._items)  # newest first, kept by the stable sort
            if item.kind in kinds
        ]
        scored = [m for m in scored if m.score >= min_score]
        scored.sort(key=lambda m: m.score, reverse=True)
        return scored[:limit]
