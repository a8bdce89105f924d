"""pygls's JSON-RPC protocol, with one fix: a request whose params do not fit their type is answered.

pygls logs such a request ("Unable to deserialize message") and drops it, so the client waits
for a reply that never comes. Here it gets InvalidParams (-32602) saying what did not fit, e.g.
`Position.line should be in range [0:2147483647], but was -1`, and the server goes on.
"""

from __future__ import annotations

from dataclasses import dataclass

from cattrs.v import transform_error
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol


@dataclass(frozen=True)
class Unreadable:
    """A request that could not be read into its type: it is still owed a reply."""
    id: int | str
    method: str
    reason: str


class AnsweringProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict):
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            if "id" in data and "method" in data:
                return Unreadable(data["id"], data["method"], _reason(error))
            raise

    def handle_message(self, message):
        if isinstance(message, Unreadable):
            error = JsonRpcInvalidParams(f"{message.method}: {message.reason}")
            self._send_response(message.id, error=error.to_response_error())
            return
        super().handle_message(message)


def _reason(error: JsonRpcException) -> str:
    cause = error.__cause__
    try:
        return "; ".join(transform_error(cause)) if cause is not None else str(error)
    except Exception:  # not a cattrs validation error: its own words
        return str(cause)
