"""`GET|PUT /access-map`: the access map (role -> capabilities) read and replaced through
the API (capability `access.manage`), validated, audited with before and after."""
