"""`/portal`: the client portal, the pages an org's clients use beside the expert workspace.

The same shells as the workspace (`pages.render`, its strict Content-Security-Policy and
its style sheet) with the portal's header and dialog (`pages.PORTAL`); `portal.js`
fills them from the JSON API with the bearer token of `POST /auth/token`: the client's
conversations, one conversation with its live stream, the plan of each task started from
it and the confirmation of its high-stakes steps. The pages hold no user data; what a
client may see is decided by the API alone (a conversation it may not see is a 404
there, which the page shows as "not found").
"""

from __future__ import annotations

import uuid

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from platform_api.web.pages import PORTAL, render

portal = APIRouter(prefix="/portal", include_in_schema=False)


@portal.get("")
@portal.get("/")
async def portal_home() -> RedirectResponse:
    return RedirectResponse("/portal/conversations", status_code=303)


@portal.get("/login")
async def portal_login() -> Response:
    return render(
        "login",
        "Sign in · humanwork",
        layout=PORTAL,
        action="Sign in",
        intro="Talk to your agent, follow its plans and confirm what you started.",
    )


@portal.get("/conversations")
async def portal_conversations() -> Response:
    return render("portal_list", "Your conversations · humanwork", layout=PORTAL)


@portal.get("/orgs/{org_id}/conversations/{conversation_id}")
async def portal_conversation(org_id: uuid.UUID, conversation_id: uuid.UUID) -> Response:
    return render(
        "portal_conversation",
        "Conversation · humanwork",
        layout=PORTAL,
        org=str(org_id),
        conversation=str(conversation_id),
    )
