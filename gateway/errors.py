"""Errors of the gateway process, and their OpenAI error bodies.

Every error the gateway raises on purpose derives from one base class, so the HTTP layer
can turn any of them into the OpenAI error shape (``{"error": {"message", "type",
"code"}}``) with the right status, before streaming began, or as a final stream event
after (``/mcp`` answers the same errors as JSON-RPC error bodies, `GatewayError.rpc_body`)::

    GatewayError                      base: status, OpenAI type and code, a safe message
    ├── RequestError                  the client's request is wrong (400)
    │   ├── BodyTooLargeError         the body is over the configured limit (413)
    │   ├── BodyTimeoutError          the body did not arrive in time (408)
    │   ├── BadHostError              two Host headers, or one holding a comma (400)
    │   └── MediaTypeError            a POST that is not application/json (415)
    ├── AuthError                     the Bearer key is missing or wrong (401)
    ├── ForeignHostError              no keys, and the request names a host not loopback (403)
    ├── ForeignOriginError            an Origin neither the gateway's own nor allowed (403)
    ├── UnknownModelError             no configured engine serves the model (404)
    ├── RateLimitError                a key is over its own limits (429, Retry-After)
    ├── BusyError                     the gateway itself is saturated (503, Retry-After)
    │   └── ShuttingDownError         the gateway is draining for shutdown (503)
    ├── AnswerCutError                an answer passed what one answer may take
    │   ├── AnswerTooLongError        its time, [timeouts] answer (504)
    │   └── AnswerTooLargeError       its bytes, [limits] max_answer_bytes (502)
    └── EngineError                   the engine failed us (names the engine, never its key)
        ├── EngineUnreachableError    no connection, or it broke mid-answer (502)
        ├── EngineTimeoutError        the engine went quiet past the timeout (504)
        ├── EngineStatusError         the engine answered with an error status (its own;
        │                             pass-through relays its body as it came)
        └── EngineStreamError         the engine sent an error event inside its stream (502)

Messages never hold keys, user text or page text: they reach logs and clients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class GatewayError(Exception):
    """Raised when a request cannot be served; base of every gateway error."""

    status: int = 500
    error_type: str = "server_error"
    code: str | None = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def body(self) -> dict[str, Any]:
        """Return the OpenAI error body for this error."""
        return {"error": {"message": self.message, "type": self.error_type, "code": self.code}}

    def headers(self) -> dict[str, str]:
        """Extra response headers (``Retry-After``, ``WWW-Authenticate``)."""
        return {}

    def rpc_body(self) -> dict[str, Any]:
        """The JSON-RPC error body for this error, as ``/mcp`` answers before the MCP layer
        (no request id known; ``-32600``, invalid request, the code the MCP SDK uses for
        refusals at the HTTP level)."""
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": self.message}}


class RequestError(GatewayError):
    """Raised when the request body is malformed JSON or breaks the request schema."""

    status = 400
    error_type = "invalid_request_error"
    code = "invalid_request"


class BodyTooLargeError(RequestError):
    """Raised when the request body is longer than the configured limit."""

    status = 413
    code = "request_too_large"


class BodyTimeoutError(RequestError):
    """Raised when the request body does not arrive within the body timeout."""

    status = 408
    code = "request_timeout"


class BadHostError(RequestError):
    """Raised when a request has two ``Host`` headers, or one holding a comma."""

    code = "invalid_host"


class MediaTypeError(RequestError):
    """Raised when a ``POST`` does not carry ``Content-Type: application/json``."""

    status = 415
    code = "unsupported_media_type"


class AuthError(GatewayError):
    """Raised when the ``Authorization: Bearer`` key is missing or not a configured key."""

    status = 401
    error_type = "invalid_request_error"
    code = "invalid_api_key"

    def headers(self) -> dict[str, str]:
        """``WWW-Authenticate: Bearer``, as RFC 6750 asks."""
        return {"WWW-Authenticate": "Bearer"}


class ForeignHostError(GatewayError):
    """Raised when a gateway without keys gets an API request whose ``Host`` is a name
    other than a loopback one (a page's DNS rebinding)."""

    status = 403
    error_type = "invalid_request_error"
    code = "foreign_host"


class ForeignOriginError(GatewayError):
    """Raised when a request's ``Origin`` is neither the gateway's own nor one of
    ``allowed_origins`` (a page on another site, through the user's browser)."""

    status = 403
    error_type = "invalid_request_error"
    code = "foreign_origin"


class _RetryLater(GatewayError):
    """Errors that say when to try again."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = max(1, retry_after)

    def headers(self) -> dict[str, str]:
        """``Retry-After`` in whole seconds."""
        return {"Retry-After": str(self.retry_after)}


class RateLimitError(_RetryLater):
    """Raised when a key is over its concurrent-chat or requests-per-minute limit."""

    status = 429
    error_type = "rate_limit_error"
    code = "rate_limit_exceeded"


class BusyError(_RetryLater):
    """Raised when the gateway itself is saturated (its chat limit, no free engine
    connection): the engine is not to blame."""

    status = 503
    error_type = "server_error"
    code = "overloaded"


class ShuttingDownError(BusyError):
    """Raised when a request arrives, or an answer is still running past the grace
    period, while the gateway drains for shutdown."""

    code = "shutting_down"


class AnswerCutError(GatewayError):
    """Raised when an answer passes what one answer may take (an engine that never
    stops); the answer ends with this error."""

    status = 502
    code = "answer_cut"


class AnswerTooLongError(AnswerCutError):
    """Raised when an answer runs longer than ``[timeouts] answer``."""

    status = 504
    code = "answer_too_long"


class AnswerTooLargeError(AnswerCutError):
    """Raised when an answer relays more than ``[limits] max_answer_bytes``."""

    code = "answer_too_large"


class UnknownModelError(GatewayError):
    """Raised when no configured engine serves the requested model."""

    status = 404
    error_type = "invalid_request_error"
    code = "model_not_found"


class EngineError(GatewayError):
    """Raised when the model engine fails; base of the engine errors."""

    status = 502
    error_type = "server_error"
    #: Short label for the ``kind`` of the engine-errors metric.
    kind: str = "other"

    def __init__(self, message: str, *, engine: str) -> None:
        super().__init__(message)
        #: The engine's configured name or address (never its key), for logs; "" for an
        #: error that is no one engine's (the message then names the engines).
        self.engine = engine


class EngineUnreachableError(EngineError):
    """Raised when the engine cannot be connected to, or the connection breaks."""

    code = "engine_unreachable"
    kind = "connect"


class EngineTimeoutError(EngineError):
    """Raised when the engine does not answer, or stops sending, within the timeout."""

    status = 504
    code = "engine_timeout"
    kind = "timeout"


@dataclass(frozen=True, slots=True)
class EngineBody:
    """An engine's error answer as it came, for pass-through to relay unchanged.

    Attributes:
        data: The body's bytes.
        content_type: Its ``Content-Type`` header ("" when it sent none).
    """

    data: bytes
    content_type: str


class EngineStatusError(EngineError):
    """Raised when the engine answers a request with an error status.

    The engine's own status and error body are kept so a client sees the engine's words
    (a 400 for a too-long prompt stays a 400). In pass-through, ``relayed`` also holds the
    body as the engine sent it (extra fields, key order, content type), which the client
    then gets byte for byte (SPEC 2: the same errors).
    """

    code = "engine_error"

    def __init__(
        self,
        status: int,
        payload: dict[str, Any] | None,
        message: str,
        *,
        engine: str,
        retry_after: str | None = None,
        relayed: EngineBody | None = None,
    ) -> None:
        super().__init__(message, engine=engine)
        self.status = status
        self.payload = payload
        self.kind = "http_4xx" if status < 500 else "http_5xx"
        #: The engine's own ``Retry-After`` (a 429 or 503), passed on as it came.
        self.retry_after = retry_after
        #: The engine's body as it came (pass-through only), else None.
        self.relayed = relayed

    def headers(self) -> dict[str, str]:
        """The engine's ``Retry-After``, when it sent one."""
        return {"Retry-After": self.retry_after} if self.retry_after else {}

    def engine_kind(self) -> tuple[str, object]:
        """The engine's own error ``type`` ("" when none) and ``code``."""
        inner = self.payload.get("error") if self.payload is not None else None
        if not isinstance(inner, dict):
            return "", None
        kind = inner.get("type")
        return (kind if isinstance(kind, str) else ""), inner.get("code")

    def body(self) -> dict[str, Any]:
        """Return the engine's own error body when it had the OpenAI shape."""
        if self.payload is not None and isinstance(self.payload.get("error"), dict):
            return self.payload
        return super().body()


class EngineStreamError(EngineError):
    """Raised when the engine reports an error inside an already started stream."""

    code = "engine_error"
    kind = "bad_stream"
