"""Errors of the gateway process, and their OpenAI error bodies.

Every error the gateway raises on purpose derives from one base class, so the HTTP layer
can turn any of them into the OpenAI error shape (``{"error": {"message", "type",
"code"}}``) with the right status, before streaming began, or as a final stream event
after::

    GatewayError                      base: status, OpenAI type and code, a safe message
    ├── RequestError                  the client's request is wrong (400)
    │   └── BodyTooLargeError         the body is over the configured limit (413)
    ├── AuthError                     the Bearer key is missing or wrong (401)
    ├── UnknownModelError             no configured engine serves the model (404)
    └── EngineError                   the engine failed us
        ├── EngineUnreachableError    no connection, or it broke mid-answer (502)
        ├── EngineTimeoutError        the engine went quiet past the timeout (504)
        ├── EngineStatusError         the engine answered with an error status (its own)
        └── EngineStreamError         the engine sent an error event inside its stream (502)

Messages never hold keys, user text or page text: they reach logs and clients.
"""

from __future__ import annotations

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


class RequestError(GatewayError):
    """Raised when the request body is malformed JSON or breaks the request schema."""

    status = 400
    error_type = "invalid_request_error"
    code = "invalid_request"


class BodyTooLargeError(RequestError):
    """Raised when the request body is longer than the configured limit."""

    status = 413
    code = "request_too_large"


class AuthError(GatewayError):
    """Raised when the ``Authorization: Bearer`` key is missing or not a configured key."""

    status = 401
    error_type = "invalid_request_error"
    code = "invalid_api_key"


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


class EngineUnreachableError(EngineError):
    """Raised when the engine cannot be connected to, or the connection breaks."""

    code = "engine_unreachable"
    kind = "connect"


class EngineTimeoutError(EngineError):
    """Raised when the engine does not answer, or stops sending, within the timeout."""

    status = 504
    code = "engine_timeout"
    kind = "timeout"


class EngineStatusError(EngineError):
    """Raised when the engine answers a request with an error status.

    The engine's own status and error body are kept so a client sees the engine's words
    (a 400 for a too-long prompt stays a 400).
    """

    code = "engine_error"

    def __init__(self, status: int, payload: dict[str, Any] | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.payload = payload
        self.kind = "http_4xx" if status < 500 else "http_5xx"

    def body(self) -> dict[str, Any]:
        """Return the engine's own error body when it had the OpenAI shape."""
        if self.payload is not None and isinstance(self.payload.get("error"), dict):
            return self.payload
        return super().body()


class EngineStreamError(EngineError):
    """Raised when the engine reports an error inside an already started stream."""

    code = "engine_error"
    kind = "bad_stream"
