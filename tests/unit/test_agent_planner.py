"""Dispatch, risk and planning: the seed's keyword list and default mode, the risk
heuristic, the offline planner (the seed's example, periods, SKUs, the reconciliation
worked out through read-only lookups), and the model's plan validated into the
AgenticTask step model, with a fallback to the offline planner on anything unusable."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from agent_image.dispatch import (
    AGENTIC_KEYWORDS,
    Mode,
    choose_mode,
    classify_step,
    risk_of_text,
)
from agent_image.llm import LLMClient
from agent_image.planning.config import AgentConfig, LLMGate
from agent_image.planning.drafts import PlanError
from agent_image.planning.llm import Planner, validate_plan
from agent_image.planning.offline import is_reconciliation, offline_plan
from agent_image.planning.periods import parse_period
from humanwork_core import taskflow
from humanwork_core.catalog import tool_name
from humanwork_core.resources import AgenticTaskSpec, Risk, StepKind
from humanwork_dev.fakes import catalog
from humanwork_dev.fakes.openai_server import FakeOpenAI

SEED_EXAMPLE = (
    "Reconcile all Amazon orders for October and update inventory in Shopify for any discrepancies"
)
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
CONFIG = AgentConfig(
    {
        "model": "openai/gpt-4o",
        "specialist": {"name": "Bob", "systemPrompt": "You are Bob."},
        "enabledTools": ["amazon", "shopify"],
        "confidenceThreshold": 70,
    },
    "hash",
)


# --- a read-only view of the fakes' seeded merchant, as the platform's proxy answers ----------


def _between(moment: str, after: str | None, before: str | None) -> bool:
    at = datetime.fromisoformat(moment)
    low = datetime.fromisoformat(after) if after else None
    high = datetime.fromisoformat(before) if before else None
    return (low is None or at >= low) and (high is None or at < high)


def catalog_tool_result(tool: str, action: str, params: dict[str, Any]) -> dict[str, Any]:
    """What the platform's proxy answers for a read of the seeded merchant (the world of
    humanwork_dev/fakes/catalog.py): the `result` of `{tool, action, result, ...}`."""
    if (tool, action) == ("amazon", "listOrders"):
        orders = [
            catalog.amazon_order(o)
            for o in catalog.AMAZON_ORDERS
            if _between(
                catalog.iso(o.purchased), params["CreatedAfter"], params.get("CreatedBefore")
            )
        ]
        return {"orders": orders, "pages": 1, "truncated": False, "nextToken": None}
    if (tool, action) == ("amazon", "getOrderItems"):
        order = next(o for o in catalog.AMAZON_ORDERS if o.order_id == params["orderId"])
        return {"orderId": order.order_id, "orderItems": catalog.amazon_order_items(order)}
    if (tool, action) == ("shopify", "listOrders"):
        orders = [
            o
            for o in catalog.shopify_orders()
            if _between(o["created_at"], params.get("created_at_min"), params.get("created_at_max"))
        ]
        return {"orders": orders, "pages": 1, "truncated": False}
    if (tool, action) == ("shopify", "listProducts"):
        return {"products": catalog.shopify_products(), "pages": 1, "truncated": False}
    if (tool, action) == ("shopify", "getInventoryLevels"):
        wanted = {int(i) for i in params["inventory_item_ids"]}
        levels = [
            {"inventory_item_id": item, "location_id": location, "available": available}
            for (item, location), available in catalog.INVENTORY.items()
            if item in wanted
        ]
        return {"inventory_levels": levels}
    raise LookupError(f"no read {tool}.{action}")


class CatalogReader:
    """A planning reader over the seeded merchant, recording the reads."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    async def __call__(self, tool: str, action: str, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((tool, action, params))
        return catalog_tool_result(tool, action, params)


async def failing_reader(tool: str, action: str, params: dict[str, Any]) -> dict[str, Any]:
    raise ConnectionError("the platform is down")


# --- dispatch and risk -----------------------------------------------------------------------


def test_the_seed_keywords_switch_to_agentic_mode() -> None:
    # no keyword of the seed's list, but it asks for a change ("update inventory"), which
    # domain mode (read-only) cannot make: a plan
    assert choose_mode(SEED_EXAMPLE) is Mode.AGENTIC
    assert choose_mode("Please refund my payment") is Mode.AGENTIC
    assert choose_mode("How many units of SKU-1 do we have in stock?") is Mode.DOMAIN
    for keyword in AGENTIC_KEYWORDS:
        assert choose_mode(f"Please {keyword} for our store") is Mode.AGENTIC, keyword
    assert choose_mode("Deploying the new theme") is Mode.AGENTIC
    assert choose_mode("Can you automate this?") is Mode.AGENTIC
    assert choose_mode("We are analyzing all returns") is Mode.AGENTIC
    assert choose_mode("Where is my order?") is Mode.DOMAIN
    assert choose_mode("the buildings address") is Mode.DOMAIN  # words, not substrings


def test_the_default_mode_makes_everything_agentic() -> None:
    assert choose_mode("Where is my order?", "agentic") is Mode.AGENTIC
    assert choose_mode("Where is my order?", "AGENTIC") is Mode.AGENTIC
    assert choose_mode("Where is my order?", "domain") is Mode.DOMAIN
    config = AgentConfig({"defaultMode": "agentic"})
    assert config.default_mode == "agentic"
    assert AgentConfig({}, default_mode_env="agentic").default_mode == "agentic"


@pytest.mark.parametrize(
    ("text", "risk"),
    [
        ("Fetch all Amazon orders for October", Risk.LOW),
        ("List products and count them", Risk.LOW),
        ("Tag the order as gift", Risk.MEDIUM),
        ("Create a draft order", Risk.MEDIUM),
        ("Update inventory in Shopify", Risk.HIGH),
        ("setInventoryLevel", Risk.HIGH),
        ("Send an email to the customer", Risk.HIGH),
        ("Refund order 1234", Risk.CRITICAL),
        ("Delete the product", Risk.CRITICAL),
        ("Pay the supplier invoice", Risk.CRITICAL),
        ("What is my address?", Risk.LOW),
        ("Show me the settings", Risk.LOW),
    ],
)
def test_risk_by_keywords(text: str, risk: Risk) -> None:
    assert risk_of_text(text) is risk


def test_step_risk_from_the_action_and_the_models_override() -> None:
    # a read stays low even when its description mentions the later write
    assert (
        classify_step("amazon", "listOrders", "Fetch orders to update inventory later") is Risk.LOW
    )
    assert classify_step("shopify", "adjustInventoryLevel", "Adjust stock") is Risk.HIGH
    assert classify_step("shopify", "setInventoryLevel", "Refund and set") is Risk.CRITICAL
    # the model may raise or lower a level, but never below the action catalog's minimum
    assert classify_step("shopify", "listOrders", "x", override="high") is Risk.HIGH
    assert classify_step("shopify", "setInventoryLevel", "x", override="low") is Risk.HIGH
    assert classify_step("shopify", "setInventoryLevel", "x", override="critical") is Risk.CRITICAL
    assert tool_name("shopify_query") == "shopify" and tool_name("Amazon") == "amazon"


# --- the offline planner ---------------------------------------------------------------------


def test_periods() -> None:
    october = parse_period(SEED_EXAMPLE, NOW)
    assert october is not None
    assert (october.after, october.before) == ("2026-10-01T00:00:00Z", "2026-11-01T00:00:00Z")
    given = parse_period("orders for October 2025", NOW)
    assert given is not None and given.after == "2025-10-01T00:00:00Z"
    # a month without a year is the latest one that has begun, never one still to come
    december = parse_period("orders in December", NOW)
    assert december is not None and december.label == "December 2025"
    november = parse_period("orders in November", NOW)
    assert november is not None and november.label == "November 2026"
    january = datetime(2027, 1, 15, tzinfo=UTC)
    after_new_year = parse_period(SEED_EXAMPLE, january)
    assert after_new_year is not None and after_new_year.label == "October 2026"
    last = parse_period("orders of last month", NOW)
    assert last is not None and last.label == "October 2026"
    days = parse_period("orders of the past 7 days", NOW)
    assert days is not None and days.after == "2026-11-22T12:00:00Z"
    assert parse_period("may I ask where my order is", NOW) is None


async def test_the_seed_example_without_the_platform_plans_a_read_then_a_write() -> None:
    plan = await offline_plan(SEED_EXAMPLE, now=NOW, tools=("amazon", "shopify"))
    read, write = plan.steps
    assert (read.id, read.kind, read.tool, read.risk) == (
        "step-1",
        StepKind.ACTION,
        "amazon",
        Risk.LOW,
    )
    assert read.parameters == {
        "action": "listOrders",
        "params": {
            "CreatedAfter": "2026-10-01T00:00:00Z",
            "CreatedBefore": "2026-11-01T00:00:00Z",
        },
    }
    assert (write.id, write.tool, write.risk) == ("step-2", "shopify", Risk.HIGH)
    assert write.parameters["action"] == "adjustInventoryLevel"
    assert write.parameters["params"] == {}  # the expert fills it in with an edit
    assert "EDIT this step's parameters" in write.description
    assert plan.planner == "offline" and plan.model == "offline" and plan.warnings == ()
    # the steps are what an AgenticTask holds, and their hash is stable
    spec = AgenticTaskSpec.from_wire(
        {
            "orgId": "3f2b8c1e-7d4a-4e9b-9c51-2a6f0d8e4b17",
            "agentRef": {"name": "acme"},
            "description": SEED_EXAMPLE,
            "requestedBy": "client@example.com",
            "steps": plan.wire_steps(),
        }
    )
    assert taskflow.step_hash(spec.steps[1]) == taskflow.step_hash(write)


async def test_the_seed_example_works_out_the_discrepancy_while_planning() -> None:
    reader = CatalogReader()
    plan = await offline_plan(SEED_EXAMPLE, now=NOW, tools=("amazon", "shopify"), reader=reader)
    read, write = plan.steps
    assert read.tool == "amazon" and read.risk is Risk.LOW
    mug = catalog.BY_SKU[catalog.DISCREPANT_SKU]
    assert write.tool == "shopify" and write.risk is Risk.HIGH
    assert write.parameters == {
        "action": "adjustInventoryLevel",
        "params": {
            "location_id": catalog.WAREHOUSE_LOCATION_ID,
            "inventory_item_id": mug.inventory_item_id,
            "available_adjustment": -catalog.DISCREPANCY,
        },
    }
    assert catalog.UNSYNCED_ORDER_ID in write.description and "40 -> 37" in write.description
    # only reads were made, and each unsynced order's items were read once
    assert {(t, a) for t, a, _ in reader.calls} == {
        ("amazon", "listOrders"),
        ("amazon", "getOrderItems"),
        ("shopify", "listOrders"),
        ("shopify", "listProducts"),
        ("shopify", "getInventoryLevels"),
    }
    items = [p["orderId"] for t, a, p in reader.calls if a == "getOrderItems"]
    assert items == [catalog.UNSYNCED_ORDER_ID]


async def test_a_period_with_nothing_to_fix_plans_only_the_read() -> None:
    plan = await offline_plan(
        SEED_EXAMPLE.replace("October", "September 2026"), now=NOW, reader=CatalogReader()
    )
    assert [s.tool for s in plan.steps] == ["amazon"]
    assert any("nothing to update" in w for w in plan.warnings)


async def test_when_the_lookups_fail_the_write_waits_for_the_experts_edit() -> None:
    plan = await offline_plan(SEED_EXAMPLE, now=NOW, reader=failing_reader)
    assert [s.risk for s in plan.steps] == [Risk.LOW, Risk.HIGH]
    assert plan.steps[1].parameters == {"action": "adjustInventoryLevel", "params": {}}


async def test_the_year_of_the_request_wins() -> None:
    plan = await offline_plan(SEED_EXAMPLE.replace("October", "October 2025"), now=NOW)
    assert plan.steps[0].parameters["params"] == {
        "CreatedAfter": "2025-10-01T00:00:00Z",
        "CreatedBefore": "2025-11-01T00:00:00Z",
    }


async def test_a_sku_named_write_is_looked_up() -> None:
    plan = await offline_plan("Set SKU HW-TEE-M to 30 in Shopify", now=NOW, reader=CatalogReader())
    [step] = plan.steps
    tee = catalog.BY_SKU["HW-TEE-M"]
    assert step.parameters == {
        "action": "setInventoryLevel",
        "params": {
            "location_id": catalog.WAREHOUSE_LOCATION_ID,
            "inventory_item_id": tee.inventory_item_id,
            "available": 30,
        },
    }
    assert step.risk is Risk.HIGH


async def test_other_requests() -> None:
    plan = await offline_plan("Refund Amazon order 113-2026100-0000001", now=NOW)
    [step] = plan.steps
    assert step.kind is StepKind.INPUT and step.risk is Risk.CRITICAL and step.tool is None
    plan = await offline_plan("hello there", now=NOW)
    assert plan.steps[0].kind is StepKind.INPUT
    plan = await offline_plan("Show me Shopify order #5600000000101", now=NOW)
    assert plan.steps[0].parameters == {
        "action": "getOrder",
        "params": {"id": "5600000000101"},
    }
    plan = await offline_plan(SEED_EXAMPLE, now=NOW, tools=("shopify",))
    assert plan.warnings and "amazon" in plan.warnings[0]
    revised = await offline_plan(
        "Update inventory in Shopify", now=NOW, feedback="only set SKU HW-PIN-07 to 12"
    )
    assert revised.steps[0].parameters["action"] == "setInventoryLevel"


def test_the_reconciliation_skill_is_recognised() -> None:
    assert is_reconciliation(SEED_EXAMPLE)
    assert not is_reconciliation("List Amazon orders")


# --- the model's plan ------------------------------------------------------------------------


def test_a_models_plan_is_validated_into_steps() -> None:
    steps, summary = validate_plan(
        {
            "summary": "two steps",
            "steps": [
                {
                    "description": "Fetch the orders",
                    "tool": "amazon_query",
                    "action": "listOrders",
                    "params": {"CreatedAfter": "2026-10-01T00:00:00Z"},
                    "risk": "low",
                },
                {
                    "description": "Which location?",
                    "kind": "input",
                    "options": ["warehouse", "store"],
                },
            ],
        }
    )
    assert summary == "two steps"
    assert steps[0].tool == "amazon" and steps[0].parameters["action"] == "listOrders"
    assert steps[1].kind is StepKind.INPUT and steps[1].options == ("warehouse", "store")
    garbage: Any
    for garbage in (
        [],
        {"steps": []},
        {"steps": [{"description": "x", "tool": "gmail", "action": "send"}]},
        {"steps": [{"description": "x", "tool": "shopify", "action": "dropTables"}]},
        {"steps": [{"description": "x", "tool": "shopify", "action": "getOrder", "params": {}}]},
        {"steps": [{"description": "x", "tool": "shopify", "action": "listOrders", "params": 3}]},
        {"steps": [{"tool": "shopify", "action": "listOrders"}]},
        {"steps": [{"description": "x", "tool": "amazon", "action": "getOrder", "risk": "huge"}]},
    ):
        with pytest.raises(PlanError):
            validate_plan(garbage)


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def gate(fake: FakeOpenAI) -> AsyncIterator[LLMGate]:
    client = LLMClient(fake.url, "sk-test", timeout=5, max_retries=1, backoff=0.01)
    yield LLMGate(client, cooldown=60)
    await client.aclose()


async def test_the_models_plan_is_used_and_audited(fake: FakeOpenAI, gate: LLMGate) -> None:
    fake.tool_call(
        "propose_plan",
        {
            "summary": "check then fix",
            "steps": [
                {
                    "description": "Read the inventory of the mug",
                    "tool": "shopify",
                    "action": "getInventoryLevels",
                    "params": {"inventory_item_ids": ["46100000000001"]},
                    "risk": "low",
                },
                {
                    "description": "Set the mug to 37",
                    "tool": "shopify",
                    "action": "setInventoryLevel",
                    "params": {
                        "location_id": 65000000001,
                        "inventory_item_id": 46100000000001,
                        "available": 37,
                    },
                    "risk": "low",  # a write is never below medium
                },
            ],
        },
    )
    audited: list[str] = []

    async def audit(completion: Any, purpose: str) -> None:
        audited.append(f"{purpose}:{completion.model}")

    planner = Planner(gate, audit)
    plan = await planner.plan("Fix the mug stock in Shopify", CONFIG, now=NOW)
    assert plan.planner == "llm" and plan.summary == "check then fix"
    # the model said medium for the write: raised to the action catalog's minimum
    assert [s.risk for s in plan.steps] == [Risk.LOW, Risk.HIGH]
    assert audited == ["plan:openai/gpt-4o"]
    sent = fake.requests[0].body
    assert sent["model"] == "openai/gpt-4o"
    assert sent["tool_choice"]["function"]["name"] == "propose_plan"
    assert sent["messages"][0]["content"].startswith("You are Bob.")
    assert "setInventoryLevel" in sent["messages"][0]["content"]


async def test_a_json_answer_without_tool_call_is_accepted(fake: FakeOpenAI, gate: LLMGate) -> None:
    fake.reply(
        'Here you go:\n```json\n{"steps": [{"description": "List products", '
        '"tool": "shopify", "action": "listProducts", "params": {}}]}\n```'
    )
    plan = await Planner(gate).plan("List our products", CONFIG, now=NOW)
    assert plan.planner == "llm" and plan.steps[0].parameters["action"] == "listProducts"


async def test_garbage_from_the_model_falls_back_to_the_offline_planner(
    fake: FakeOpenAI, gate: LLMGate
) -> None:
    fake.reply("I would rather not.")
    plan = await Planner(gate).plan("List Shopify orders from last month", CONFIG, now=NOW)
    assert plan.planner == "offline" and plan.steps[0].tool == "shopify"
    fake.tool_call("propose_plan", {"steps": [{"description": "x", "tool": "gmail"}]})
    plan = await Planner(gate).plan("List Shopify orders from last month", CONFIG, now=NOW)
    assert plan.planner == "offline"
    assert gate.usable() is not None  # garbage is not an outage


async def test_a_failing_model_is_left_alone_for_a_while(fake: FakeOpenAI, gate: LLMGate) -> None:
    fake.fail(500, times=2)
    plan = await Planner(gate).plan("List Shopify orders", CONFIG, now=NOW)
    assert plan.planner == "offline" and len(fake.requests) == 2
    assert gate.usable() is None and gate.last_error
    plan = await Planner(gate).plan("List Shopify orders", CONFIG, now=NOW)
    assert plan.planner == "offline" and len(fake.requests) == 2  # not asked again


async def test_planning_lookups_are_off_unless_configured(fake: FakeOpenAI, gate: LLMGate) -> None:
    reader = CatalogReader()
    fake.reply("no plan here")
    plan = await Planner(gate, reader=reader).plan(SEED_EXAMPLE, CONFIG, now=NOW)
    assert reader.calls == []  # nothing touched a store before an expert approved a step
    assert plan.steps[1].parameters == {"action": "adjustInventoryLevel", "params": {}}


async def test_the_reconciliation_skill_is_preferred_over_the_model(
    fake: FakeOpenAI, gate: LLMGate
) -> None:
    config = AgentConfig({**CONFIG.data, "planningLookups": True})
    assert config.planning_lookups and not CONFIG.planning_lookups
    plan = await Planner(gate, reader=CatalogReader()).plan(SEED_EXAMPLE, config, now=NOW)
    assert plan.planner == "offline" and fake.requests == []
    params = plan.steps[1].parameters["params"]
    assert isinstance(params, dict)
    assert params["available_adjustment"] == -catalog.DISCREPANCY


async def test_the_feedback_on_a_rejected_plan_changes_the_revised_one() -> None:
    revised = await offline_plan(SEED_EXAMPLE, now=NOW, feedback="Only September, please")
    assert revised.steps[0].parameters["params"] == {
        "CreatedAfter": "2026-09-01T00:00:00Z",
        "CreatedBefore": "2026-10-01T00:00:00Z",
    }
    assert "September 2026" in revised.steps[1].description
    assert parse_period("you may go now", NOW, loose=True) is None


# --- the demo's request, whatever today is ---------------------------------------------------


@pytest.mark.parametrize(
    "today",
    [
        datetime(2027, 1, 15, 9, 0, tzinfo=UTC),  # the new year after the seeded orders
        datetime(2027, 10, 2, 9, 0, tzinfo=UTC),  # a new October has begun, holding no orders
        datetime(2031, 3, 1, 9, 0, tzinfo=UTC),
        datetime.now(UTC),
    ],
    ids=["2027-01-15", "2027-10-02", "2031-03-01", "today"],
)
async def test_the_demo_request_plans_the_seeded_write_on_any_date(today: datetime) -> None:
    """`make demo` and the stack's test send `catalog.SEED_REQUEST` to an agent that plans
    with the real clock: the period it names must be the one the fakes hold on any date."""
    period = parse_period(catalog.SEED_REQUEST, today)
    assert period is not None and period.after == catalog.OCTOBER_START
    assert period.before > catalog.OCTOBER_END
    reader = CatalogReader()
    plan = await offline_plan(catalog.SEED_REQUEST, now=today, reader=reader)
    read, write = plan.steps
    assert read.parameters["params"]["CreatedAfter"] == catalog.OCTOBER_START
    mug = catalog.BY_SKU[catalog.DISCREPANT_SKU]
    assert write.parameters["params"] == {
        "location_id": catalog.WAREHOUSE_LOCATION_ID,
        "inventory_item_id": mug.inventory_item_id,
        "available_adjustment": -catalog.DISCREPANCY,
    }
    assert catalog.UNSYNCED_ORDER_ID in write.description
