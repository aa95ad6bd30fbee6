"""What a sign-in needs besides the database: the failure throttle, the bounded password
checker and the trusted proxies the client address is read through; built once per app
from the settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends

from platform_api.auth.clients import TrustedProxies
from platform_api.auth.passwords import PasswordChecker
from platform_api.auth.throttle import Limits, LoginThrottle
from platform_api.settings import Settings
from platform_api.slots import Slot


@dataclass
class SignIn:
    """The sign-in's throttle, password threads and client address rule."""

    throttle: LoginThrottle
    passwords: PasswordChecker
    proxies: TrustedProxies

    @classmethod
    def from_settings(cls, settings: Settings) -> SignIn:
        limits = Limits(
            per_pair=settings.login_max_failures,
            per_user=settings.login_max_failures_per_user,
            per_client=settings.login_max_failures_per_client,
            window=settings.login_failure_window_seconds,
            backoff=settings.login_backoff_seconds,
        )
        return cls(
            LoginThrottle(limits),
            PasswordChecker(settings.password_hash_workers),
            TrustedProxies(settings.trusted_proxies),
        )

    def close(self) -> None:
        """Stop the password threads."""
        self.passwords.close()


LOGINS: Slot[SignIn] = Slot("logins")
Logins = Annotated[SignIn, Depends(LOGINS)]
"""The sign-in's failure throttle, password threads and trusted proxies."""
