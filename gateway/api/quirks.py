"""Engine quirks: every way an engine departs from the OpenAI API that the gateway meets. Pure.

`QUIRKS` is the table: each row names the engines, what they do (measured against the real
llama-server in ``tests/llama`` where marked, else read in their documentation or issue
trackers), what the gateway does about it, and the function that does it. The functions
below are the recognisers and normalisers the rest of the gateway calls; a row whose
handling is part of a larger rule (the loop's memory of engines, the model names of
SPEC 2) names the function where that rule lives. ``tests/gateway/api/test_quirks.py``
holds one table test per row, with both sides: the quirk recognised, the standard form
left as it is.

Why in ``api/``: the callers span the layers, from the SSE decoder and the chunk parser
(``api/``, the lowest package) through the engine client, the relay and the stream writer
to the loop's rules, and a module may import only packages below its own (ARCHITECTURE.md);
so the table sits in the lowest package, and imports nothing of the gateway but the
common `gateway.errors`.

Not here: calls a model writes as text (SPEC 4a: `gateway.loop.tooltext`, a parser per
family), which are the model's habit rather than the engine's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from gateway.errors import EngineError, EngineStatusError, EngineStreamError


@dataclass(frozen=True, slots=True)
class Quirk:
    """One row of the table.

    Attributes:
        name: The row's short name (its table test is ``test_<name>_...``).
        engines: The engines that do it.
        seen: What they do, and where that was measured or read.
        gateway: What the gateway does about it.
        handled_by: The function (dotted path) the gateway calls for it.
    """

    name: str
    engines: str
    seen: str
    gateway: str
    handled_by: str


#: The SSE field llama-server used for errors inside a stream.
_ERROR_FIELD: Final = b"error:"
#: Error types and codes engines give a prompt longer than their context.
_OVERFLOW_KINDS: Final = frozenset({"exceed_context_size_error", "context_length_exceeded"})
_OVERFLOW_WORDS: Final = ("context length", "context size", "context window")
#: A ``"required"`` round's text is held until a call shows up; after this many visible
#: characters without one, the round is given up and the gateway searches itself (room
#: for the short plan the system line asks for).
PREAMBLE_LIMIT: Final = 600


def is_old_error_field(name: str) -> bool:
    """Whether an SSE field name is llama-server's old ``error`` field (row
    ``old_error_field``)."""
    return name == "error"


def has_old_errors(events: bytes) -> bool:
    """Whether whole events may hold llama-server's old ``error:`` field (cheap check)."""
    return _ERROR_FIELD in events


def repair_old_errors(events: bytes) -> bytes:
    """Whole events with each ``error: {...}`` field rewritten as a standard
    ``data: {"error": {...}}`` event (the OpenAI error object of `error_object`)."""
    out: list[bytes] = []
    for line in events.splitlines(keepends=True):
        if line.startswith(_ERROR_FIELD):
            raw = line[len(_ERROR_FIELD) :].strip()
            try:
                payload = json.loads(raw)
            except (ValueError, RecursionError):
                payload = {"message": raw.decode("utf-8", "replace")}
            body = json.dumps({"error": error_object(payload)[1]}, separators=(",", ":"))
            out.append(b"data: " + body.encode() + b"\n")
        else:
            out.append(line)
    return b"".join(out)


def error_object(payload: Any) -> tuple[str, dict[str, Any]]:
    """The message and OpenAI error object inside an engine's error payload, in every
    form: ``{"error": {...}}``, llama-server's bare ``{"code", "message", "type"}``, and
    ``{"error": "words"}`` (row ``bare_error``)."""
    inner = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(inner, str):
        inner = {"message": inner}
    if not isinstance(inner, dict):
        inner = payload if isinstance(payload, dict) else {"message": str(payload)}
    message = inner.get("message")
    message = message if isinstance(message, str) and message else "The model engine failed."
    error = {
        "message": message,
        "type": inner.get("type") if isinstance(inner.get("type"), str) else "server_error",
        "code": inner.get("code"),
    }
    return message, error


def event_payloads(data: str) -> list[Any]:
    """The JSON values of one event's data (``"[DONE]"`` for the end; lines that are not
    JSON are skipped): one, or one per ``data:`` line when the engine left out the blank
    line between events (row ``glued_events``)."""
    text = data.strip()
    if text == "[DONE]":
        return ["[DONE]"]
    try:
        return [json.loads(text)]
    except (ValueError, RecursionError):
        pass
    out: list[Any] = []
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if line == "[DONE]":
            out.append("[DONE]")
            continue
        try:
            out.append(json.loads(line))
        except (ValueError, RecursionError):
            continue
    return out


#: ``[DONE]`` as a line of its own: inside a chunk's JSON (a model writing the words) it
#: is part of a longer line, since JSON strings hold no raw line breaks.
_DONE_LINE: Final = re.compile(rb"^data: ?\[DONE\][ \t]*\r?$", re.MULTILINE)


def has_done(events: bytes) -> bool:
    """Whether whole events hold the ``[DONE]`` line that ends a stream (row ``no_done``)."""
    return b"[DONE]" in events and _DONE_LINE.search(events) is not None


def is_interim(status: int) -> bool:
    """Whether an answer's status is an interim 1xx one, whose final answer follows on
    the same connection (row ``interim_1xx``)."""
    return 100 <= status < 200


def is_context_overflow(error_type: str, code: object, message: str) -> bool:
    """Whether an engine's error says the prompt is longer than its context (row
    ``context_overflow``): by its type or code, or by its words in any case."""
    if error_type in _OVERFLOW_KINDS or (isinstance(code, str) and code in _OVERFLOW_KINDS):
        return True
    lowered = message.lower()
    return any(words in lowered for words in _OVERFLOW_WORDS)


def refuses_required(status: int, error_type: str, code: object, message: str) -> bool:
    """Whether an engine's error answer to a ``"required"`` round is a refusal of
    ``"required"`` (then round 1 is over and the gateway searches itself; row
    ``required_refused``).

    A 400 or 422, unless it says the prompt is longer than the context: that error
    would come back with ``"auto"`` too, and must reach the client at once.
    """
    if status not in (400, 422):
        return False
    return not is_context_overflow(error_type, code, message)


def preamble_spent(held_chars: int) -> bool:
    """Whether a ``"required"`` round has written past `PREAMBLE_LIMIT` visible characters
    without a call (row ``required_ignored``): it is given up."""
    return held_chars > PREAMBLE_LIMIT


def with_parallel_calls(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A tool round's fields with ``parallel_tool_calls: true`` unless the client set it
    (row ``parallel_off``)."""
    return {**fields, "parallel_tool_calls": fields.get("parallel_tool_calls", True)}


def is_blank_beside_calls(text: str) -> bool:
    """Whether content before any text of a round is only whitespace, which engines send
    next to their ``tool_calls`` (row ``blank_beside_calls``): it is held, and shown only
    if the round ends without a call."""
    return not text.strip()


def arguments_text(value: object) -> str:
    """A call fragment's ``arguments`` as JSON text: an object is encoded, text kept,
    anything else is none (row ``arguments_object``)."""
    if isinstance(value, dict):
        return json.dumps(value)
    return value if isinstance(value, str) else ""


def unwrap_arguments(decoded: Any) -> Any:
    """Decoded arguments, decoded once more when they were a JSON string holding JSON
    (row ``double_encoded``); anything else as it is."""
    if isinstance(decoded, str):
        try:
            return json.loads(decoded)
        except (ValueError, RecursionError):
            return decoded
    return decoded


def history_arguments(decoded: Any) -> str:
    """The arguments text a past call carries in the history: always an object, ``{}``
    when the model's were not one (row ``history_object``)."""
    return json.dumps(decoded) if isinstance(decoded, dict) else "{}"


def starts_call_without_index(call_id: str, name: str) -> bool:
    """Whether a fragment without ``index`` starts a new call (it has an id or a name)
    rather than continuing the last one (row ``missing_index``)."""
    return bool(call_id) or bool(name)


def joined_name(known: str, piece: str) -> str:
    """A call's name after one more fragment's ``name``: pieces are joined, the whole
    name sent again on every fragment is not (row ``repeated_name``)."""
    return known + piece if piece and piece != known else known


def new_call_under_index(known_id: str, call_id: str) -> bool:
    """Whether a fragment under an ``index`` already used starts another call: its id is
    another one than the call's known id (row ``reused_index``)."""
    return bool(call_id) and known_id not in ("", call_id)


def words_may_quote_request(error: EngineError) -> bool:
    """Whether an engine error's message is the engine's own words, which may quote the
    request: logged without them (SPEC 9; row ``echoed_input``)."""
    return isinstance(error, EngineStatusError | EngineStreamError)


QUIRKS: Final[tuple[Quirk, ...]] = (
    Quirk(
        "old_error_field",
        "llama-server before PR #16109 (2025-09)",
        "An error inside a started stream comes as a non-standard SSE field "
        "`error: {...}`; decoders that follow the SSE spec (openai-python's) drop the "
        "field silently, so the client sees a stream that just ends.",
        "The Web loop reads it as an error event (EngineStreamError); pass-through "
        'rewrites it as a standard `data: {"error": ...}` event.',
        "gateway.api.quirks.repair_old_errors",
    ),
    Quirk(
        "bare_error",
        "llama-server; others",
        "The old `error:` field holds a bare `{code, message, type}` object, not "
        '`{"error": {...}}`; an `error` that is only a string is tolerated too (no engine '
        "measured here sends one).",
        "Every form becomes the OpenAI error object, the engine's message kept.",
        "gateway.api.quirks.error_object",
    ),
    Quirk(
        "glued_events",
        "any (none measured)",
        "Several JSON chunks on consecutive `data:` lines without the blank line that "
        "ends each event: joined, they are not one JSON value.",
        "Each line is read as its own chunk.",
        "gateway.api.quirks.event_payloads",
    ),
    Quirk(
        "no_done",
        "any (none measured)",
        "A stream that ends without `data: [DONE]`.",
        "The Web loop ends the round at the end of the body; pass-through adds `[DONE]`.",
        "gateway.api.quirks.has_done",
    ),
    Quirk(
        "interim_1xx",
        "any server or proxy (RFC 9110 15.2)",
        "Interim answers (100 Continue, 103 Early Hints) before the final one, on the "
        "same connection.",
        "Skipped, their headers dropped: the final answer's head is the answer.",
        "gateway.api.quirks.is_interim",
    ),
    Quirk(
        "context_overflow",
        "llama-server (measured), OpenAI, vLLM (not measured)",
        "A prompt longer than the context is a 400: llama-server's type "
        "`exceed_context_size_error` ('request (2250 tokens) exceeds the available context "
        "size (2048 tokens)', tests/llama), OpenAI's code `context_length_exceeded`, "
        "vLLM's words 'maximum context length'.",
        'Never taken for a refusal of `"required"`: it reaches the client at once and '
        "nothing is learnt about the engine.",
        "gateway.api.quirks.is_context_overflow",
    ),
    Quirk(
        "required_refused",
        "vLLM before 0.8.3 (documentation; not measured); others",
        'An engine that does not take `tool_choice: "required"` answers 400 (or 422); '
        "llama-server without --jinja answers any `tools` with a 500 (measured), which is "
        "no refusal.",
        "Round 1 is over without a call: the gateway searches itself and asks round 2 "
        'with "auto"; the engine is remembered as refusing once that round is accepted.',
        "gateway.api.quirks.refuses_required",
    ),
    Quirk(
        "required_ignored",
        "llama-server (measured), Ollama (issues)",
        'llama-server accepts "required" without enforcing it: on a template without '
        "tools the model answers in prose; on one with tools free text may come first "
        "and a small model writes until its context is full (SmolLM2: 1,847 tokens, a "
        "minute, no call). Ollama accepts it and answers in text (ollama#8421).",
        'A "required" round\'s text is held; given up at the end or past PREAMBLE_LIMIT '
        "(600) characters without a call, the stream closed, the gateway searches itself.",
        "gateway.api.quirks.preamble_spent",
    ),
    Quirk(
        "required_memory",
        "llama-server, Ollama, vLLM",
        'Whether an engine honours "required" holds for the life of its process (vLLM '
        "honours it since 0.8.3; llama-server depends on the template).",
        "What a round showed is remembered per engine URL for the life of the gateway: "
        "an engine seen to ignore or refuse it has later answers start with the "
        'gateway\'s search and round 1 under "auto".',
        "gateway.loop.turn.RequiredMemory",
    ),
    Quirk(
        "parallel_off",
        "llama-server (measured)",
        "`parallel_tool_calls` defaults to false.",
        "Rounds that offer tools send `parallel_tool_calls: true` unless the client set "
        "it (SPEC 3.3 runs a round's calls at once).",
        "gateway.api.quirks.with_parallel_calls",
    ),
    Quirk(
        "blank_beside_calls",
        "llama-server (llama.cpp#13224)",
        '`content: "\\n\\n"` comes next to `tool_calls`.',
        "Whitespace before a round's first text is held, and shown only if the round "
        "ends without a call.",
        "gateway.api.quirks.is_blank_beside_calls",
    ),
    Quirk(
        "arguments_object",
        "any (not measured; Ollama's own /api/chat writes arguments as an object)",
        "A call's `function.arguments` is a JSON object, not JSON text.",
        "Encoded as JSON text, like any other call's arguments.",
        "gateway.api.quirks.arguments_text",
    ),
    Quirk(
        "double_encoded",
        "any (not measured; the engine notes record vLLM's hermes parser double-encoding "
        "string arguments until PR #54964)",
        "The arguments text is a JSON string holding the JSON object (double-encoded).",
        "Decoded once more when the first decoding gives a string.",
        "gateway.api.quirks.unwrap_arguments",
    ),
    Quirk(
        "history_object",
        "llama-server with Qwen3-Coder or GLM templates",
        "The chat template re-parses past calls' arguments from the history and answers "
        "500 to anything but an object, which would end the turn.",
        "A past call in the history always carries an object (`{}` when the model's "
        "arguments were not one), so the model may try again.",
        "gateway.api.quirks.history_arguments",
    ),
    Quirk(
        "missing_index",
        "any (none measured)",
        "Tool-call fragments without `index`.",
        "A fragment with an id or a name starts a new call; one without continues the last.",
        "gateway.api.quirks.starts_call_without_index",
    ),
    Quirk(
        "repeated_name",
        "any (none measured)",
        "The function name sent again on every fragment of a call.",
        "Name pieces are joined, a repeat of the whole name is not.",
        "gateway.api.quirks.joined_name",
    ),
    Quirk(
        "reused_index",
        "engines that number every call 0",
        "Several calls of one round under the same `index`, each with its own id: joined "
        "by index they became one call with a glued name and broken arguments.",
        "A fragment with another id under an index already used starts a new call.",
        "gateway.api.quirks.new_call_under_index",
    ),
    Quirk(
        "empty_call_id",
        "llama-server (llama.cpp#12279; ids without `call_` prefix measured)",
        "A tool call's `id` can be empty.",
        "The engine's id is kept; one is made only when it is empty.",
        "gateway.loop.calls.vet_call",
    ),
    Quirk(
        "path_model_names",
        "llama-server (measured)",
        "Started with `-m /x/y/Model.Q4.gguf` and no `--alias`, it lists its model as that path.",
        "The model is also served as `Model.Q4.gguf` and `Model.Q4` (SPEC 2), the engine "
        "sent the name it listed.",
        "gateway.engine.models.file_aliases",
    ),
    Quirk(
        "echoed_input",
        "vLLM (not measured)",
        "Its validation errors quote the request in their message.",
        "An engine's error status or stream error is logged with its engine, kind and "
        "status, never its words (SPEC 9).",
        "gateway.api.quirks.words_may_quote_request",
    ),
)
