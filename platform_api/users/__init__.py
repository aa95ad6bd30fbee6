"""Users and their org memberships: creation by admins, `GET /users/me`."""
