"""Request and response bodies of `/auth`."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class TokenRequest(BaseModel):
    """Username and password of a local user."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"username": "alice", "password": "correct horse"}]}
    )

    username: str = Field(min_length=1, max_length=100)
    password: SecretStr = Field(min_length=1, max_length=1024)


class TokenResponse(BaseModel):
    """A bearer token for the `Authorization` header."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "access_token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9...",
                    "token_type": "bearer",
                    "expires_at": "2026-01-01T12:00:00Z",
                }
            ]
        }
    )

    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_at: datetime
