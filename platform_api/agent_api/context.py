"""What an agent may read about its org through the platform (it has no database):
a conversation's messages and a ranked search of the org's knowledge documents.

The search is deliberately simple: the query and each document (title weighted double)
are split into lower-case words, and a document scores the sum over the query's distinct
words of log(1 + occurrences); ties go to the newer document. Good enough for a few
thousand documents per org; a real index can replace `rank` without changing the API.
"""

from __future__ import annotations

import math
import re
import uuid
from collections import Counter

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.agent_api.identity import Agent
from platform_api.errors import NotFound, ScopeMissing
from platform_api.models import Conversation, KnowledgeDocument, Message

WORD = re.compile(r"[a-z0-9]+")
MAX_DOCUMENTS_SCANNED = 5000
SNIPPET_CHARS = 300


class MessageOut(BaseModel):
    """One message of a conversation."""

    id: int
    role: str
    author: str
    content: str
    createdAt: str


class ConversationMessages(BaseModel):
    """A conversation's messages, oldest first."""

    conversationId: str
    subject: str
    messages: list[MessageOut]


class ContextHit(BaseModel):
    """One knowledge document matching the query."""

    documentId: str
    title: str
    score: float
    snippet: str = Field(description=f"the first {SNIPPET_CHARS} characters around the match")


class ContextResult(BaseModel):
    """The best-matching documents of the agent's org, best first."""

    query: str
    hits: list[ContextHit]


def _require(agent: Agent, scope: str) -> None:
    if scope not in agent.scopes:
        raise ScopeMissing(f"the token lacks the {scope} scope")


async def messages(
    session: AsyncSession, agent: Agent, conversation_id: uuid.UUID
) -> ConversationMessages:
    """The messages of one of the agent's org's conversations (404 for any other)."""
    _require(agent, "conversations:read")
    conversation = await session.get(Conversation, conversation_id)
    if conversation is None or str(conversation.org_id) != agent.org_id:
        raise NotFound("no such conversation")
    rows = await session.execute(
        select(Message)
        .where(Message.conversation_id == conversation_id)
        .order_by(Message.created_at, Message.id)
    )
    return ConversationMessages(
        conversationId=str(conversation.id),
        subject=conversation.subject,
        messages=[
            MessageOut(
                id=m.id,
                role=m.role,
                author=m.author,
                content=m.content,
                createdAt=m.created_at.isoformat(),
            )
            for m in rows.scalars()
        ],
    )


def _words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def rank(query: str, documents: list[tuple[str, str]]) -> list[tuple[int, float]]:
    """(index, score) of the documents (title, content) that match `query`, best first."""
    terms = set(_words(query))
    scored: list[tuple[int, float]] = []
    for index, (title, content) in enumerate(documents):
        counts = Counter(_words(content))
        counts.update({w: 2 * c for w, c in Counter(_words(title)).items()})
        score = sum(math.log1p(counts[t]) for t in terms if counts[t])
        if score > 0:
            scored.append((index, round(score, 4)))
    scored.sort(key=lambda item: (-item[1], item[0]))
    return scored


def _snippet(content: str, query: str) -> str:
    lowered = content.lower()
    positions = [lowered.find(w) for w in _words(query) if w in lowered]
    start = max(0, min(positions) - 40) if positions else 0
    return content[start : start + SNIPPET_CHARS]


async def search(session: AsyncSession, agent: Agent, query: str, limit: int) -> ContextResult:
    """The org's documents best matching `query`; never another org's."""
    _require(agent, "context:read")
    rows = await session.execute(
        select(KnowledgeDocument)
        .where(KnowledgeDocument.org_id == uuid.UUID(agent.org_id))
        .order_by(KnowledgeDocument.created_at.desc())
        .limit(MAX_DOCUMENTS_SCANNED)
    )
    documents = list(rows.scalars())
    ranked = rank(query, [(d.title, d.content) for d in documents])[:limit]
    hits: list[ContextHit] = []
    for index, score in ranked:
        doc = documents[index]
        hits.append(
            ContextHit(
                documentId=str(doc.id),
                title=doc.title,
                score=score,
                snippet=_snippet(doc.content, query),
            )
        )
    return ContextResult(query=query, hits=hits)
