"""Pure: which of an org's agents a request fits, by the specialists' keywords.

The seeds route by keyword first ("current classification: keyword heuristic", seed 000;
"router picks the right agent based on ... specialist assignment", seed 002): each
AgentInstance's `spec.specialist.keywords` are matched against the request's words (a
phrase matches its words in order; a request word may add a plural `s`/`es`). An agent
scores one point per word of each keyword it matched, so a phrase outweighs a single word.
The best score wins; a tie is left to the LLM when one is configured, else refused. An
agent with no keywords is a generalist: it takes a request no specialist matched, when it
is the org's only generalist.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

WORD = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
BY_KEYWORDS, BY_LLM, BY_DEFAULT = "keywords", "llm", "default"
"""How an agent was chosen (the annotation humanwork.io/routed-by)."""


@dataclass(frozen=True)
class Candidate:
    """An org's agent as the router sees it."""

    name: str
    specialist: str
    keywords: tuple[str, ...] = ()
    description: str | None = None


@dataclass(frozen=True)
class Choice:
    """The agent picked, how, and why in a sentence."""

    agent: str
    by: str
    reason: str


@dataclass(frozen=True)
class Score:
    """How well one agent's keywords match a request."""

    agent: str
    points: int
    matched: tuple[str, ...]


def words(text: str) -> tuple[str, ...]:
    """The request's lowercase words."""
    return tuple(WORD.findall(text.lower()))


def _same(word: str, keyword_word: str) -> bool:
    return word in (keyword_word, keyword_word + "s", keyword_word + "es")


def matches(keyword: str, request: Sequence[str]) -> bool:
    """Whether `keyword`'s words occur in `request`, in order and adjacent."""
    wanted = words(keyword)
    if not wanted:
        return False
    last = len(request) - len(wanted)
    return any(all(_same(request[i + j], w) for j, w in enumerate(wanted)) for i in range(last + 1))


def score(request: str, candidate: Candidate) -> Score:
    """One point per word of each keyword the request matches."""
    said = words(request)
    matched = tuple(k for k in candidate.keywords if matches(k, said))
    return Score(candidate.name, sum(len(words(k)) for k in matched), matched)


def by_keywords(request: str, candidates: Iterable[Candidate]) -> tuple[Choice | None, list[str]]:
    """The agent whose keywords match best; else None and the names tied at the top (empty
    when nothing matched)."""
    scores = sorted((score(request, c) for c in candidates), key=lambda s: (-s.points, s.agent))
    if not scores or scores[0].points == 0:
        return None, []
    top = [s for s in scores if s.points == scores[0].points]
    if len(top) > 1:
        return None, [s.agent for s in top]
    best = top[0]
    reason = f"keywords matched: {', '.join(best.matched)} ({best.points} points)"
    return Choice(best.agent, BY_KEYWORDS, reason), []


def generalist(candidates: Iterable[Candidate]) -> Choice | None:
    """The org's only agent without keywords, if there is exactly one."""
    plain = [c for c in candidates if not c.keywords]
    if len(plain) != 1:
        return None
    return Choice(
        plain[0].name,
        BY_DEFAULT,
        "no specialist's keywords matched; the org's only agent without keywords takes the request",
    )


def candidates_of(instances: Iterable[dict[str, Any]], org_id: str) -> list[Candidate]:
    """The AgentInstances of the org that take work: not paused, not being deleted."""
    found: list[Candidate] = []
    for item in instances:
        spec, meta = item.get("spec") or {}, item.get("metadata") or {}
        if str(spec.get("orgId")) != org_id or spec.get("paused") or meta.get("deletionTimestamp"):
            continue
        specialist = spec.get("specialist") or {}
        found.append(
            Candidate(
                name=str(meta.get("name")),
                specialist=str(specialist.get("name") or ""),
                keywords=tuple(str(k) for k in specialist.get("keywords") or ()),
                description=specialist.get("description"),
            )
        )
    return sorted(found, key=lambda c: c.name)
