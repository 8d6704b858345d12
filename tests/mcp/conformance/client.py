"""The client the official MCP conformance suite drives: ``python tests/conformance/client.py URL``.

``conformance client --command "python tests/conformance/client.py" --scenario NAME``
starts a test server for the scenario, runs this with the server's URL, and checks
what it did. The scenario is in ``MCP_CONFORMANCE_SCENARIO``; its credentials, if
any, are the JSON of ``MCP_CONFORMANCE_CONTEXT``.

It uses :mod:`agentloop.mcp` as a user would: ``open_mcp(HttpServer(url,
oauth=OAuth(...)))``, then a tool call by an ``Agent`` whose scripted model asks
for it. The one thing a user would not do is the ``authorize`` hook: instead of a
person in a browser, it fetches the authorization URL without following the
redirect and hands back the query of its ``Location``, as the suite's own
example client does. Tokens go to a temporary directory.

Exit status: 0 when the scenario's steps all worked, 1 otherwise (the message on
stderr). Some scenarios expect a failure (a server that never grants the scope).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx2
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import agentloop as al
from agentloop.mcp import (
    Elicitation,
    ElicitationAnswer,
    HttpServer,
    McpConfig,
    McpConnection,
    OAuth,
    open_mcp,
)
from agentloop.providers import ScriptedProvider, call, reply

#: The client ID metadata document URL the suite's CIMD scenario expects.
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


async def authorize_without_a_browser(url: str) -> dict[str, str]:
    """What a person would do: open ``url``, consent, and be sent back (the query)."""
    async with httpx2.AsyncClient(follow_redirects=False, timeout=10) as http:
        response = await http.get(url)
    location = response.headers.get("location")
    if location is None:
        raise RuntimeError(
            f"the authorization endpoint answered {response.status_code}, no redirect"
        )
    return dict(parse_qsl(urlsplit(location).query))


def oauth_for(scenario: str, context: dict[str, Any], store: str) -> OAuth | None:
    """The OAuth a user would configure for the scenario's server."""
    if not scenario.startswith("auth/"):
        return None
    common: dict[str, Any] = {"token_store": store, "authorize": authorize_without_a_browser}
    if scenario == "auth/client-credentials-basic":
        return OAuth(
            grant="client_credentials",
            client_id=context["client_id"],
            client_secret=context["client_secret"],
            token_store=store,
        )
    if scenario == "auth/client-credentials-jwt":
        return OAuth(
            grant="client_credentials",
            client_id=context["client_id"],
            private_key=context["private_key_pem"],
            signing_algorithm=context.get("signing_algorithm", "RS256"),
            token_store=store,
        )
    if "client_id" in context:  # pre-registered with the authorization server
        return OAuth(
            client_id=context["client_id"], client_secret=context.get("client_secret"), **common
        )
    return OAuth(client_metadata_url=CLIENT_METADATA_URL, **common)


def accept_with_defaults(request: Elicitation) -> ElicitationAnswer:
    """A user who submits the form as it is: the client fills in the defaults."""
    return ElicitationAnswer.accept({})


async def call_first_tool(connection: McpConnection, arguments: dict[str, Any]) -> str:
    """Have a (scripted) model call the server's first tool; the tool's result text."""
    tool = connection.tools[0]
    model = ScriptedProvider([reply(call(tool.name, arguments)), reply("Done.")])
    agent = al.Agent(model, tools=connection.tools)
    result: al.ToolExecutionEnd | None = None
    async with agent.prompt("Use the tool.") as events:
        async for event in events:
            if isinstance(event, al.ToolExecutionEnd):
                result = event
    if result is None:
        raise RuntimeError("the tool was not called")
    if result.is_error:
        raise RuntimeError(f"the tool call failed: {result.result.text_content}")
    return result.result.text_content


async def run(url: str, scenario: str, context: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory(prefix="agentloop-conformance-") as store:
        server = HttpServer(url, oauth=oauth_for(scenario, context, store))
        elicitation = (
            accept_with_defaults if scenario == "elicitation-sep1034-client-defaults" else None
        )
        async with open_mcp(server, McpConfig(elicitation=elicitation)) as connection:
            print(f"tools: {[tool.tool_name for tool in connection.tools]}")
            if scenario == "initialize" or not connection.tools:
                return
            arguments = {"a": 2, "b": 3} if scenario == "tools_call" else {}
            print(await call_first_tool(connection, arguments))


def main() -> int:
    url = sys.argv[1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    try:
        trio.run(run, url, scenario, context)
    except Exception as error:
        print(f"{scenario}: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
