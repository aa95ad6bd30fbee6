"""Users and their org memberships over HTTP: creation by admins, members, deactivation,
platform administrators, `GET /users/me`.

The stored accounts (`UserRepository`) sit on the shared floor, `platform_api.floor.accounts`,
not here: sign-in and the request's principal (`auth`, below every router of this slice)
read them, as do the orgs, access map, notify and conversations slices.
"""
