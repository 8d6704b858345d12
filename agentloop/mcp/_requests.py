"""What an MCP server may ask of its client: elicitation, sampling, roots, and its logs.

The values here (:class:`Elicitation`, :class:`ElicitationAnswer`, :class:`McpRoot`,
:class:`McpLogMessage`, and :mod:`._sampling`'s) need no MCP SDK;
:class:`ServerRequests` turns them into the SDK's callbacks for one connection.

A capability is declared to the server only when the application gives what serves
it: an ``elicitation`` handler, a ``sampling`` provider, ``roots``. Without one, the
server learns in the handshake that the client cannot do it (and a server that asks
anyway gets an error).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._types import AssistantMessage, TextContent, Usage
from .._util import call_hook
from ._request_values import (
    LOG_LEVELS,
    Elicitation,
    ElicitationAnswer,
    McpLogMessage,
    form_problems,
    schema_defaults,
)
from ._sampling import (
    SAMPLING_PERMISSION,
    CallInFlight,
    SamplingRequest,
    SamplingSubject,
    message_text,
    sampling_request,
)

if TYPE_CHECKING:
    import mcp_types

    from .._secrets import Redactor
    from ._config import McpConfig
    from ._sampling import McpSampling

__all__ = ["ServerRequests"]

log = logging.getLogger("agentloop.mcp")
server_log = logging.getLogger("agentloop.mcp.server")

#: How many times a handler may answer with content that does not fit the schema.
ELICITATION_ATTEMPTS = 3

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


# --------------------------------------------------------------------------- the callbacks


class ServerRequests:
    """One connection's answers to what its server asks, as the SDK's callbacks.

    ``calls`` are the connection's tool calls in flight, oldest first: sampling
    usage and server logs go to the first.
    """

    def __init__(self, name: str, redactor: Redactor, options: Callable[[], McpConfig]) -> None:
        self.name = name
        self.redactor = redactor
        #: The connection's options as they are now (its ``config``).
        self.options = options
        self.calls: list[CallInFlight] = []
        #: Tokens servers' sampling requests have cost on this connection.
        self.sampling_usage = Usage()
        self._sampling = trio.Lock()  # one request at a time: each sees what the last cost
        #: The run's limit that ended the last call it ended; the sampling requests that
        #: come while no call is in flight are refused with it until the next call starts.
        self.limit_reached: str | None = None

    def client_options(self) -> dict[str, Any]:
        """The keyword arguments of ``mcp.Client`` for what is configured."""
        config = self.options()
        options: dict[str, Any] = {"logging_callback": self.on_server_log}
        if config.elicitation is not None:
            options["elicitation_callback"] = self.elicit
        if config.sampling is not None:
            options["sampling_callback"] = self.sample
        if config.roots is not None:
            options["list_roots_callback"] = self.list_roots
        return options

    # -------------------------------------------------------------- elicitation

    async def elicit(self, context: Any, params: Any) -> Any:
        import mcp_types

        handler = self.options().elicitation
        assert handler is not None
        if params.mode == "url":
            request = Elicitation(
                server=self.name,
                message=params.message,
                mode="url",
                url=params.url,
                elicitation_id=params.elicitation_id,
            )
            schema: dict[str, Any] | None = None
        else:
            schema = params.requested_schema
            if not isinstance(schema, dict):
                schema = dict(schema) if isinstance(schema, Mapping) else None
            request = Elicitation(
                server=self.name,
                message=params.message,
                schema=schema,
                defaults=schema_defaults(schema),
            )
        for _attempt in range(ELICITATION_ATTEMPTS):
            try:
                answer = await call_hook(handler, request)
            except Exception as error:
                log.exception("MCP server %r: the elicitation handler failed", self.name)
                return mcp_types.ErrorData(
                    code=mcp_types.INTERNAL_ERROR,
                    message=f"The client could not ask the user: {type(error).__name__}",
                )
            if not isinstance(answer, ElicitationAnswer):
                raise TypeError(
                    f"the elicitation handler must return an ElicitationAnswer, got {answer!r}"
                )
            if answer.action != "accept":
                return mcp_types.ElicitResult(action=answer.action)
            if request.mode == "url":
                return mcp_types.ElicitResult(action="accept")
            content = {**request.defaults, **(answer.content or {})}
            problems = form_problems(schema, content)
            if not problems:
                return mcp_types.ElicitResult(action="accept", content=content)
            request = attrs.evolve(request, problems=tuple(problems))
        log.warning(
            "MCP server %r: the answers to its question did not fit its form %d times; "
            "sent 'cancel' (%s)",
            self.name,
            ELICITATION_ATTEMPTS,
            "; ".join(request.problems),
        )
        return mcp_types.ElicitResult(action="cancel")

    async def complete_url_elicitations(self, data: Any) -> bool:
        """A call was refused until the user visits pages (error -32042): ask about each.

        True when there is a handler and it accepted every one (the call is then
        made again, once); False otherwise, and the call fails with the server's error.
        """
        import mcp_types
        from pydantic import ValidationError

        items = data.get("elicitations") if isinstance(data, Mapping) else None
        if self.options().elicitation is None or not isinstance(items, list) or not items:
            return False
        for item in items:
            try:
                params = mcp_types.ElicitRequestURLParams.model_validate(item)
            except ValidationError:
                return False
            result = await self.elicit(None, params)
            if not isinstance(result, mcp_types.ElicitResult) or result.action != "accept":
                return False
        return True

    # -------------------------------------------------------------- sampling

    async def sample(self, context: Any, params: Any) -> Any:
        import mcp_types

        sampling = self.options().sampling
        assert sampling is not None
        request = sampling_request(self.name, params, sampling)
        if isinstance(request, str):
            return mcp_types.ErrorData(code=mcp_types.INVALID_PARAMS, message=request)
        call = self.calls[0] if self.calls else None  # the call it came during
        async with self._sampling:
            return await self._sample(context, request, sampling, call)

    async def _sample(
        self,
        context: Any,
        request: SamplingRequest,
        sampling: McpSampling,
        call: CallInFlight | None,
    ) -> Any:
        import mcp_types

        # Without a call: one that came after its call was ended, if one was.
        limit = self.limit_reached if call is None else call.limit or call.context.count_request()
        if limit is not None:
            if call is not None and call.limit is None:
                self.limit_reached = call.limit = limit
                call.end(
                    f"MCP server '{self.name}' asked for a model reply after the run reached "
                    f"its limit ({limit}); the call was ended"
                )
            return mcp_types.ErrorData(
                code=mcp_types.INVALID_REQUEST,
                message=f"The client's run reached its limit: {limit}",
            )
        if sampling.permissions is not None:
            refusal = await sampling.permissions.check(
                SamplingSubject(self.name),
                SAMPLING_PERMISSION,
                str(context.request_id),
                {
                    "server": self.name,
                    "messages": [message_text(m) for m in request.messages],
                    "system_prompt": request.system_prompt,
                    "max_tokens": request.max_tokens,
                },
            )
            if refusal is not None:
                return mcp_types.ErrorData(
                    code=mcp_types.INVALID_REQUEST,
                    message=f"The user did not allow this sampling request: {refusal}",
                )
        provider = sampling.provider
        if not hasattr(provider, "stream"):
            provider = provider(request)
        return await self._answer(request, provider, call)

    async def _answer(
        self, request: SamplingRequest, provider: Any, call: CallInFlight | None
    ) -> Any:
        import mcp_types

        from ..providers import ModelRequest, ProviderError

        async def ignore(delta: Any) -> None:
            await trio.lowlevel.checkpoint()

        model_request = ModelRequest(
            system_prompt=request.system_prompt or "",
            messages=request.messages,
            max_tokens=request.max_tokens,
            temperature=request.temperature,
        )
        try:
            reply: AssistantMessage = await provider.stream(model_request, ignore)
        except ProviderError as error:
            return mcp_types.ErrorData(
                code=mcp_types.INTERNAL_ERROR,
                message=self.redactor.text(f"The client's model failed: {error}"),
            )
        self.sampling_usage += reply.usage
        if call is not None:
            call.context.count_usage(reply.usage, reply.model)
        text = "".join(b.text for b in reply.content if isinstance(b, TextContent))
        if reply.error_message is not None and not text:
            return mcp_types.ErrorData(
                code=mcp_types.INTERNAL_ERROR,
                message=self.redactor.text(f"The client's model failed: {reply.error_message}"),
            )
        stop = {"stop": "endTurn", "length": "maxTokens"}.get(reply.stop_reason.value, "endTurn")
        return mcp_types.CreateMessageResult(
            role="assistant",
            content=mcp_types.TextContent(type="text", text=text),
            model=reply.model or "unknown",
            stop_reason=stop,
        )

    # -------------------------------------------------------------- roots

    async def list_roots(self, context: Any) -> Any:
        import mcp_types

        await trio.lowlevel.checkpoint()
        return mcp_types.ListRootsResult(
            roots=[
                mcp_types.Root.model_validate({"uri": root.uri, "name": root.name})
                for root in self.options().roots or ()
            ]
        )

    # -------------------------------------------------------------- logs

    async def on_server_log(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        config = self.options()
        level_name = str(params.level)
        least = 0 if config.log_level is None else LOG_LEVELS.index(config.log_level)
        if level_name in LOG_LEVELS and LOG_LEVELS.index(level_name) < least:
            await trio.lowlevel.checkpoint()
            return  # a server that ignores the level asked for
        message = McpLogMessage(
            server=self.name,
            level=str(params.level),
            data=self.redactor.json(params.data) if self.redactor else params.data,
            logger=params.logger,
        )
        level = _LEVELS.get(message.level, logging.INFO)
        if server_log.isEnabledFor(level):
            where = f"{self.name}/{message.logger}" if message.logger else self.name
            server_log.log(level, "MCP server %r: %s", where, message.text)
        if self.calls:
            await self.calls[0].context.progress(f"[{message.level}] {message.text}")
        if config.on_log is not None:
            try:
                await call_hook(config.on_log, message)
            except Exception:
                log.exception("MCP server %r: on_log failed", self.name)
        else:
            await trio.lowlevel.checkpoint()
