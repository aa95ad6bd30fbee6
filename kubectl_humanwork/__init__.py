"""`kubectl-humanwork`: the review queue from the command line."""
