"""The platform as an MCP server for agents (`POST /v1/agent-api/mcp`): the tools an agent
may use, listed and called over MCP's streamable HTTP, through the same tool proxy as
`POST /v1/agent-api/tools/{tool}`."""
