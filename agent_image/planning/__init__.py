"""Planning: plans for tasks, offline (a grammar), with lookups, or from a language model.

Both work with a language model when one is configured and reachable, and OFFLINE
otherwise (no LLM base URL, a reserved never-resolving one such as
`https://llm.example/v1`, or the model failing): the offline planner turns a request into
steps with a small grammar of tools, actions and periods; the offline responder answers
from the expert corrections it was given, or with a templated holding reply that goes to
the expert queue. So the whole system works with no key, and deterministically in tests.

Plans are tuples of :class:`humanwork_core.resources.Step` (the AgenticTask's own model),
with step ids `step-1`, `step-2`, ... and `parameters = {"action": <tool action>,
"params": {...}}`: exactly the body the executor sends to the platform's tool proxy
(`POST /v1/agent-api/tools/{tool}` with `{action, params, idempotencyKey, task, step}`).
The proxy runs a side-effecting action only with the parameters the expert approved, so
the executor never rewrites them.

The write-step convention. A step's params are exactly what the tool proxy will run
(`adjustInventoryLevel` takes `location_id`, `inventory_item_id`, `available_adjustment`;
`setInventoryLevel` takes `location_id`, `inventory_item_id`, `available`), so a write
whose values are not known when planning (the seed's "update inventory in Shopify for any
discrepancies": they are known only once step 1 has read the orders) is planned concrete
in tool and action, high risk, with EMPTY params and a description telling the expert to
fill them in: the expert approves it with an `edit` decision carrying the exact params
(what step 1 found), and the proxy runs exactly those. Nothing touches a store before an
expert approves a step.

With `planningLookups: true` in the configuration (`POST /v1/configure`), the planner
instead works the values out while planning through read-only tool calls (reads need no
approval at the proxy): SKUs named in the request are looked up (listProducts,
getInventoryLevels), and a reconciliation of Amazon orders with Shopify inventory
becomes one `adjustInventoryLevel` per SKU that differs, with its params filled in.
"""
