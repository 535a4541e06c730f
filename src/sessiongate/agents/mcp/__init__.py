"""MCP servers as a tool source: one long-lived session per server (stdio or streamable
HTTP), bounded connects, process-group kills, reconnects and the tool list. Imports
`agents/tools.py`, `core` and the `mcp` SDK (only here)."""
