"""The tools the loop and MCP offer: the Tool seam, the ledger, events, and each tool."""
