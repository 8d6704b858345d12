"""An incremental Server-Sent Events decoder, for streaming model APIs.

:class:`SSEDecoder` turns the raw bytes of a ``text/event-stream`` response,
fed chunk by chunk as they arrive from the network, into
:class:`ServerSentEvent` values. It follows the WHATWG HTML "event stream
interpretation" rules:

- The stream is UTF-8, decoded incrementally: a character split across chunks
  decodes as one character, and invalid bytes become U+FFFD; decoding never
  raises. One U+FEFF byte order mark at the very start of the stream is
  dropped; anywhere else it is an ordinary character.
- Lines end with CRLF, LF or CR, and a CRLF split across two chunks is one line
  end. No other character ends a line (not U+2028, U+0085, form feed...).
- A blank line dispatches the event. A line that starts with ``:`` is a
  comment. Any other line is split at its first ``:`` into a field name and a
  value, and one leading space is dropped from the value; a line with no ``:``
  is a field name with an empty value. Field names are case-sensitive.
- ``event`` sets the event type. ``data`` appends its value and a ``"\\n"`` to
  the data buffer. ``id`` sets the last event ID, unless the value contains
  U+0000 NULL. ``retry`` sets the reconnection time (milliseconds) if its value
  is one or more ASCII digits, and is ignored otherwise. Other fields are
  ignored.
- To dispatch: if the data buffer is empty, reset the event type and dispatch
  nothing. Otherwise strip one trailing ``"\\n"`` from the data and emit an
  event whose type is the event type buffer, or ``"message"`` if that is
  empty; then reset the data and the type. The last event ID persists from
  event to event until an ``id`` field changes it (an empty ``id:`` resets it
  to ``""``), and :attr:`SSEDecoder.last_event_id` takes its value at each
  dispatch, as the spec's event source does.

One deliberate deviation: the spec discards an event that the stream ends
before its terminating blank line. Real servers do end streams that way (an
OpenAI-compatible ``data: [DONE]`` with no blank line after it), and dropping
that event would lose the end of a model's reply. So :meth:`SSEDecoder.close`
treats the end of the stream as a line end followed by a blank line: a partial
last line (one with no line ending) is processed as a line, then a pending
event that has data is dispatched.

>>> decoder = SSEDecoder()
>>> decoder.feed(b'event: delta\\ndata: {"text": "Hel')
[]
>>> decoder.feed(b'lo"}\\n\\ndata: [DONE]')
[ServerSentEvent(event='delta', data='{"text": "Hello"}', id='', retry=None)]
>>> decoder.close()
[ServerSentEvent(event='message', data='[DONE]', id='', retry=None)]
"""

from __future__ import annotations

import codecs

import attrs

__all__ = ["SSEDecoder", "ServerSentEvent"]


@attrs.frozen
class ServerSentEvent:
    """One dispatched event.

    ``id`` is the last event ID in effect when the event was dispatched (it
    persists across events). ``retry`` is the value of a valid ``retry`` field
    in this event's block, or None if the block had none.
    """

    event: str = "message"
    data: str = ""
    id: str = ""
    retry: int | None = None


_UTF8_DECODER = codecs.getincrementaldecoder("utf-8")


class SSEDecoder:
    """Decode one event stream, fed as byte chunks; see the module documentation.

    Call :meth:`feed` with each chunk as it arrives and :meth:`close` once at the
    end. An instance decodes exactly one stream; feeding it after :meth:`close`
    is a :class:`RuntimeError`.
    """

    __slots__ = (
        "_after_cr",
        "_block_retry",
        "_closed",
        "_data",
        "_decoder",
        "_event_type",
        "_id_buffer",
        "_last_event_id",
        "_partial",
        "_retry",
        "_started",
    )

    def __init__(self) -> None:
        self._decoder = _UTF8_DECODER(errors="replace")
        self._started = False  # seen the first character (the BOM's only place)
        self._after_cr = False  # the text so far ended with CR: skip one LF next
        self._partial: list[str] = []  # the current line so far, without its end
        self._closed = False
        self._data: list[str] = []  # the data buffer, one entry per data line
        self._event_type = ""
        self._id_buffer = ""
        self._block_retry: int | None = None
        self._last_event_id = ""
        self._retry: int | None = None

    @property
    def last_event_id(self) -> str:
        """The last event ID as of the last dispatch (``""`` until one is set)."""
        return self._last_event_id

    @property
    def retry(self) -> int | None:
        """The reconnection time in milliseconds: the last valid ``retry`` field, or None."""
        return self._retry

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode ``chunk`` and return the events it completes, in stream order."""
        if self._closed:
            raise RuntimeError("SSEDecoder.feed() called after close()")
        events: list[ServerSentEvent] = []
        self._feed_text(self._decoder.decode(chunk), events)
        return events

    def close(self) -> list[ServerSentEvent]:
        """End the stream and return its remaining events; later calls return ``[]``.

        A partial last line is processed as a line, and a pending event with data
        is dispatched even without its blank line (the module's one deviation
        from the spec).
        """
        if self._closed:
            return []
        self._closed = True
        events: list[ServerSentEvent] = []
        self._feed_text(self._decoder.decode(b"", final=True), events)
        lines = [""]  # the end of the stream ends the event, as a blank line would
        if self._partial:
            lines.insert(0, "".join(self._partial))
            self._partial.clear()
        self._process_lines(lines, events)
        return events

    def _feed_text(self, text: str, events: list[ServerSentEvent]) -> None:
        if not text:
            return
        if not self._started:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
                if not text:
                    return
        if self._after_cr:
            self._after_cr = False
            if text[0] == "\n":
                text = text[1:]
                if not text:
                    return
        if "\r" in text:
            self._after_cr = text[-1] == "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        elif "\n" not in text:
            self._partial.append(text)
            return
        lines = text.split("\n")
        rest = lines.pop()
        if self._partial:
            self._partial.append(lines[0])
            lines[0] = "".join(self._partial)
            self._partial.clear()
        if rest:
            self._partial.append(rest)
        self._process_lines(lines, events)

    def _process_lines(self, lines: list[str], events: list[ServerSentEvent]) -> None:
        # The hot loop: state lives in locals and is stored back at the end.
        data = self._data
        event_type = self._event_type
        id_buffer = self._id_buffer
        block_retry = self._block_retry
        for line in lines:
            if not line:  # a blank line: dispatch
                if data:
                    events.append(
                        ServerSentEvent(
                            event_type or "message",
                            data[0] if len(data) == 1 else "\n".join(data),
                            id_buffer,
                            block_retry,
                        )
                    )
                    data.clear()
                event_type = ""
                block_retry = None
                self._last_event_id = id_buffer
                continue
            field, _, value = line.partition(":")
            if not field:
                continue  # a comment: the line starts with a colon
            if value and value[0] == " ":
                value = value[1:]
            if field == "data":
                data.append(value)
            elif field == "event":
                event_type = value
            elif field == "id":
                if "\x00" not in value:
                    id_buffer = value
            elif field == "retry":
                retry = _parse_retry(value)
                if retry is not None:
                    self._retry = block_retry = retry
        self._event_type = event_type
        self._id_buffer = id_buffer
        self._block_retry = block_retry


def _parse_retry(value: str) -> int | None:
    """The reconnection time a ``retry`` value gives, or None if it is to be ignored."""
    if not (value.isascii() and value.isdigit()):
        return None
    try:
        return int(value.lstrip("0") or "0")
    except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits)
        return None
