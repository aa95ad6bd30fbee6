"""Pick the org's agent for a request: the keywords first
(:mod:`platform_api.routing.scoring`), the LLM when configured
(:mod:`platform_api.routing.llm`) for what they leave open, then the org's only
generalist; otherwise a clear refusal (:mod:`platform_api.routing.errors`)."""

from __future__ import annotations

from platform_api.kube.client import KubeClient
from platform_api.models import Org
from platform_api.routing.errors import NoAgentFits, OrgHasNoAgent, RoutingAmbiguous
from platform_api.routing.llm import LlmRouter
from platform_api.routing.scoring import Candidate, Choice, by_keywords, candidates_of, generalist


async def org_candidates(kube: KubeClient, org: Org) -> list[Candidate]:
    """The org's agents that take work; OrgHasNoAgent when there are none."""
    found = candidates_of(await kube.list_agent_instances(org.namespace), str(org.id))
    if not found:
        raise OrgHasNoAgent("the org has no agent that takes work", org=str(org.id))
    return found


async def choose(request: str, candidates: list[Candidate], llm: LlmRouter | None) -> Choice:
    """The agent for `request` among `candidates`, or the refusal that says why not."""
    best, tied = by_keywords(request, candidates)
    if best is not None:
        return best
    if llm is not None:
        pool = [c for c in candidates if c.name in tied] if tied else candidates
        picked = await llm.choose(request, pool)
        if picked is not None:
            return picked
    if tied:
        raise RoutingAmbiguous(
            "several agents fit the request equally; name one", candidates=", ".join(tied)
        )
    fallback = generalist(candidates)
    if fallback is not None:
        return fallback
    raise NoAgentFits(
        "no agent's specialist fits the request", agents=", ".join(c.name for c in candidates)
    )
