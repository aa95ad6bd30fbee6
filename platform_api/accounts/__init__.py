"""The stored accounts: users and their org memberships, read by sign-in, the request's
principal, the users and the orgs slices alike."""
