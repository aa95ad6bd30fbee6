"""The router's pure rules (issue 15, item 5): keyword scoring, ties, the generalist
fallback, the org's candidates, and what an LLM's answer may choose."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from platform_api.routing.errors import NoAgentFits, RoutingAmbiguous
from platform_api.routing.llm import parse_choice, prompt, short_reason
from platform_api.routing.scoring import (
    Candidate,
    Choice,
    by_keywords,
    candidates_of,
    generalist,
    matches,
    score,
    words,
)
from platform_api.routing.service import choose

SHOP = Candidate("shop", "Bob", ("shopify", "amazon", "inventory", "order"), "e-commerce")
BOOKS = Candidate("books", "Fin", ("invoice", "quickbooks", "purchase order", "xero"))
PLAIN = Candidate("helper", "Ann")


def test_keywords_match_whole_words_phrases_in_order_and_plurals() -> None:
    said = words("Reconcile the Amazon ORDERS; fix purchase-orders and Purchase Orders too")
    assert matches("order", said) and matches("amazon", said)
    assert matches("purchase order", said)  # "purchase orders", in order
    assert not matches("order purchase", said)
    assert not matches("shop", words("the shopify store"))  # whole words only
    assert not matches("invoice", words("invoicing"))


def test_a_phrase_outweighs_a_single_word() -> None:
    request = "Pay the purchase order from Acme"
    assert score(request, SHOP).points == 1  # order
    assert score(request, BOOKS).points == 2  # purchase order
    choice, tied = by_keywords(request, [SHOP, BOOKS])
    assert choice == Choice("books", "keywords", "keywords matched: purchase order (2 points)")
    assert tied == []


def test_the_best_match_wins_and_says_which_keywords() -> None:
    choice, _ = by_keywords("Update Shopify inventory for the Amazon orders", [BOOKS, SHOP])
    assert choice is not None and choice.agent == "shop" and choice.by == "keywords"
    assert choice.reason == "keywords matched: shopify, amazon, inventory, order (4 points)"


def test_a_tie_is_not_decided_by_keywords() -> None:
    choice, tied = by_keywords("an order and an invoice", [SHOP, BOOKS])
    assert choice is None and tied == ["books", "shop"]
    assert by_keywords("hello there", [SHOP, BOOKS]) == (None, [])


def test_the_only_agent_without_keywords_is_the_generalist() -> None:
    assert generalist([SHOP, PLAIN]) == Choice(
        "helper",
        "default",
        "no specialist's keywords matched; the org's only agent without keywords takes the request",
    )
    assert generalist([SHOP, BOOKS]) is None
    assert generalist([PLAIN, Candidate("other", "Eve")]) is None


def instance(name: str, org: str, **spec: Any) -> dict[str, Any]:
    specialist = {"name": name.title(), "systemPrompt": "x", **spec.pop("specialist", {})}
    return {"metadata": {"name": name}, "spec": {"orgId": org, "specialist": specialist, **spec}}


def test_candidates_are_the_orgs_agents_that_take_work() -> None:
    org = "11111111-1111-4111-8111-111111111111"
    found = candidates_of(
        [
            instance("shop", org, specialist={"keywords": ["shopify"], "description": "d"}),
            instance("paused", org, paused=True),
            instance("foreign", "22222222-2222-4222-8222-222222222222"),
            {**instance("going", org), "metadata": {"name": "going", "deletionTimestamp": "t"}},
            instance("alpha", org),
        ],
        org,
    )
    assert found == [Candidate("alpha", "Alpha"), Candidate("shop", "Shop", ("shopify",), "d")]


class FakeLlm:
    """Stands in for `LlmRouter` in `choose` (the HTTP path has its own test against a
    local OpenAI-compatible server)."""

    def __init__(self, pick: str | None) -> None:
        self.pick = pick
        self.asked: list[list[str]] = []

    async def choose(self, request: str, candidates: Sequence[Candidate]) -> Choice | None:
        self.asked.append([c.name for c in candidates])
        return Choice(self.pick, "llm", "LLM: because") if self.pick else None


def run_choose(request: str, candidates: list[Candidate], llm: FakeLlm | None) -> Choice:
    return asyncio.run(choose(request, candidates, llm))  # type: ignore[arg-type]


def test_choose_keywords_first_then_the_llm_then_the_generalist() -> None:
    llm = FakeLlm("books")
    assert run_choose("shopify sync", [SHOP, BOOKS], llm).agent == "shop"
    assert llm.asked == []  # the keywords decided: the LLM is not asked
    assert run_choose("an order and an invoice", [SHOP, BOOKS, PLAIN], llm).by == "llm"
    assert llm.asked == [["shop", "books"]]  # only the tied ones
    assert run_choose("hello", [SHOP, BOOKS, PLAIN], FakeLlm(None)).agent == "helper"
    assert run_choose("hello", [SHOP, PLAIN], None).by == "default"


def test_choose_refuses_with_a_stable_code() -> None:
    with pytest.raises(RoutingAmbiguous) as tie:
        run_choose("an order and an invoice", [SHOP, BOOKS], FakeLlm(None))
    assert tie.value.code == "routing_ambiguous" and tie.value.status_code == 409
    assert tie.value.details == {"candidates": "books, shop"}
    with pytest.raises(NoAgentFits) as none:
        run_choose("hello", [SHOP, BOOKS], None)
    assert none.value.code == "no_agent_fits" and none.value.status_code == 422


def completion(arguments: Any, content: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if arguments is not None:
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        message["tool_calls"] = [{"function": {"name": "choose_agent", "arguments": text}}]
    return {"choices": [{"message": message}]}


def test_the_llm_may_choose_only_among_the_candidates() -> None:
    pool = [SHOP, BOOKS]
    picked = parse_choice(completion({"agent": "books", "reason": "an invoice\n\x00\x1b"}), pool)
    assert picked == Choice("books", "llm", "LLM: an invoice")
    assert parse_choice(completion({"agent": "helper", "reason": "x"}), pool) is None
    assert parse_choice(completion({"agent": "none", "reason": "x"}), pool) is None
    assert parse_choice(completion("not json"), pool) is None
    assert parse_choice({"choices": []}, pool) is None
    text = parse_choice(completion(None, content='{"agent": "shop", "reason": "r"}'), pool)
    assert text is not None and text.agent == "shop"
    assert len(short_reason("x" * 1000)) == 200


def test_the_llm_prompt_names_each_candidate() -> None:
    system, user = prompt("pay the invoice", [SHOP, BOOKS])
    assert "- shop: specialist Bob; e-commerce; keywords: shopify" in system["content"]
    assert "- books: specialist Fin; keywords: invoice" in system["content"]
    assert user == {"role": "user", "content": "pay the invoice"}
