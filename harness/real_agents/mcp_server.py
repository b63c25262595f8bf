"""A minimal MCP server over stdio (newline-delimited JSON-RPC 2.0) with one tool, for the real-agent
suite's scenario f: the user adds it to the agent's configuration between two prompts, and the tool
(named after the marker given as the first argument, which its description holds too) must reach
the model on the next one: listed with the tools, or by name where the agent defers MCP tools.

    python mcp_server.py MARKER
"""
from __future__ import annotations

import json
import sys


def answer(message: dict, marker: str) -> dict | None:
    """The response to one JSON-RPC message (None for a notification)."""
    if "id" not in message:
        return None
    method = message.get("method")
    if method == "initialize":
        version = (message.get("params") or {}).get("protocolVersion") or "2024-11-05"
        result: dict = {"protocolVersion": version, "capabilities": {"tools": {}},
                        "serverInfo": {"name": "harness-codename", "version": "1.0.0"}}
    elif method == "tools/list":
        result = {"tools": [{"name": marker, "description": f"Looks up the project's codename ({marker}).",
                             "inputSchema": {"type": "object", "properties": {}}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": marker}], "isError": False}
    elif method in ("resources/list", "resources/templates/list", "prompts/list"):
        result = {method.split("/")[0] if method != "resources/templates/list" else "resourceTemplates": []}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": f"no method {method}"}}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def main(argv: list[str]) -> int:
    marker = argv[0] if argv else "codename"
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            message = json.loads(line)
        except ValueError:
            continue
        response = answer(message, marker) if isinstance(message, dict) else None
        if response is not None:
            sys.stdout.write(json.dumps(response) + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
