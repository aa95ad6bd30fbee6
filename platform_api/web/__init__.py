"""The expert workspace: the web UI of the review queue, served by the platform API.

The pages under `/workspace` are server-rendered shells (templates and static assets ship
in this package; nothing is loaded from a CDN and nothing is built at run time). One small
script fills them from the JSON API with the user's bearer token, which it keeps in
`sessionStorage`: no cookie carries credentials, so no request can be forged across sites,
and the strict Content-Security-Policy of every page allows only this package's own
script and style sheet.
"""
