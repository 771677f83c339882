"""Doors for agents written elsewhere: a LangGraph store (``memorybus[langgraph]``) and
an MCP server (``memorybus[mcp]``). Each module imports its framework; the core
package never imports them."""
