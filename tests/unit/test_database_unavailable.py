"""A database that went away (restarting, failing over, refusing connections) is answered
503 `database_unavailable` with `Retry-After`, which the agent and the experts' clients
retry with the same key; a statement that failed on a live database stays a 500. The same
for a statement sent to the driver (asyncpg) directly, whose errors SQLAlchemy never wraps:
its lost connection is 503, text the database cannot store (a NUL) 422
`validation_failed`, any other refusal 500."""

from __future__ import annotations

import asyncio

import httpx
from asyncpg import exceptions as driver
from fastapi import FastAPI
from sqlalchemy.exc import DBAPIError, OperationalError

from platform_api.errors import install_error_handlers


class _Lost(Exception):
    sqlstate = "57P01"  # admin_shutdown: the server was stopped under the connection


class _Broken(Exception):
    sqlstate = "42P01"  # undefined_table: the statement's fault, not the server's


def _app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/refused")
    async def refused() -> None:
        raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)")

    @app.get("/shutdown")
    async def shutdown() -> None:
        raise OperationalError("SELECT 1", {}, _Lost("terminating connection"))

    @app.get("/invalidated")
    async def invalidated() -> None:
        raise DBAPIError("SELECT 1", {}, Exception("gone"), connection_invalidated=True)

    @app.get("/broken")
    async def broken() -> None:
        raise DBAPIError("SELECT * FROM nowhere", {}, _Broken("no such table"))

    @app.get("/driver/closed")
    async def driver_closed() -> None:
        raise driver.ConnectionDoesNotExistError("connection was closed in the middle of operation")

    @app.get("/driver/nul")
    async def driver_nul() -> None:
        raise driver.CharacterNotInRepertoireError('invalid byte sequence for encoding "UTF8"')

    @app.get("/driver/broken")
    async def driver_broken() -> None:
        raise driver.UndefinedTableError('relation "nowhere" does not exist')

    return app


async def _get(path: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=_app(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://platform") as client:
        return await client.get(path)


def test_a_database_that_went_away_is_answered_503_and_retried() -> None:
    for path in ("/refused", "/shutdown", "/invalidated", "/driver/closed"):
        answer = asyncio.run(_get(path))
        assert answer.status_code == 503, (path, answer.text)
        assert answer.json()["code"] == "database_unavailable"
        assert answer.headers["Retry-After"] == "1"
        assert "5432" not in answer.text and "SELECT" not in answer.text  # nothing leaks


def test_a_failed_statement_on_a_live_database_stays_an_internal_error() -> None:
    answer = asyncio.run(_get("/broken"))
    assert answer.status_code == 500
    assert answer.json()["code"] == "internal_error"


def test_text_the_driver_cannot_store_is_the_callers_error() -> None:
    answer = asyncio.run(_get("/driver/nul"))
    assert answer.status_code == 422, answer.text
    assert answer.json()["code"] == "validation_failed"
    assert "UTF8" not in answer.text  # the database's own words stay in the platform


def test_a_statement_the_live_database_refused_on_the_driver_stays_an_internal_error() -> None:
    answer = asyncio.run(_get("/driver/broken"))
    assert answer.status_code == 500
    assert answer.json()["code"] == "internal_error"
    assert "nowhere" not in answer.text
