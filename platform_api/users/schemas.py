"""Request and response bodies of `/users`."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from platform_api.orgs.schemas import OrgRead


class UserCreate(BaseModel):
    """A new user with a role (the access map's key) and org memberships."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "username": "alice",
                    "password": "correct horse battery staple",
                    "role": "expert",
                    "org_ids": ["6f1c2b9e-2d8a-4c55-9a57-0e4f3d2b1a90"],
                }
            ]
        },
    )

    username: str = Field(pattern=r"^[A-Za-z0-9._@-]{1,100}$")
    password: SecretStr | None = Field(
        None, min_length=12, max_length=1024, description="omit for OIDC-only users"
    )
    role: str = Field(min_length=1, max_length=50)
    org_ids: list[uuid.UUID] = Field(default_factory=list, max_length=100)
    oidc_issuer: str | None = Field(
        None,
        min_length=1,
        max_length=300,
        description="with `oidc_subject`: the OIDC identity this user signs in as (the "
        "configured issuer, `HUMANWORK_OIDC_ISSUER`)",
    )
    oidc_subject: str | None = Field(
        None,
        min_length=1,
        max_length=255,
        description="the `sub` claim of the user's OIDC tokens; an OIDC token is matched "
        "by issuer and `sub` only, never by email or preferred_username",
    )

    @model_validator(mode="after")
    def _oidc_pair(self) -> UserCreate:
        if (self.oidc_issuer is None) != (self.oidc_subject is None):
            raise ValueError("oidc_issuer and oidc_subject go together")
        return self


class OidcIdentity(BaseModel):
    """The OIDC identity (issuer and `sub`) a user signs in as."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"oidc_issuer": "https://idp.example.com", "oidc_subject": "00u1abcd"}]
        },
    )

    oidc_issuer: str = Field(min_length=1, max_length=300)
    oidc_subject: str = Field(min_length=1, max_length=255)


class RoleChange(BaseModel):
    """A member's new role in the org."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"role": "expert"}]})

    role: str = Field(min_length=1, max_length=50)


class Member(BaseModel):
    """A member of an org as its admins see it."""

    username: str
    role: str
    active: bool
    platformAdmin: bool


class PlatformAdminChange(BaseModel):
    """Whether the user is a platform administrator."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"platformAdmin": True}]}
    )

    platformAdmin: bool


class UserState(BaseModel):
    """A user's account state after a change."""

    username: str
    active: bool
    platformAdmin: bool
    deactivatedAt: datetime | None = None


class UserRead(BaseModel):
    """A user as the API shows it (never with a password or hash)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "0b8f6a51-7d3c-4f7e-9c1a-2d5e8f9a0b1c",
                    "username": "alice",
                    "role": "expert",
                    "org_ids": ["6f1c2b9e-2d8a-4c55-9a57-0e4f3d2b1a90"],
                    "created_at": "2026-01-01T12:00:00Z",
                }
            ]
        }
    )

    id: uuid.UUID
    username: str
    role: str
    org_ids: list[uuid.UUID]
    created_at: datetime
    oidc_issuer: str | None = None
    oidc_subject: str | None = None


class Me(BaseModel):
    """The caller: identity, capabilities from the access map, orgs."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "0b8f6a51-7d3c-4f7e-9c1a-2d5e8f9a0b1c",
                    "username": "alice",
                    "role": "expert",
                    "capabilities": ["run.control", "tasks.read"],
                    "orgs": [
                        {
                            "id": "6f1c2b9e-2d8a-4c55-9a57-0e4f3d2b1a90",
                            "slug": "acme",
                            "name": "Acme Retail Ltd",
                            "namespace": "org-acme",
                            "created_at": "2026-01-01T12:00:00Z",
                        }
                    ],
                }
            ]
        }
    )

    id: uuid.UUID
    username: str
    role: str = Field(description="the role the user was created with (a record)")
    capabilities: list[str] = Field(
        description="what the caller's roles hold in its orgs together, and `access.manage` "
        "for a platform administrator; each org's own in `roles`"
    )
    orgs: list[OrgRead]
    roles: dict[str, str] = Field(default_factory=dict, description="org id -> role there")
    platformAdmin: bool = False
