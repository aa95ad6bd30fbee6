"""The agent's Prometheus metrics with the whole system running (issue 17, item 4, "and on
the agent"): the operator (whose settings turn the agents' metrics on, tests/fixtures/
stack.py) writes the metrics port into the agent's pod, the agent process started from
that pod spec serves them on a port of their own, and after a task is planned and its
steps run against the fake upstreams (one succeeds, one fails) the counters show it."""

from __future__ import annotations

import asyncio

from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import SEED_REQUEST, World, execution_state
from tests.e2e.test_step_failure import READ, approved, failed

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(world: World) -> tuple[str, Samples]:
    answer = await world.http.get(world.agent.metrics_url, timeout=5)
    assert answer.status_code == 200, answer.text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(answer.text)
        for s in family.samples
    }
    return answer.text, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def settled(world: World, name: str, want: float, **labels: str) -> Samples:
    """The scrape once `name{labels}` reads `want` (within ten seconds)."""
    for _ in range(100):
        _, samples = await scrape(world)
        if value(samples, name, **labels) == want:
            return samples
        await asyncio.sleep(0.1)
    raise AssertionError(f"{name}{labels} never read {want}: {samples}")


async def test_plans_steps_and_events_show_on_the_agents_own_metrics_port(world: World) -> None:
    agent = world.agent
    assert agent.spec.metrics_port and agent.spec.metrics_port != agent.spec.port
    # the pod spec's variable (mapped to a free local port, as the command port is)
    assert agent.spec.env["HUMANWORK_AGENT_METRICS_PORT"] == str(agent.spec.metrics_port)
    assert (await world.http.get(f"{agent.url}/v1/health")).status_code == 200
    # the command API serves no metrics; the metrics port serves nothing but them
    assert (await world.http.get(f"{agent.url}/metrics")).status_code == 404
    with_no_signature = await world.http.post(
        f"http://127.0.0.1:{agent.spec.metrics_port}/v1/tasks", json={"request": "x"}
    )
    assert with_no_signature.status_code >= 400
    _, before = await scrape(world)
    assert value(before, "humanwork_agent_plans_total", planner="offline") == 0

    planned = await world.plan()
    name, read = planned["name"], planned["steps"][0]
    assert read["tool"] == "amazon"
    _, samples = await scrape(world)
    assert value(samples, "humanwork_agent_plans_total", planner="offline") == 1
    steps = "humanwork_agent_step_executions_total"
    assert value(samples, steps, tool="amazon", outcome="succeeded") == 0

    assert (await world.decide(name, read["id"])).status_code == 200
    await world.until(name, lambda t: execution_state(t, read["id"]) == "Succeeded")
    samples = await settled(world, steps, 1, tool="amazon", outcome="succeeded")

    # a step the upstream refuses fails, and is counted as failed under its tool
    world.shop.fail_next(404, path_contains="products.json", body={"errors": "Not Found"})
    await failed(world, await approved(world, READ, "low"))
    samples = await settled(world, steps, 1, tool="shopify", outcome="failed")
    assert value(samples, steps, tool="shopify", outcome="succeeded") == 0
    assert value(samples, steps, tool="amazon", outcome="succeeded") == 1

    # plan_ready, then started + completed, started + failed: all delivered, none dropped
    samples = await settled(world, "humanwork_agent_running_tasks", 0)
    assert value(samples, "humanwork_agent_events_total", outcome="delivered") >= 5
    assert value(samples, "humanwork_agent_events_total", outcome="dropped") == 0
    assert value(samples, "humanwork_agent_event_outbox") == 0

    # the scrape carries no secret and no task content
    text, _ = await scrape(world)
    for secret in (world.token, world.callback_secret, SEED_REQUEST, "Reconcile", name):
        assert secret not in text
