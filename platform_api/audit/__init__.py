"""The audit log's slice: its two doors, over HTTP (`router`, `schemas`: `GET /audit`, the
caller's orgs' rows, filtered and paginated) and on the command line (`cli`, `__main__`:
`humanwork-platform audit-verify|audit-checkpoint`, `python -m platform_api.audit`).

The log itself (recording in the right chain, the chain's rules, reading, verifying, the
signed checkpoints and where they are kept) sits on the shared floor,
`platform_api.floor.audit`: the principal's checks (`auth`, below this slice's router and
every other) record their refusals there, and nearly every slice records its changes.
"""
