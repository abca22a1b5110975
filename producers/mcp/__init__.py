"""The MCP way in, for agents: ``server`` builds the tools and serves them on stdio (the tenant
chosen by who starts it), ``http`` serves the same tools over streamable HTTP (the tenant decided
by each request's API key)."""
