"""`POST /v1/corrections`: expert corrections into the local few-shot store (UC-21)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from agent_image.commands import CorrectionIn, CorrectionsRequest, parse
from agent_image.corrections import Correction
from agent_image.routes.deps import RuntimeDep, Signed

router = APIRouter(prefix="/v1", tags=["corrections"])


@router.post("/corrections", status_code=202)
async def corrections(raw: Signed, rt: RuntimeDep) -> dict[str, Any]:
    """Expert corrections (UC-21) into the local few-shot store."""
    body = parse(CorrectionsRequest, raw)
    items = [from_command(c) for c in body.corrections]
    total = rt.corrections.add(items)
    return {"stored": len(items), "total": total, "ids": [c.id for c in items]}


def from_command(c: CorrectionIn) -> Correction:
    """A correction of a command's body as the store keeps it."""
    return Correction(
        message=c.message,
        corrected=c.corrected,
        draft=c.draft,
        note=c.note,
        conversation_id=c.conversation_id,
        by=c.by,
        kind=c.kind,
        **({"id": c.id} if c.id else {}),
        **({"at": c.at} if c.at else {}),
    )
