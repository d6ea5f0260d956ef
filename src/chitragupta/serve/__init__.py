"""The MCP server: ``server`` (the tools), ``stdio`` (the JSON-RPC front), ``citations`` (the citation
tools), ``models`` (the typed arguments the tools share)."""
