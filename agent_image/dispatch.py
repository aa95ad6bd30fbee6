"""Dispatch and risk: the agent's two keyword heuristics (seed 000).

Mode: a request runs in *agentic* mode (a multi-step plan, each step approved by a human)
when it contains one of the seed's agentic keywords, when it asks for a change (the words
that make a step high or critical: "update inventory", "refund my order"; domain mode only
reads, so a change can only be a plan a human approves), or when the agent is told to
default to it (`AGENT_DEFAULT_MODE=agentic`, or `defaultMode` in the configuration);
otherwise in *domain* mode (the fast path: one answer, read-only tool calls through
function calling).

Risk: every step carries a level, from the seed's table: read-only or informational is
low; minor, reversible writes are medium; significant writes that are hard to reverse are
high; destructive, financial or compliance-sensitive ones are critical. The level is the
highest of what the step's action says (the action catalog knows every action the
platform's tool proxy accepts) and what its words say. A language model's plan may
override it, within a floor: never below the action catalog's minimum
(`humanwork_core.catalog`, which the platform and the CRD enforce as well).

Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum

from humanwork_core import catalog
from humanwork_core.resources import Risk


class Mode(StrEnum):
    """How the agent handles a request."""

    DOMAIN = "domain"
    AGENTIC = "agentic"


AGENTIC_KEYWORDS: tuple[str, ...] = (
    "build",
    "deploy",
    "script",
    "scrape",
    "automate",
    "crawl",
    "analyze all",
    "process batch",
    "create website",
    "write code",
)
"""The seed's list: any of these in a message switches to agentic mode."""


_VOWELS = "aeiou"


def _forms(word: str) -> str:
    """A regex of `word` and its common inflections: deploy, deploys, deployed, deploying;
    update, updated, updating; set, sets, setting; tag, tagged; payment, payments."""
    forms = {word, word + "s", word + "es", word + "ed", word + "d", word + "ing"}
    forms |= {word + "ment", word + "ments"}
    if word.endswith("e"):
        forms |= {word[:-1] + "ing", word[:-1] + "ed"}
    if (
        len(word) <= 4
        and word[-1] not in _VOWELS + "wxy"
        and len(word) >= 2
        and word[-2] in _VOWELS
    ):
        forms |= {word + word[-1] + "ing", word + word[-1] + "ed"}
    return "(?:" + "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)) + ")"


def _phrase(keyword: str) -> re.Pattern[str]:
    """Whole words, each in any common inflection ("deploys", "automated", "scraping")."""
    body = r"\s+".join(_forms(w) for w in keyword.lower().split())
    return re.compile(rf"\b{body}\b", re.IGNORECASE)


_AGENTIC = tuple((k, _phrase(k)) for k in AGENTIC_KEYWORDS)


def agentic_keywords(message: str) -> tuple[str, ...]:
    """The agentic keywords `message` contains, in the seed's order."""
    return tuple(k for k, pattern in _AGENTIC if pattern.search(message))


def asks_for_change(message: str) -> bool:
    """Whether `message` asks for a change domain mode cannot make (it only reads): its
    words are those that make a step high or critical."""
    return risk_of_text(message) in (Risk.HIGH, Risk.CRITICAL)


def choose_mode(message: str, default_mode: str | None = None) -> Mode:
    """Agentic when the message holds an agentic keyword, asks for a change, or the
    default says so."""
    if (default_mode or "").strip().lower() == Mode.AGENTIC:
        return Mode.AGENTIC
    if agentic_keywords(message) or asks_for_change(message):
        return Mode.AGENTIC
    return Mode.DOMAIN


# --- tools -----------------------------------------------------------------------------------
# The tools and actions are those of the one action catalog (humanwork_core.catalog).


def enabled_tools(configured: Iterable[str]) -> tuple[str, ...]:
    """The proxy's names of the configured tools (all known tools when none are listed)."""
    names = sorted({catalog.tool_name(t) for t in configured})
    return tuple(names) if names else tuple(sorted(catalog.TOOLS))


# --- risk ------------------------------------------------------------------------------------

_RISK_WORDS: tuple[tuple[Risk, tuple[str, ...]], ...] = (
    (
        Risk.CRITICAL,
        (
            "refund",
            "delete",
            "remove",
            "destroy",
            "purge",
            "wipe",
            "drop",
            "erase",
            "terminate",
            "cancel order",
            "cancel the order",
            "void",
            "payment",
            "pay",
            "paid",
            "charge",
            "payout",
            "transfer",
            "wire",
            "chargeback",
            "invoice",
            "tax",
            "compliance",
            "gdpr",
            "legal",
            "close account",
        ),
    ),
    (
        Risk.HIGH,
        (
            "update",
            "set",
            "adjust",
            "modify",
            "change",
            "overwrite",
            "replace",
            "write",
            "publish",
            "send",
            "email",
            "deploy",
            "fulfil",
            "fulfill",
            "price",
            "bulk",
            "import",
            "sync",
        ),
    ),
    (
        Risk.MEDIUM,
        (
            "create",
            "add",
            "draft",
            "tag",
            "label",
            "note",
            "comment",
            "save",
            "upload",
            "schedule",
            "archive",
        ),
    ),
)
"""Words of each risk level above low; anything else (list, get, fetch, read, query,
search, count, compare, report, summarise...) is read-only: low."""

_RISK_PATTERNS = tuple((risk, tuple(_phrase(w) for w in words)) for risk, words in _RISK_WORDS)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _words(text: str) -> str:
    return _CAMEL.sub(" ", text)


def risk_of_text(text: str) -> Risk:
    """The risk the words of `text` suggest (action names like setInventoryLevel count
    as words: "set inventory level")."""
    spaced = _words(text)
    for risk, patterns in _RISK_PATTERNS:
        if any(p.search(spaced) for p in patterns):
            return risk
    return Risk.LOW


def classify_step(
    tool: str | None,
    action: str | None,
    description: str,
    override: Risk | str | None = None,
) -> Risk:
    """The risk of a step.

    Without `override`: the highest of the catalogue's level for the action (an unknown
    action counts by its name's words) and of the description's words; a known read-only
    action keeps its own level, so a description that merely mentions a later write
    ("fetch orders to update inventory") does not raise it.

    With `override` (a language model's judgement): that level, never below the
    catalog's minimum for a known action (a write is at least high), and an unknown
    action whose name sounds like a write never below medium.
    """
    known = catalog.find(tool, action)
    if override is not None:
        chosen = Risk(str(override).lower())
        if known is not None:
            return catalog.higher(chosen, known.min_risk)
        if known is None and action and risk_of_text(action) is not Risk.LOW:
            return catalog.higher(chosen, Risk.MEDIUM)
        return chosen
    if known is not None and not known.side_effect:
        return known.min_risk
    return catalog.higher(
        known.min_risk if known else None,
        risk_of_text(action) if action else None,
        risk_of_text(description),
    )


def risk_of_message(message: str) -> Risk:
    """The risk of what a client message asks for (the `risk_level` of a chat reply)."""
    return risk_of_text(message)
