"""Integration credentials (Shopify, Amazon, ...): stored AES-256-GCM encrypted, never
returned by any endpoint, never logged."""
