"""Bodies of `/access-map`."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Role = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,49}$")]
Capability = Annotated[str, StringConstraints(min_length=1, max_length=100)]


class AccessMapWrite(BaseModel):
    """The whole access map: every role and the capabilities it holds. Roles left out are
    removed (refused while a user holds one)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "roles": {
                        "viewer": ["org.grantable", "tasks.read"],
                        "expert": ["run.control", "tasks.read"],
                        "admin": ["org.grantable", "run.control", "tasks.read", "users.manage"],
                    }
                }
            ]
        },
    )

    roles: dict[Role, list[Capability]] = Field(max_length=100)


class AccessMapRead(BaseModel):
    """The access map as stored, and every capability the platform checks."""

    roles: dict[str, list[str]]
    capabilities: list[str] = Field(description="every capability the platform knows")
