"""The tool proxy's path to an org's MCP server: an agent's call of one of its tools runs
only as an approved step, once, with the same ledger, audit and signed receipt as the
native upstreams (`agent_api.proxy.ToolProxy`, whose sessions, ledger, signer and
confirmation check it uses).

In order: the token's `tools:execute` scope; the AgentInstance lists the server's step tool
(`mcp_<server>`); the org registered the server and it listed the tool; the named task and
step (read from the API server now) approve exactly this tool and these arguments, with
the definition hash the step pinned (`parameters.definition`; a step without one is
refused: `definition_not_pinned`) and, where the platform's rules say so, the client
confirmed it; the step declares at least the tool's risk (the admin's, else `high`:
`step_risk_below_tool`). Every MCP tool call is treated as a side effect, whatever the
server's annotations say. Then the ledger's claim keyed by the step; then, in one MCP
session, the server's current definition of the tool is hashed and compared with the
pinned one (a difference answers 409 `tool_definition_changed`, audited as a refused
`tool.called`, the claim released: nothing of the call is sent) and the tool is called.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from humanwork_core import keys, receipts, taskflow
from humanwork_core.resources import AgenticTask
from humanwork_core.taskflow.execution import approved_step
from platform_api.agent_api.identity import Agent
from platform_api.agent_api.ledger import Claim, request_hash, step_key
from platform_api.agent_api.proxy import TOOLS_SCOPE, ToolProxy, record_tool_call
from platform_api.agent_api.schemas import ToolCallIn, ToolCallOut
from platform_api.errors import (
    KubernetesUnavailable,
    PlatformError,
    ScopeMissing,
    StepNotApproved,
    TaskCancelRequested,
    ToolNotPermitted,
)
from platform_api.kube.client import KubeNotFound
from platform_api.mcp_servers import client, definitions, service
from platform_api.mcp_servers.errors import RiskBelowTool
from platform_api.mcp_servers.repository import McpServerRepository
from platform_api.models import McpServer, McpTool, Org
from platform_api.tools import upstreams
from platform_api.tools.upstreams.egress import Egress


@dataclass(frozen=True)
class Target:
    """The org's server and tool a call names, and the org's rules a receipt names."""

    server: McpServer
    tool: McpTool
    policy: dict[str, Any]


@dataclass
class McpProxy:
    """Calls of an org's MCP tools, through the platform's tool proxy's machinery."""

    tools: ToolProxy
    egress: Egress
    timeout: float

    async def call_step_tool(self, agent: Agent, step_tool: str, body: ToolCallIn) -> ToolCallOut:
        """`call` for `POST /v1/agent-api/tools/mcp_<server>` (`action`: the server's tool)."""
        server = definitions.server_of_step_tool(step_tool)
        if server is None:
            raise upstreams.UnknownTool(f"no such tool {step_tool[:100]!r}")
        return await self.call(agent, server, body.action, body)

    async def call(self, agent: Agent, server: str, tool: str, body: ToolCallIn) -> ToolCallOut:
        """Run one call of `server`'s `tool` for `agent`, as the module docstring says."""
        step_tool = definitions.step_tool(server)
        try:
            target = await self._target(agent, server, tool)
            task, pinned = await self._approved(agent, step_tool, body, target)
        except TaskCancelRequested as refused:
            await self._audit_refusal(agent, step_tool, body, refused)
            raise
        key = step_key(task, str(body.step))
        claim = Claim(
            uuid.UUID(agent.org_id),
            agent.agent_id,
            key,
            step_tool,
            body,
            request_hash(step_tool, body),
        )
        stored = await self.tools.ledger.claim(claim)
        if stored is not None:
            return stored
        result, error, auth = await self._perform(target, tool, body.params, pinned)
        receipt = (
            None
            if error is not None
            else self._receipt(agent, step_tool, body, task, target, result)
        )
        error = await self._finish(agent, step_tool, body, claim, result, error, receipt, auth)
        if error is not None:
            raise error
        return ToolCallOut(
            tool=step_tool,
            action=body.action,
            result=result,
            replayed=False,
            sideEffecting=True,
            receipt=receipt,
        )

    async def _target(self, agent: Agent, server: str, tool: str) -> Target:
        if TOOLS_SCOPE not in agent.scopes:
            raise ScopeMissing(f"the token lacks the {TOOLS_SCOPE} scope")
        step_tool = definitions.step_tool(server)
        if step_tool not in agent.enabled_tools:
            raise ToolNotPermitted(
                f"the agent's enabledTools do not include {step_tool!r}", tool=step_tool
            )
        org_id = uuid.UUID(agent.org_id)
        async with self.tools.sessions() as session, session.begin():
            repo = McpServerRepository(session)
            row = await repo.get(org_id, server)
            listed = await repo.tool(row.id, tool) if row is not None else None
            org = await session.get(Org, org_id)
        if row is None or listed is None or org is None:
            raise upstreams.UnknownTool(f"no such tool {definitions.view_name(server, tool)!r}")
        policy = {"org": org.approval_policy, "clientConfirmRisks": org.client_confirm_risks}
        return Target(row, listed, policy)

    async def _approved(
        self, agent: Agent, step_tool: str, body: ToolCallIn, target: Target
    ) -> tuple[AgenticTask, str]:
        """The task and the definition hash its approved step pinned, or a refusal."""
        if not body.task or not body.step:
            raise StepNotApproved(
                "a call of an MCP server's tool must name the approved task and step",
                reason="no_step",
            )
        task = await self._task(agent, body.task, body.step)
        now = datetime.now(UTC)
        try:
            step, entry = approved_step(task, body.step, now)
            pinned = taskflow.effective_parameters(step, entry).get("definition")
            taskflow.authorize_tool_call(
                task,
                body.step,
                tool=step_tool,
                parameters={"action": body.action, "params": body.params, "definition": pinned},
                now=now,
            )
        except taskflow.TaskFlowError as exc:
            raise StepNotApproved(exc.message, reason=exc.code, step=body.step) from None
        if not isinstance(pinned, str):
            raise StepNotApproved(
                "the step pins no definition of the tool (parameters.definition)",
                reason="definition_not_pinned",
                step=body.step,
            )
        floor = definitions.tool_risk(target.tool.risk)
        if step.risk.rank < floor.rank:
            raise RiskBelowTool(
                f"the step declares {step.risk.value}; the org gives this tool {floor.value}",
                step=body.step,
                risk=floor.value,
            )
        await self.tools._check_confirmation(agent, task, body.step)
        return task, pinned

    async def _task(self, agent: Agent, name: str, step: str) -> AgenticTask:
        if self.tools.kube is None:
            raise KubernetesUnavailable("the tool proxy needs the Kubernetes API")
        try:
            task = AgenticTask.from_wire(await self.tools.kube.get_task(agent.namespace, name))
        except KubeNotFound:
            raise StepNotApproved("no such task", reason="task_not_found") from None
        if task.spec.agent_ref.name != agent.name or task.spec.org_id != agent.org_id:
            raise StepNotApproved("the task belongs to another agent", reason="not_this_agent")
        if keys.CANCEL_REQUESTED in task.metadata.annotations:
            raise TaskCancelRequested(
                "a cancel of the task was requested: no further tool call runs",
                task=name,
                step=step,
            )
        return task

    async def _perform(
        self, target: Target, tool: str, arguments: dict[str, Any], pinned: str
    ) -> tuple[dict[str, Any], PlatformError | None, str | None]:
        """The definition check and the call, in one session: (result, error, auth)."""
        auth: str | None = None
        try:
            auth = service.authorization(self.tools.cipher, target.server)
            async with client.connect(
                target.server.url, auth, self.egress, self.timeout
            ) as connection:
                result = await connection.call(tool, arguments, pinned)
        except PlatformError as exc:
            return {}, exc, auth
        secrets = [auth, auth.removeprefix("Bearer ")] if auth else []
        return upstreams.sanitise(result, secrets), None, auth

    def _receipt(
        self,
        agent: Agent,
        step_tool: str,
        body: ToolCallIn,
        task: AgenticTask,
        target: Target,
        result: dict[str, Any],
    ) -> dict[str, Any] | None:
        """The signed receipt of a call the server answered (None without a signer)."""
        if self.tools.receipts is None or body.step is None:
            return None
        approvals, confirmation = receipts.signoffs(task, body.step)
        return self.tools.receipts.sign(
            receipts.Facts(
                org=agent.org_id,
                agent=agent.agent_id,
                task=receipts.task_ref(task),
                step=body.step,
                tool=step_tool,
                action=body.action,
                params=body.params,
                approvals=approvals,
                confirmation=confirmation,
                policy_version=receipts.policy_version(
                    task.spec.policy.model_dump(mode="json", by_alias=True),
                    target.policy.get("org"),
                    target.policy.get("clientConfirmRisks"),
                ),
                answer=result,
                at=datetime.now(UTC),
            )
        )

    async def _finish(
        self,
        agent: Agent,
        step_tool: str,
        body: ToolCallIn,
        claim: Claim,
        result: dict[str, Any],
        error: PlatformError | None,
        receipt: dict[str, Any] | None,
        auth: str | None,
    ) -> PlatformError | None:
        """End the claim and audit the call (`tool.called`), in one transaction."""
        secrets = [auth, auth.removeprefix("Bearer ")] if auth else []
        async with self.tools.sessions() as session, session.begin():
            answered = await self.tools.ledger.finish(session, claim, result, error, True, receipt)
            await record_tool_call(
                session,
                agent,
                step_tool,
                body,
                answered,
                params=upstreams.sanitise(body.params, secrets),
                idempotency_key=claim.key,
                side_effecting=True,
                upstream_error=error.code if error is not None else None,
                refusal=error.public_details() if error is not None else None,
                receipt=receipt if answered is None else None,
            )
        if self.tools.on_called is not None:
            self.tools.on_called(step_tool, "success" if answered is None else answered.code)
        return answered

    async def _audit_refusal(
        self, agent: Agent, step_tool: str, body: ToolCallIn, refused: PlatformError
    ) -> None:
        async with self.tools.sessions() as session, session.begin():
            await record_tool_call(session, agent, step_tool, body, refused)
