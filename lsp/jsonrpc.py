"""pygls's JSON-RPC protocol, with what a client's mistakes are owed: an answer, or a quiet log line.

pygls logs a request whose params do not fit their type ("Unable to deserialize message") and
drops it, so the client waits for a reply that never comes. Here it gets InvalidParams (-32602)
saying what did not fit, e.g. `Position.line should be in range [0:2147483647], but was -1`. A
notification sent with an id (a request no handler answers) gets InvalidRequest (-32600), and so
does a request that is not JSON-RPC 2.0 (pygls drops those). A change to a document that is not open is ignored
with a log line; pygls would fail on it and show the user an error about the server. Messages
that are not requests at all (an array, a bare value) are logged and dropped: nothing is owed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from urllib.parse import unquote

import attrs
from cattrs.v import transform_error
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

log = logging.getLogger("specd.lsp")


@dataclass(frozen=True)
class Unreadable:
    """A request that could not be read into its type: it is still owed a reply."""
    id: int | str
    method: str
    reason: str
    error: type[JsonRpcException] = JsonRpcInvalidParams


class AnsweringProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict):
        method = data.get("method")
        if ("jsonrpc" in data and "id" in data and isinstance(method, str)
                and _is_notification(self.get_message_type(method))):
            return Unreadable(data["id"], method, "is a notification: send it without an id", JsonRpcInvalidRequest)
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            if "id" in data and "method" in data:
                return Unreadable(data["id"], data["method"], _reason(error))
            raise

    def handle_message(self, message):
        if isinstance(message, Unreadable):
            error = message.error(f"{message.method}: {message.reason}")
            self._send_response(message.id, error=error.to_response_error())
            return
        if getattr(message, "jsonrpc", None) != self.VERSION:   # not JSON-RPC 2.0: pygls drops it
            self._refuse(message)                                # (or hands it on as it came)
            return
        super().handle_message(message)

    def _refuse(self, message) -> None:
        msg_id, method = _field(message, "id"), _field(message, "method")
        if isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool) and isinstance(method, str):
            error = JsonRpcInvalidRequest(f'{method}: not JSON-RPC 2.0 (send "jsonrpc": "2.0")')
            self._send_response(msg_id, error=error.to_response_error())
        else:
            log.warning("ignored a message that is not a JSON-RPC 2.0 request or notification: %.200r", message)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        if unquote(params.text_document.uri) not in self.workspace.text_documents:
            log.warning("didChange for %s, which is not open: ignored", params.text_document.uri)
            return
        yield from super().lsp_text_document__did_change(params)


def _field(message, name: str):
    return message.get(name) if isinstance(message, dict) else getattr(message, name, None)


def _is_notification(message_type) -> bool:
    return message_type is not None and attrs.has(message_type) and "id" not in attrs.fields_dict(message_type)


def _reason(error: JsonRpcException) -> str:
    cause = error.__cause__
    try:
        return "; ".join(transform_error(cause)) if cause is not None else str(error)
    except Exception:  # not a cattrs validation error: its own words
        return str(cause)
