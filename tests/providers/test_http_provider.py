"""The shared HTTP streaming core: errors, retries and their timing, restarts, secrets."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import httpx2
import pytest
import trio

import agentloop as al
from agentloop.providers import (
    AuthenticationError,
    BadRequestError,
    ContextOverflowError,
    ModelConfig,
    ModelRequest,
    NetworkError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    RetryConfig,
    ServerError,
)
from agentloop.providers._http import HTTPProvider
from agentloop.providers.sse import ServerSentEvent

KEY = "sk-test-SECRET-123"


@attrs.define
class EchoParser:
    """Events ``data: text:<t>`` stream text; ``data: end`` ends the message."""

    text: str = ""
    done: bool = False

    def feed(self, event: ServerSentEvent) -> Sequence[al.StreamDelta]:
        if event.data == "end":
            self.done = True
            return []
        if event.data.startswith("error:"):
            raise OverloadedError(event.data)
        if event.data == "ping":  # a keep-alive event: no content
            return []
        piece = event.data.removeprefix("text:")
        self.text += piece
        return [al.TextDelta(delta=piece)]

    def finish(self) -> al.AssistantMessage:
        if not self.done:
            raise NetworkError("stream ended early")
        return al.AssistantMessage((al.TextContent(self.text),), al.StopReason.STOP)


class EchoProvider(HTTPProvider):
    api_name = "Echo"

    def url(self) -> str:
        return f"{self.model.base_url}/echo"

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"}

    def body(self, request: ModelRequest) -> dict[str, Any]:
        return {"messages": len(request.messages)}

    def parser(self) -> EchoParser:
        return EchoParser()


def sse(*data: str, end: bool = True) -> bytes:
    events = [f"data: {d}\n\n" for d in data] + (["data: end\n\n"] if end else [])
    return "".join(events).encode()


def stream_response(body: bytes, *, status: int = 200, **headers: str) -> httpx2.Response:
    return httpx2.Response(
        status, headers={"content-type": "text/event-stream", **headers}, content=body
    )


def json_error(status: int, kind: str, message: str, **headers: str) -> httpx2.Response:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return httpx2.Response(status, json=body, headers=headers)


Handler = Callable[[httpx2.Request], Any]


def provider(
    responses: list[Any], retry: RetryConfig | None = None, **options: Any
) -> tuple[EchoProvider, list[httpx2.Request]]:
    """A provider whose server answers with ``responses`` in turn (an exception is raised)."""
    seen: list[httpx2.Request] = []

    async def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        answer = responses[len(seen) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    model = ModelConfig.openai_compatible("echo-1", "http://echo.test", api_key=KEY)
    return (
        EchoProvider(model, retry=retry or RetryConfig(jitter=0), client=client, **options),
        seen,
    )


REQUEST = ModelRequest(system_prompt="", messages=(al.UserMessage.text("hi"),))


async def collect(p: EchoProvider) -> tuple[list[Any], al.AssistantMessage, float]:
    deltas: list[Any] = []

    async def emit(delta: Any) -> None:
        deltas.append(delta)

    start = trio.current_time()
    message = await p.stream(REQUEST, emit)
    return deltas, message, trio.current_time() - start


async def test_success_streams_deltas_and_sends_the_request() -> None:
    """A 200 event stream gives its deltas in order and the final message."""
    p, seen = provider([stream_response(sse("text:Hel", "text:lo"))])
    deltas, message, _ = await collect(p)
    assert deltas == [al.TextDelta(delta="Hel"), al.TextDelta(delta="lo")]
    assert message.text == "Hello"
    assert str(seen[0].url) == "http://echo.test/echo"
    assert seen[0].headers["authorization"] == f"Bearer {KEY}"
    assert json.loads(seen[0].content) == {"messages": 1}


async def test_rate_limit_waits_retry_after_then_restarts(autojump_clock: Any) -> None:
    """A 429 with retry-after 7: one restart delta, a 7 s wait, then the stream."""
    p, seen = provider(
        [
            json_error(429, "rate_limit_error", "slow down", **{"retry-after": "7"}),
            stream_response(sse("text:ok")),
        ]
    )
    deltas, _message, elapsed = await collect(p)
    assert elapsed == 7.0
    assert deltas == [
        al.StreamRestart(
            attempt=2, delay=7.0, error="Echo API error 429 (rate_limit_error): slow down"
        ),
        al.TextDelta(delta="ok"),
    ]
    assert len(seen) == 2


async def test_backoff_doubles_between_attempts(autojump_clock: Any) -> None:
    """Server errors back off 1 s, then 2 s (no jitter), then succeed."""
    p, _ = provider(
        [
            json_error(500, "api_error", "boom"),
            json_error(503, "api_error", "busy"),
            stream_response(sse("text:ok")),
        ]
    )
    deltas, _, elapsed = await collect(p)
    assert [(d.attempt, d.delay) for d in deltas if isinstance(d, al.StreamRestart)] == [
        (2, 1.0),
        (3, 2.0),
    ]
    assert elapsed == 3.0


async def test_retries_give_up_after_max_retries(autojump_clock: Any) -> None:
    """Four 529s with 3 retries: 1 + 2 + 4 s of waits, then the last error, saying so."""
    p, seen = provider([json_error(529, "overloaded_error", "Overloaded")] * 4)
    start = trio.current_time()
    with pytest.raises(OverloadedError) as caught:
        await collect(p)
    assert str(caught.value) == (
        "Echo API error 529 (overloaded_error): Overloaded (gave up after 3 retries)"
    )
    assert (len(seen), trio.current_time() - start) == (4, 7.0)


async def test_retry_after_is_clamped_to_max_delay(autojump_clock: Any) -> None:
    """An hour-long retry-after waits max_delay, not an hour."""
    p, _ = provider(
        [
            json_error(429, "rate_limit_error", "later", **{"retry-after": "3600"}),
            stream_response(sse("text:ok")),
        ],
        RetryConfig(jitter=0, max_delay=30),
    )
    _, _, elapsed = await collect(p)
    assert elapsed == 30.0


async def test_retry_after_ms_and_http_dates(autojump_clock: Any) -> None:
    """retry-after-ms is preferred; an HTTP date counts from now."""
    p, _ = provider(
        [
            json_error(
                429, "rate_limit_error", "a", **{"retry-after-ms": "1500", "retry-after": "9"}
            ),
            stream_response(sse("text:ok")),
        ]
    )
    assert (await collect(p))[2] == 1.5


@pytest.mark.parametrize(
    ("response", "error_type", "message"),
    [
        (
            json_error(400, "invalid_request_error", "messages: field required"),
            BadRequestError,
            "Echo API error 400 (invalid_request_error): messages: field required",
        ),
        (
            json_error(400, "invalid_request_error", "prompt is too long: 250000 tokens > 200000"),
            ContextOverflowError,
            "Echo API error 400 (invalid_request_error): "
            "prompt is too long: 250000 tokens > 200000",
        ),
        (
            json_error(401, "authentication_error", "invalid x-api-key"),
            AuthenticationError,
            "Echo API error 401 (authentication_error): invalid x-api-key",
        ),
        (
            json_error(403, "permission_error", "no access"),
            AuthenticationError,
            "Echo API error 403 (permission_error): no access",
        ),
        (
            json_error(404, "not_found_error", "model: nope"),
            BadRequestError,
            "Echo API error 404 (not_found_error): model: nope",
        ),
        (
            httpx2.Response(400, text="<html>Bad\n  Request</html>"),
            BadRequestError,
            "Echo API error 400: <html>Bad Request</html>",
        ),
    ],
)
async def test_client_errors_are_not_retried(
    response: httpx2.Response, error_type: type, message: str
) -> None:
    """4xx errors raise at once, as the matching class, with the API's message."""
    p, seen = provider([response, stream_response(sse("text:never"))])
    with pytest.raises(error_type) as caught:
        await collect(p)
    assert type(caught.value) is error_type
    assert str(caught.value) == message
    assert len(seen) == 1


async def test_should_retry_header_decides(autojump_clock: Any) -> None:
    """x-should-retry: false stops a 500 from being retried; true retries a 409. Classes stay."""
    p, seen = provider([json_error(500, "api_error", "x", **{"x-should-retry": "false"})])
    with pytest.raises(ServerError) as caught:
        await collect(p)
    assert caught.value.retryable is False
    assert len(seen) == 1
    p, seen = provider(
        [
            json_error(409, "conflict", "x", **{"x-should-retry": "true"}),
            stream_response(sse("text:ok")),
        ]
    )
    assert (await collect(p))[1].text == "ok"
    assert len(seen) == 2


async def test_secrets_are_redacted_from_errors() -> None:
    """An API that echoes the key back does not get it into the error message."""
    p, _ = provider([json_error(401, "authentication_error", f"bad key {KEY}")])
    with pytest.raises(AuthenticationError) as caught:
        await collect(p)
    assert KEY not in str(caught.value)
    assert str(caught.value) == "Echo API error 401 (authentication_error): bad key ***"


async def test_stream_cut_off_is_retried_and_restarts(autojump_clock: Any) -> None:
    """A stream that ends before its end marker is retried; the restart voids its deltas."""
    p, _seen = provider(
        [stream_response(sse("text:par", end=False)), stream_response(sse("text:full"))]
    )
    deltas, message, _ = await collect(p)
    assert deltas == [
        al.TextDelta(delta="par"),
        al.StreamRestart(attempt=2, delay=1.0, error="stream ended early"),
        al.TextDelta(delta="full"),
    ]
    assert message.text == "full"


async def test_error_event_mid_stream_is_retried(autojump_clock: Any) -> None:
    """A retryable error event after some deltas: restart, then the new stream."""
    p, _ = provider(
        [
            stream_response(sse("text:a", "error:overloaded", end=False)),
            stream_response(sse("text:b")),
        ]
    )
    deltas, message, _ = await collect(p)
    assert [type(d).__name__ for d in deltas] == ["TextDelta", "StreamRestart", "TextDelta"]
    assert message.text == "b"


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        (
            httpx2.ConnectError("connection refused"),
            "cannot connect to echo.test: connection refused",
        ),
        (httpx2.ConnectTimeout("timed out"), "cannot connect to echo.test: timed out"),
        (httpx2.ReadTimeout("timed out"), "Echo API timed out (ReadTimeout)"),
        (httpx2.RemoteProtocolError("peer closed"), "Echo API connection failed: peer closed"),
    ],
)
async def test_transport_failures_are_network_errors(
    autojump_clock: Any, failure: Exception, message: str
) -> None:
    """Connection failures and timeouts are NetworkErrors, retried, then reported."""
    p, seen = provider([failure] * 4)
    with pytest.raises(NetworkError) as caught:
        await collect(p)
    assert str(caught.value) == f"{message} (gave up after 3 retries)"
    assert len(seen) == 4


def dead_port() -> int:
    """A port on 127.0.0.1 that nothing listens on: bound, then closed."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_server_that_is_not_there_is_named_by_host_and_port_once() -> None:
    """A real refused connection: host and port (no path), why, and the retries in words."""
    port = dead_port()
    model = ModelConfig.openai_compatible("echo-1", f"http://127.0.0.1:{port}/v1", api_key=KEY)
    restarts: list[al.StreamRestart] = []

    async def emit(delta: Any) -> None:
        restarts.append(delta)

    async with EchoProvider(model, retry=RetryConfig(max_retries=1, initial_delay=0)) as p:
        with pytest.raises(NetworkError) as caught:
            await p.stream(REQUEST, emit)
    error = f"cannot connect to 127.0.0.1:{port}: connection refused"
    assert restarts == [al.StreamRestart(attempt=2, delay=0.0, error=error)]
    assert str(caught.value) == f"{error} (gave up after 1 retry)"


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://api.example.com/v1", "api.example.com"),
        ("http://user:pw@localhost:11434/v1", "localhost:11434"),
        ("http://[::1]:8080/v1", "[::1]:8080"),
    ],
)
async def test_a_refused_connection_names_the_host_only(
    autojump_clock: Any, url: str, host: str
) -> None:
    """Neither the path nor any user info of the URL is in the message."""
    p, _ = provider([httpx2.ConnectError("all attempts failed")] * 2, RetryConfig(max_retries=0))
    p.model = attrs.evolve(p.model, base_url=url)
    with pytest.raises(NetworkError) as caught:
        await collect(p)
    assert str(caught.value) == f"cannot connect to {host}: all attempts failed"


async def test_a_json_answer_instead_of_a_stream_is_an_error() -> None:
    """A 200 that is not an event stream is an error naming what came, not retried."""
    p, seen = provider([httpx2.Response(200, json={"error": {"message": "streaming disabled"}})])
    with pytest.raises(ProviderError) as caught:
        await collect(p)
    assert str(caught.value) == (
        "Echo API returned application/json instead of an event stream: streaming disabled"
    )
    assert len(seen) == 1


async def test_cancelling_during_backoff_returns_at_once(autojump_clock: Any) -> None:
    """Cancelled while waiting to retry, the call stops then, not after the wait."""
    p, seen = provider(
        [
            json_error(429, "rate_limit_error", "x", **{"retry-after": "20"}),
            stream_response(sse("text:ok")),
        ]
    )
    with trio.move_on_after(5):
        await collect(p)
    assert trio.current_time() == 5.0
    assert len(seen) == 1


async def test_jitter_stays_within_its_bounds() -> None:
    """With jitter 0.2 the wait is within 20% of the base delay, and never past max_delay."""
    import random

    config = RetryConfig(jitter=0.2, max_delay=30)
    rng = random.Random(7)
    delays = [config.delay(2, rng=rng) for _ in range(200)]
    assert all(1.6 <= d <= 2.4 for d in delays)
    assert len(set(delays)) > 100
    assert all(config.delay(9, rng=rng) <= 30 for _ in range(50))


def test_missing_api_key_is_refused_when_built(monkeypatch: Any) -> None:
    """A model that needs a key, with none given or in its variable: ValueError."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(
        ValueError,
        match=r"^no API key for openai model 'gpt-5\.4': "
        r"pass api_key=\.\.\. or set OPENAI_API_KEY$",
    ):
        EchoProvider(ModelConfig.openai("gpt-5.4"))


def test_key_from_the_environment(monkeypatch: Any) -> None:
    """The key may come from the model's environment variable."""
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert ModelConfig.openai("gpt-5.4").resolve_api_key() == "from-env"


def test_secrets_never_show_in_reprs() -> None:
    """Neither the model config nor the provider shows the key or header values."""
    model = ModelConfig.openai("gpt-5.4", api_key=KEY, headers={"x-extra": "hidden-value"})
    p = EchoProvider(model)
    for text in (repr(model), repr(p), str(model)):
        assert KEY not in text
        assert "hidden-value" not in text
    assert "Secret('***')" in repr(model)
    assert "'x-extra': '***'" in repr(model)


async def test_provider_closes_its_own_client() -> None:
    """aclose() closes a client the provider made; async with does it too."""
    model = ModelConfig.openai_compatible("m", "http://local.test")
    async with EchoProvider(model) as p:
        client = p._http()
    assert client.is_closed


@pytest.mark.parametrize(
    ("status", "kind", "error_type", "retryable"),
    [
        (429, "rate_limit_error", RateLimitError, True),
        (529, "overloaded_error", OverloadedError, True),
        (503, "overloaded_error", OverloadedError, True),
        (408, "timeout", ServerError, True),
        (500, "api_error", ServerError, True),
        (502, "api_error", ServerError, True),
        (504, "api_error", ServerError, True),
        (505, "api_error", ProviderError, False),
        (422, "invalid_request_error", BadRequestError, False),
        (413, "request_too_large", BadRequestError, False),
    ],
)
def test_status_classification(
    status: int, kind: str, error_type: type[ProviderError], retryable: bool
) -> None:
    """Each status maps to its error class, and only the transient ones are retryable."""
    from agentloop.providers._errors import classify_http_error

    body = json.dumps({"error": {"type": kind, "message": "m"}})
    error = classify_http_error("X", status, body, retry_after=2.0)
    assert type(error) is error_type
    assert (error.retryable, error.status, error.retry_after) == (retryable, status, 2.0)


async def test_the_body_is_read_to_its_end_over_a_real_socket() -> None:
    """After the end marker the rest of the body is drained (no unfinished HTTP iterator)."""
    from sse_server import Reply, serve

    async with serve(
        Reply([b"data: text:hi\n\n", b"data: end\n\n", b": trailing comment\n\n"])
    ) as server:
        model = ModelConfig.openai_compatible("m", server.url)
        async with EchoProvider(model, retry=RetryConfig.none()) as p:
            deltas, message, _ = await collect(p)
    assert (message.text, deltas) == ("hi", [al.TextDelta(delta="hi")])


async def test_insufficient_quota_is_not_retried() -> None:
    """A 429 that means 'out of credit' fails at once: waiting would not help."""
    p, seen = provider([json_error(429, "insufficient_quota", "You exceeded your quota")])
    with pytest.raises(ProviderError) as caught:
        await collect(p)
    assert type(caught.value) is ProviderError
    assert len(seen) == 1


async def test_long_header_values_are_redacted_from_errors() -> None:
    """A secret passed as an extra header is redacted too, should the API echo it."""
    seen: list[httpx2.Request] = []

    async def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return json_error(401, "authentication_error", "bad api-key azure-SECRET-999")

    model = ModelConfig.openai_compatible(
        "m", "http://echo.test", headers={"api-key": "azure-SECRET-999"}
    )
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    with pytest.raises(AuthenticationError) as caught:
        await collect(EchoProvider(model, client=client))
    assert str(caught.value) == "Echo API error 401 (authentication_error): bad api-key ***"
    assert len(seen) == 1


async def test_aclose_leaves_a_passed_client_in_place() -> None:
    """A client you pass is never closed or dropped by the provider."""
    p, seen = provider([stream_response(sse("text:one")), stream_response(sse("text:two"))])
    client = p._http()
    async with p:
        assert (await collect(p))[1].text == "one"
    assert p._http() is client
    assert not client.is_closed
    assert (await collect(p))[1].text == "two"
    assert len(seen) == 2


async def test_a_passed_client_keeps_its_own_timeouts() -> None:
    """Without timeout=..., requests use the passed client's timeouts, not the defaults."""
    seen: list[httpx2.Request] = []

    async def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return stream_response(sse("text:ok"))

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler), timeout=5.0)
    model = ModelConfig.openai_compatible("m", "http://echo.test")
    await collect(EchoProvider(model, client=client))
    await collect(EchoProvider(model, client=client, timeout=httpx2.Timeout(7.0)))
    assert [r.extensions["timeout"]["read"] for r in seen] == [5.0, 7.0]


# --------------------------------------------------------------------------- stalled streams


def timed_stream(*steps: tuple[float, bytes], forever: tuple[float, bytes] | None = None) -> Any:
    """A 200 event stream whose pieces arrive after the given delays (trio's clock)."""

    async def body() -> Any:
        for delay, piece in steps:
            await trio.sleep(delay)
            yield piece
        while forever is not None:
            await trio.sleep(forever[0])
            yield forever[1]

    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body())


PINGS = (10.0, b": keep-alive\n\ndata: ping\n\n")  # a comment and a ping event every 10 s


async def test_a_stream_of_pings_is_cut_by_the_idle_timeout(autojump_clock: Any) -> None:
    """Pings reset httpx's read timeout, not the idle timeout; each attempt is retried."""
    responses = [timed_stream((1.0, b"data: text:Hi\n\n"), forever=PINGS) for _ in range(3)]
    p, seen = provider(responses, RetryConfig(max_retries=2, jitter=0), idle_timeout=60)
    restarts: list[Any] = []

    async def emit(delta: Any) -> None:
        if isinstance(delta, al.StreamRestart):
            restarts.append(delta)

    start = trio.current_time()
    with pytest.raises(NetworkError) as caught, trio.fail_after(1000):  # before: forever
        await p.stream(REQUEST, emit)
    assert str(caught.value) == (
        "Echo API sent no content for 60s (idle_timeout; only keep-alive pings, or nothing) "
        "(gave up after 2 retries)"
    )
    assert len(seen) == 3
    assert [r.delay for r in restarts] == [1.0, 2.0]
    # Each attempt: 1 s to the text, then 60 s of pings; plus the two backoff waits.
    assert trio.current_time() - start == 3 * 61.0 + 1.0 + 2.0


async def test_a_silent_stream_is_cut_too(autojump_clock: Any) -> None:
    p, _ = provider([timed_stream(forever=(1e9, b""))], RetryConfig(max_retries=0), idle_timeout=30)
    with pytest.raises(NetworkError, match=r"^Echo API sent no content for 30s"):
        with trio.fail_after(1000):
            await collect(p)
    assert trio.current_time() == 30.0


async def test_slow_but_steady_content_is_cut_only_by_the_request_timeout(
    autojump_clock: Any,
) -> None:
    """A piece every 50 s stays within a 60 s idle limit; 120 s in all is the cap."""
    steady = timed_stream(forever=(50.0, b"data: text:x\n\n"))
    p, _ = provider([steady], RetryConfig(max_retries=0), idle_timeout=60, request_timeout=120)
    deltas: list[Any] = []

    async def emit(delta: Any) -> None:
        deltas.append(delta)

    with pytest.raises(NetworkError) as caught, trio.fail_after(1000):  # before: forever
        await p.stream(REQUEST, emit)
    assert str(caught.value) == "Echo API did not finish the response within 120s (request_timeout)"
    assert deltas == [al.TextDelta(delta="x"), al.TextDelta(delta="x")]
    assert trio.current_time() == 120.0


async def test_a_slow_consumer_does_not_count_as_idle(autojump_clock: Any) -> None:
    """Waiting for the consumer of the deltas is not the server being idle."""
    body = timed_stream((1.0, b"data: text:a\n\n"), (1.0, b"data: text:b\n\ndata: end\n\n"))
    p, _ = provider([body], RetryConfig(max_retries=0), idle_timeout=10, request_timeout=None)

    async def emit(delta: Any) -> None:
        await trio.sleep(100)  # a consumer far slower than the idle limit

    message = await p.stream(REQUEST, emit)
    assert message.text == "ab"
    assert trio.current_time() == 202.0


async def test_cancelling_a_pinging_stream_returns_at_once(autojump_clock: Any) -> None:
    p, _ = provider([timed_stream(forever=PINGS)], idle_timeout=1000)
    with trio.move_on_after(25):
        await collect(p)
    assert trio.current_time() == 25.0


@pytest.mark.parametrize("option", ["idle_timeout", "request_timeout"])
@pytest.mark.parametrize("value", [0, -1, True, "5"])
def test_timeouts_must_be_positive(option: str, value: Any) -> None:
    with pytest.raises(ValueError, match=f"^{option} must be") as caught:
        provider([], **{option: value})
    assert str(caught.value) == f"{option} must be > 0 or None, got {value!r}"
