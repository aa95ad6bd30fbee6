"""Identity: password hashing, bearer tokens (built-in issuer and external OIDC), the
caller's principal and the capability checks every endpoint declares."""
