"""An org's own MCP servers as upstreams of the tool proxy: registered by the org's admin
(`router`, `service`), their tools discovered with `tools/list` into that org's catalog
view only (`catalog`), each tool's definition pinned by hash in the step that calls it
and re-checked against the server before the call runs (`proxy`, `definitions`)."""
