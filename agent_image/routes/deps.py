"""What every route depends on: the agent's runtime (held once, on the app's state) and a
command's verified body."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from agent_image.runtime import Runtime


def get_runtime(request: Request) -> Runtime:
    """The `Runtime` of the app serving this request."""
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
"""The agent's runtime (FastAPI dependency)."""


async def _verified_body(request: Request) -> bytes:
    """The raw body of a command, once its HMAC signature is verified."""
    return await get_runtime(request).verifier.body(request)


Signed = Annotated[bytes, Depends(_verified_body)]
"""A command's verified raw body (FastAPI dependency)."""
