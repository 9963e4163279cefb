#!/usr/bin/env python3
"""Call an HCP host's capabilities as MCP tools with the official Python SDK.

Over Streamable HTTP (`/mcp` on `hcp serve`, the caller's bearer
credential) or over stdio (the host started as this script's subprocess,
`hcp mcp --as CALLER`, for a caller callers.json marks "mcp_stdio": true).
Each step prints one JSON object on a line: the tools listed, a tool's
result (isError, structuredContent, its text, _meta), a resource read.

    pip install mcp==2.3.0
    python3 examples/mcp_client.py --http http://127.0.0.1:8787/mcp --token TOKEN list
    python3 examples/mcp_client.py --stdio-as harness-local-01 call document-analysis \\
        '{"document_uri": "file:///documents/paper-123.md", "analysis_type": "key_findings_extraction"}' \\
        --meta '{"hcp/intent": "Extract the key findings", "hcp/constraints": {"data_classification": "T1"}}'

The stdio host gets this process's HCP_* variables (HCP_DATA_DIR, ...).
Exit status: 0 when every step succeeded (a call: not isError), 1 when a
call's result is an error, 2 on a usage or connection error.
"""

import argparse
import asyncio
import json
import os
import sys

import mcp
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def connect(args, changes):
    # --legacy: the initialize handshake of the revisions before
    # 2026-07-28; the server's unasked notifications come to `changes`.
    async def on_message(message):
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            await changes.put(message)

    options = {"raise_exceptions": True, "message_handler": on_message}
    if args.legacy:
        options["mode"] = "legacy"
    if args.http:
        headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
        http = create_mcp_http_client(headers=headers)
        return mcp.Client(streamable_http_client(args.http, http_client=http), **options)
    env = {k: v for k, v in os.environ.items() if k.startswith("HCP_")}
    params = mcp.StdioServerParameters(
        command=args.hcp, args=["mcp", "--as", args.stdio_as], env=env
    )
    return mcp.Client(params, **options)


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def run(args):
    failed = False
    changes = asyncio.Queue()
    async with connect(args, changes) as client:
        print(json.dumps({"protocol_version": client.protocol_version}), flush=True)
        if args.op == "list":
            tools = await client.list_tools()
            print(json.dumps({"tools": [dump(t) for t in tools.tools]}), flush=True)
        elif args.op == "call":
            arguments = json.loads(args.arguments) if args.arguments else {}
            meta = json.loads(args.meta) if args.meta else None
            progress = []

            async def on_progress(value, total, message):
                progress.append(message)

            result = await client.call_tool(
                args.target, arguments, progress_callback=on_progress, meta=meta
            )
            out = dump(result)
            out["text"] = [c.text for c in result.content if getattr(c, "type", "") == "text"]
            out["progress"] = progress
            print(json.dumps(out), flush=True)
            failed = bool(result.is_error)
            if not failed:
                for c in result.content:
                    if getattr(c, "type", "") == "resource_link" and args.read_links:
                        read = await client.read_resource(str(c.uri))
                        print(json.dumps({"read": dump(read)}), flush=True)
        elif args.op == "read":
            read = await client.read_resource(args.target)
            print(json.dumps({"read": dump(read)}), flush=True)
        elif args.op == "listen" and args.legacy:
            # Tool list changes as the earlier revisions send them: unasked,
            # on the session's stream.
            count = int(args.target or "1")
            print(json.dumps({"listening": True}), flush=True)
            while count > 0:
                event = await changes.get()
                tools = await client.list_tools()
                names = [t.name for t in tools.tools]
                print(json.dumps({"event": type(event).__name__, "tools": names}), flush=True)
                count -= 1
        elif args.op == "listen":
            # Tool list changes (2026-07-28 subscriptions/listen): each
            # event, then the caller's tools as listed again.
            count = int(args.target or "1")
            async with client.listen(tools_list_changed=True) as sub:
                print(json.dumps({"listening": True}), flush=True)
                async for event in sub:
                    tools = await client.list_tools()
                    names = [t.name for t in tools.tools]
                    print(json.dumps({"event": type(event).__name__, "tools": names}), flush=True)
                    count -= 1
                    if count == 0:
                        break
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--http", metavar="URL", help="the /mcp endpoint of hcp serve")
    where.add_argument("--stdio-as", metavar="CALLER", help="start `hcp mcp --as CALLER`")
    p.add_argument("--token", help="the caller's bearer credential (--http)")
    p.add_argument("--hcp", default="hcp", help="the hcp binary (--stdio-as)")
    p.add_argument("--meta", help="the call's _meta, JSON (hcp/intent, hcp/constraints, ...)")
    p.add_argument("--read-links", action="store_true", help="read the result's resource links")
    p.add_argument(
        "--legacy",
        action="store_true",
        help="negotiate a revision before 2026-07-28 (the initialize handshake)",
    )
    p.add_argument("op", choices=["list", "call", "read", "listen"])
    p.add_argument(
        "target", nargs="?", help="the tool (call), the resource URI (read), how many changes (listen)"
    )
    p.add_argument("arguments", nargs="?", help="the tool's arguments, JSON (call)")
    args = p.parse_args()
    if args.op in ("call", "read") and not args.target:
        p.error(f"{args.op} needs a target")
    try:
        sys.exit(asyncio.run(run(args)))
    except Exception as e:  # noqa: BLE001 - any failure is a usage or connection error here
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
