"""The router's refusals, in the platform's one error family (`platform_api.errors`)."""

from __future__ import annotations

from platform_api.errors import Conflict, ValidationFailed


class OrgHasNoAgent(Conflict):
    """The org has no AgentInstance that takes work (none, or all paused)."""

    code = "org_has_no_agent"


class RoutingAmbiguous(Conflict):
    """Several agents fit the request equally well (`details.candidates`, comma-separated);
    name one with `POST /orgs/{org_id}/agents/{name}/tasks`."""

    code = "routing_ambiguous"


class NoAgentFits(ValidationFailed):
    """No agent's specialist fits the request (`details.agents`: the org's agents,
    comma-separated)."""

    code = "no_agent_fits"
