"""Client organisations: creation (with the namespace seam) and listing."""
