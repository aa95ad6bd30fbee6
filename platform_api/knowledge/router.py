"""`/orgs/{org_id}/knowledge`: add (agents.manage), list (tasks.read) and remove
(agents.manage) the org's knowledge documents. Adding and removing are audited."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import func, select

from platform_api.auth.dependencies import require_in_org
from platform_api.bounds import DocumentLimit, Offset
from platform_api.db import Session
from platform_api.errors import NotFound, error_responses
from platform_api.floor.audit.service import record
from platform_api.floor.principal import OrgScope
from platform_api.models import KnowledgeDocument

router = APIRouter(prefix="/orgs/{org_id}/knowledge", tags=["knowledge"])


class DocumentIn(BaseModel):
    """A document to add."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "title": "Refund policy",
                    "content": "Refunds over 100 EUR need a second approver.",
                }
            ]
        },
    )

    title: str = Field(min_length=1, max_length=300)
    content: str = Field(min_length=1, max_length=100000)


class DocumentOut(BaseModel):
    """A stored document."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    title: str
    content: str
    created_at: datetime


class DocumentPage(BaseModel):
    """One page of the org's documents, newest first."""

    items: list[DocumentOut]
    total: int


@router.post(
    "",
    status_code=201,
    summary="Add a knowledge document",
    description="Capability `agents.manage`, in one of the caller's orgs (404 otherwise).",
    responses=error_responses(401, 403, 404, 422),
)
async def add_document(
    body: DocumentIn, session: Session, scope: Annotated[OrgScope, require_in_org("agents.manage")]
) -> DocumentOut:
    document = KnowledgeDocument(org_id=scope.org_id, title=body.title, content=body.content)
    session.add(document)
    await session.flush()
    await record(
        session,
        actor=scope.principal.username,
        action="knowledge.added",
        target=f"knowledge:{document.id}",
        org_id=scope.org_id,
        details={"title": body.title, "chars": len(body.content)},
    )
    return DocumentOut.model_validate(document)


@router.get(
    "",
    summary="List the org's knowledge documents",
    description="Capability `tasks.read`, in one of the caller's orgs (404 otherwise).",
    responses=error_responses(401, 403, 404, 422),
)
async def list_documents(
    session: Session,
    scope: Annotated[OrgScope, require_in_org("tasks.read")],
    limit: DocumentLimit = 50,
    offset: Offset = 0,
) -> DocumentPage:
    where = KnowledgeDocument.org_id == scope.org_id
    total = (await session.execute(select(func.count()).where(where))).scalar_one()
    rows = await session.execute(
        select(KnowledgeDocument)
        .where(where)
        .order_by(KnowledgeDocument.created_at.desc(), KnowledgeDocument.id)
        .limit(limit)
        .offset(offset)
    )
    return DocumentPage(
        items=[DocumentOut.model_validate(d) for d in rows.scalars()], total=int(total)
    )


@router.delete(
    "/{document_id}",
    status_code=204,
    summary="Remove a knowledge document",
    description="Capability `agents.manage`; another org's document answers 404.",
    responses=error_responses(401, 403, 404, 422),
)
async def remove_document(
    document_id: uuid.UUID,
    session: Session,
    scope: Annotated[OrgScope, require_in_org("agents.manage")],
) -> None:
    document = await session.get(KnowledgeDocument, document_id)
    if document is None or document.org_id != scope.org_id:
        raise NotFound("no such document")
    await session.delete(document)
    await record(
        session,
        actor=scope.principal.username,
        action="knowledge.removed",
        target=f"knowledge:{document_id}",
        org_id=scope.org_id,
        details={"title": document.title},
    )
