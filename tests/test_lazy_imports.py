"""What ``import agentloop`` loads, and that what it leaves for later still works.

The HTTP providers (httpx2), JSON Schema, cattrs, rich, YAML, the MCP SDK,
OpenTelemetry and Temporal load when first used (see
``benchmarks/import_time.py``). Each check runs in a fresh interpreter, so what
other tests imported does not count.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

HEAVY = {"httpx2", "jsonschema", "cattrs", "rich", "yaml", "mcp", "opentelemetry", "temporalio"}


def run_fresh(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter (from the repository); its output lines."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout.splitlines()


def loaded_after(statement: str) -> list[str]:
    """The HEAVY packages (and their modules) loaded after ``statement``."""
    return run_fresh(
        f"""
        import sys
        {statement}
        for name in sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}):
            print(name)
        """
    )


def test_import_agentloop_loads_none_of_the_heavy_packages() -> None:
    assert loaded_after("import agentloop") == []


def test_import_agentloop_leaves_its_optional_parts_for_later() -> None:
    # @tool (and its JSON Schema compiler), permissions, the HTTP providers and retries.
    lazy = [
        "agentloop._tool._function",
        "agentloop._tool._schema",
        "agentloop._tool._permissions",
        "agentloop.providers._anthropic",
        "agentloop.providers._http",
        "agentloop.providers._openai",
        "agentloop.providers._responses",
        "agentloop.providers._retry",
    ]
    assert run_fresh(
        f"""
        import sys, agentloop
        print([name for name in {lazy!r} if name in sys.modules])
        """
    ) == ["[]"]


def test_import_agentloop_providers_loads_no_http_client() -> None:
    assert loaded_after("import agentloop.providers") == []


def test_import_agentloop_mcp_leaves_the_sdk_for_the_first_connection() -> None:
    assert loaded_after("import agentloop.mcp") == []


def test_a_run_works_after_a_plain_import() -> None:
    """Tools (JSON Schema checks) and a typed output (cattrs) load what they need."""
    lines = run_fresh(
        """
        import sys
        import agentloop as al
        import trio
        from agentloop.providers import ScriptedProvider, call, reply
        from typing import TypedDict

        class Sum(TypedDict):
            total: int

        @al.tool
        async def add(a: int, b: int) -> str:
            "Add two numbers."
            return str(a + b)

        provider = ScriptedProvider(
            [reply(call("add", {"a": 1, "b": 2})), reply(call("final_result", {"total": 3}))]
        )
        agent = al.Agent(provider, tools=[add], output_type=Sum)
        print("output:", trio.run(agent.run_output, "1 + 2?"))
        print("tool result:", agent.messages[2].content[0].text)
        print("jsonschema loaded:", "jsonschema" in sys.modules)
        print("cattrs loaded:", "cattrs" in sys.modules)
        print("httpx2 loaded:", "httpx2" in sys.modules)
        """
    )
    assert lines == [
        "output: {'total': 3}",
        "tool result: 3",
        "jsonschema loaded: True",
        "cattrs loaded: True",
        "httpx2 loaded: False",
    ]


def test_the_lazy_names_resolve() -> None:
    lines = run_fresh(
        """
        import sys
        import agentloop
        import agentloop.providers as providers
        import agentloop.mcp as mcp
        from agentloop.providers import AnthropicProvider, OpenAIProvider, OpenAIResponsesProvider
        print(AnthropicProvider.__module__, OpenAIProvider.__module__)
        print(OpenAIResponsesProvider.__module__, "agentloop.providers._responses" in sys.modules)
        print("httpx2" in sys.modules, "mcp" in sys.modules)
        print(providers.AnthropicProvider is AnthropicProvider)
        print(all(name in dir(providers) for name in providers.__all__))
        print(all(name in dir(mcp) for name in mcp.__all__))
        print(all(name in dir(agentloop) for name in agentloop.__all__))
        print(agentloop.tool.__module__, agentloop.Permissions.__module__)
        print(*(f"agentloop._tool.{m}" in sys.modules for m in ("_function", "_permissions")))
        print(providers.RetryConfig.__module__, providers.parse_retry_after("7"))
        print(mcp.McpToolAdapter.__module__, mcp.McpConnection.__module__)
        print("mcp" in sys.modules)
        print(issubclass(mcp.McpConnectionError, ConnectionError))
        for module in (agentloop, providers, mcp):
            try:
                module.NoSuchName
            except AttributeError as error:
                print(error)
        """
    )
    assert lines == [
        "agentloop.providers agentloop.providers",
        "agentloop.providers True",
        "True False",
        "True",
        "True",
        "True",
        "True",
        "agentloop agentloop",
        "True True",
        "agentloop.providers 7.0",
        "agentloop.mcp agentloop.mcp",
        "True",
        "True",
        "module 'agentloop' has no attribute 'NoSuchName'",
        "module 'agentloop.providers' has no attribute 'NoSuchName'",
        "module 'agentloop.mcp' has no attribute 'NoSuchName'",
    ]
