"""The access map, one slice: `GET|PUT /access-map` (platform administrators), read and
replaced through the API, validated, audited with before and after; its storage
(`repository`, role -> capabilities).

What every request needs to check access sits on the shared floor instead
(`platform_api.floor`: `principal`, `capabilities`, `confirmers`): `auth`, below every
router of this slice and of all the others, builds the principal from them, so they
cannot live here without a cycle. The map's storage can, and does: only this slice, the
users and orgs slices and the app read it, and none of them is below this slice.
"""
