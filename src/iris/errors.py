"""The exception tree of Iris, and the one function that decides what a user sees.

::

    IrisError                     expected failures: one line for the user, never a traceback
    ├── ConfigError               bad config file / key / type (names the key)
    ├── DeviceError               ``iris devices``: a name taken, unknown or malformed
    ├── ProviderError             the model provider failed
    │   ├── ProviderConnectionError   unreachable base_url, dropped connection
    │   │   └── ProviderTimeout           silent longer than ``model.timeout`` (first byte or
    │   │                                 between chunks): the round's one deadline
    │   ├── ProviderBadResponse       a 200 that is not the API's answer (HTML, empty, not SSE)
    │   ├── ProviderHTTPError         an HTTP status from the provider (status_code, body,
    │   │                             retry_after); 401/403 are auth, 429 rate limit, 5xx server
    │   ├── StreamingRejected         the provider refused ``stream=True`` for this model
    │   └── LocalModelCrashed         the embedded model's process died (a signal, a native
    │                                 crash): the turn ends; the next one starts a new process
    └── StoreUnavailable          SQLite locked past ``store.busy_timeout``, read-only, or its
                                  file gone: answered as 503 / an ``error`` frame
"""

from __future__ import annotations


class IrisError(Exception):
    code = "iris_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(IrisError):
    code = "config_error"


class DeviceError(IrisError):
    code = "device_error"


class ProviderError(IrisError):
    code = "provider_error"
    retryable = False


class ProviderConnectionError(ProviderError):
    code = "provider_unreachable"
    retryable = True


class ProviderTimeout(ProviderConnectionError):
    code = "provider_timeout"


class ProviderBadResponse(ProviderError):
    """The provider answered 200 with something that is not the API's answer. Retryable: it is
    usually a proxy or gateway in the way, and the next endpoint of the chain may be fine."""

    code = "provider_bad_response"
    retryable = True


class ProviderHTTPError(ProviderError):
    def __init__(
        self, status_code: int, message: str, body: str = "", retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body
        self.retry_after = retry_after

    @property
    def code(self) -> str:  # type: ignore[override]
        if self.status_code in (401, 403):
            return "provider_auth"
        if self.status_code == 429:
            return "rate_limited"
        if self.status_code >= 500:
            return "provider_server_error"
        if self.status_code == 404:
            return "model_not_found"
        return "provider_bad_request"

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        return self.status_code == 429 or self.status_code >= 500


class StreamingRejected(ProviderError):
    code = "streaming_rejected"


class LocalModelCrashed(ProviderError):
    code = "local_model_crashed"


class StoreUnavailable(IrisError):
    code = "store_unavailable"


def user_message(exc: BaseException) -> tuple[str, str, bool]:
    """(code, one-line message, retryable) for any exception — what a remote user sees."""
    if isinstance(exc, ProviderError):  # ProviderHTTPError's code and retryable: by status
        return exc.code, exc.message, exc.retryable
    if isinstance(exc, IrisError):
        return exc.code, exc.message, False
    return "internal_error", f"internal error: {type(exc).__name__}", False
