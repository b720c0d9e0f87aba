"""The research tools over MCP: Origin guard, sessions, the SDK server and its endpoint."""
