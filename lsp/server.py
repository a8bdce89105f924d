"""`specd lsp`: a pygls language server that brings the daemon's completions to editors.

One feature per handler; the state lives on `SpecdServer`. Inline completion (LSP 3.18) gives ghost
text; `textDocument/completion` serves clients without it. Requests are async, so a client's
`$/cancelRequest` cancels the handler, which cancels the daemon request, and the client gets
RequestCancelled (-32800).
"""

from __future__ import annotations

import asyncio
import logging

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from specd.daemon.client import DaemonError, Launcher
from specd.daemon.config import Config
from specd.daemon.cursor import PositionError
from specd.lsp.context import Cursor, cursor_at
from specd.lsp.postprocess import Suggestion
from specd.lsp.protocol import SpecdProtocol
from specd.lsp.suggest import DaemonUnavailable, Suggester

log = logging.getLogger("specd.lsp")
VERSION = "0.1.0"


class SpecdServer(LanguageServer):
    def __init__(self, config: Config, launch: Launcher):
        super().__init__("specd", VERSION, protocol_cls=SpecdProtocol)
        self.config = config
        self.suggester = Suggester(config, self, launch)
        self.recent: list[str] = []  # document uris, most recently edited first

    def touched(self, uri: str) -> None:
        if uri in self.recent:
            self.recent.remove(uri)
        self.recent.insert(0, uri)

    def cursor(self, uri: str, position: types.Position) -> Cursor:
        """The request's cursor; an unknown document or a position outside it is the client's
        mistake, answered with InvalidParams (the server lives on)."""
        if uri not in self.workspace.text_documents:
            raise JsonRpcInvalidParams(f"document {uri} is not open (send didOpen first)")
        try:
            return cursor_at(self.workspace.get_text_document(uri), position, self.config.lsp.multiline)
        except PositionError as error:
            raise JsonRpcInvalidParams(str(error)) from None

    def reply_range(self, cursor: Cursor, suggestion: Suggestion, uri: str) -> types.Range:
        """Always a range: from the cursor, to the line's end where the suggestion replaces it."""
        start = types.Position(cursor.line, cursor.character)
        if not suggestion.replaces_rest:
            return types.Range(start, start)
        codec = self.workspace.get_text_document(uri).position_codec
        return types.Range(start, types.Position(cursor.line, cursor.character + codec.client_num_units(cursor.line_rest)))


class RequestFailed(JsonRpcException):
    """LSP's RequestFailed: the request was valid but the daemon could not serve it."""
    CODE = -32803
    MESSAGE = "RequestFailed"


async def suggest_or_fail(ls: SpecdServer, uri: str, cursor: Cursor) -> Suggestion | None:
    try:
        return await ls.suggester.suggest(uri, cursor)
    except (DaemonUnavailable, DaemonError) as error:
        ls.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"specd: {error}"))
        raise RequestFailed(message=str(error), code=RequestFailed.CODE) from None


def make_server(config: Config, launch: Launcher) -> SpecdServer:
    server = SpecdServer(config, launch)

    @server.feature(types.INITIALIZE)
    def initialize(ls: SpecdServer, params: types.InitializeParams) -> None:
        ls.suggester.configure(params.initialization_options or {})

    @server.feature(types.INITIALIZED)
    def initialized(ls: SpecdServer, params: types.InitializedParams) -> None:
        ls.suggester.warm_up()  # start (or find) the daemon while the editor settles

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: SpecdServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.touched(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: SpecdServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.touched(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: SpecdServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        if uri in ls.recent:
            ls.recent.remove(uri)
        ls.suggester.forget(uri)

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(ls: SpecdServer, params: types.InlineCompletionParams):
        uri = params.text_document.uri
        cursor = ls.cursor(uri, params.position)
        suggestion = await suggest_or_fail(ls, uri, cursor)
        if suggestion is None:
            return types.InlineCompletionList(items=[])
        item = types.InlineCompletionItem(insert_text=suggestion.text, range=ls.reply_range(cursor, suggestion, uri))
        return types.InlineCompletionList(items=[item])

    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[".", "(", " "]))
    async def completion(ls: SpecdServer, params: types.CompletionParams):
        uri = params.text_document.uri
        cursor = ls.cursor(uri, params.position)
        suggestion = await suggest_or_fail(ls, uri, cursor)
        if suggestion is None:
            return types.CompletionList(is_incomplete=True, items=[])
        first = suggestion.text.strip().split("\n", 1)[0]
        item = types.CompletionItem(
            label=first[:80] + ("…" if len(first) > 80 or "\n" in suggestion.text.strip() else ""),
            kind=types.CompletionItemKind.Text, detail="specd", sort_text="0",
            insert_text_format=types.InsertTextFormat.PlainText,
            text_edit=types.TextEdit(ls.reply_range(cursor, suggestion, uri), suggestion.text))
        return types.CompletionList(is_incomplete=True, items=[item])

    return server


def serve(config: Config, launch: Launcher, tcp: tuple[str, int] | None = None) -> None:
    """Serve on stdio (or on `tcp`, a loopback host and port); `launch` starts the daemon when none answers."""
    server = make_server(config, launch)
    if tcp:
        server.start_tcp(*tcp)
    else:
        server.start_io()
