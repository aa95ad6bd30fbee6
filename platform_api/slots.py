"""The seam between the app's composition root and what it builds: a `Slot` names one
shared object (the sessions, the Kubernetes client, the token service, ...). The app's
lifespan builds each object once, in dependency order, and `put`s it in its slot; a
route receives it through the slot as a FastAPI dependency
(`Annotated[TokenService, Depends(TOKENS)]`), a service through its constructor.

Each slot is declared next to what it holds (the sessions in `db`, the token service in
`auth.tokens`, ...), so a route names what it uses rather than reaching into one object
that holds everything. This module imports no slice.

(No `from __future__ import annotations` here: FastAPI reads `__call__`'s signature of a
slot instance, which has no module globals to resolve a string annotation against.)
"""

from typing import Generic, TypeVar

from fastapi import Request
from starlette.datastructures import State

T = TypeVar("T")


class Slot(Generic[T]):
    """One object the composition root builds once; a dependency that provides it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def put(self, state: State, value: T) -> None:
        """Publish `value` on the app's `state` (the composition root does, once)."""
        setattr(state, self.name, value)

    def of(self, state: State) -> T:
        """The object published on the app's `state`."""
        value: T = getattr(state, self.name)
        return value

    async def __call__(self, request: Request) -> T:
        """The dependency (a coroutine: FastAPI runs a plain function dependency in a
        worker thread, a hop on every request)."""
        return self.of(request.app.state)

    def __repr__(self) -> str:
        return f"Slot({self.name!r})"
