"""The access map: which capabilities each role holds (stored, seeded with defaults)."""
