"""`specd lsp`: a pygls language server that brings the daemon's completions to editors.

As in pygls's example servers: one module-level server, one feature per handler, the state on the
`LanguageServer` subclass. Inline completion (LSP 3.18) gives ghost text; `textDocument/completion`
serves clients without it. Requests are async, so a client's `$/cancelRequest` cancels the
handler, which cancels the daemon request, and the client gets RequestCancelled (-32800).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from lsprotocol import types
from pygls.exceptions import FeatureNotificationError, JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from specd.daemon.client import Client, DaemonError, Launcher
from specd.daemon.config import Config
from specd.daemon.protocol import Feedback
from specd.lsp.context import Cursor, LspTextDocument, LspWorkspace, Surroundings, cursor_at, is_open, surroundings
from specd.lsp.cursor import PositionError
from specd.lsp.focus import DID_FOCUS, read_focus
from specd.lsp.jsonrpc import AnsweringProtocol
from specd.lsp.postprocess import Suggestion
from specd.lsp.suggest import DaemonUnavailable, Suggester
from specd.lsp.trigger import Decision, TriggerOptionsError, decide, language_on, with_options
from specd.lsp.uptake import ACCEPT, DISMISS, PARTIAL, Uptake, UptakeError, item_id, partial_params

VERSION = "0.1.0"
# A source file's characters per token, on the low side (code runs 3 to 4 with these tokenizers):
# a document under prefix_tokens * this surely fits the prompt whole.
CHARS_PER_TOKEN = 3
log = logging.getLogger("specd.lsp")


class RequestFailed(JsonRpcException):
    """LSP's RequestFailed: the request was valid but the daemon could not serve it."""
    CODE = -32803
    MESSAGE = "RequestFailed"


class SpecdServer(LanguageServer):
    """All of the server's state: the configuration, the documents (pygls's workspace, and the
    order they were edited in) and the suggester, which holds the daemon connection."""

    def __init__(self):
        super().__init__("specd", VERSION, protocol_cls=AnsweringProtocol)
        self.use(Config(), launch=None)
        self.recent: list[str] = []  # document uris, most recently edited first
        self.uptake = Uptake()       # the suggestions sent, by id, and what the user did with them

    def use(self, config: Config, launch: Launcher | None) -> None:
        """Serve with `config`; `launch` starts the daemon when none answers (None: only connect)."""
        self.config = config
        self.trigger = config.trigger   # with the editor's overrides, once it sends any
        self.suggester = Suggester(functools.partial(Client.connect, config, launch=launch))

    def report_server_error(self, error: Exception, source) -> None:
        """pygls shows the user every message it could not read; a client's garbage is the log's
        business (a request among it is answered: lsp/jsonrpc.py). A failing notification handler
        is still shown: that is a bug of ours."""
        log.warning("%s: %s", getattr(source, "__name__", source), error)
        if source is FeatureNotificationError:
            super().report_server_error(error, source)

    def touched(self, uri: str) -> None:
        if uri in self.recent:
            self.recent.remove(uri)
        self.recent.insert(0, uri)

    def closed(self, uri: str) -> None:
        if uri in self.recent:
            self.recent.remove(uri)
        self.suggester.forget(uri)
        self.uptake.forget(uri)

    def cursor(self, uri: str, position: types.Position) -> Cursor:
        """The request's cursor; an unknown document or a position outside it is the client's
        mistake, answered with InvalidParams (the server lives on)."""
        if not is_open(self.workspace, uri):
            raise JsonRpcInvalidParams(f"document {uri} is not open (send didOpen first)")
        try:
            return cursor_at(self.workspace.get_text_document(uri), position, self.config.lsp.multiline)
        except PositionError as error:
            raise JsonRpcInvalidParams(str(error)) from None

    def set_trigger(self, options: object, source: str) -> None:
        """The config's `[trigger]` with the editor's `options` over it. Values the rules refuse
        are said to the user and ignored: the server goes on with the config's."""
        try:
            self.trigger = with_options(self.config.trigger, options)
        except TriggerOptionsError as error:
            self.trigger = self.config.trigger
            log.warning("%s: %s", source, error)
            self.window_show_message(types.ShowMessageParams(
                types.MessageType.Error, f"specd: {source}: {error}; using the config's trigger settings"))

    def surroundings(self, uri: str) -> Surroundings:
        return surroundings(self.workspace, uri, self.recent, self.config.lsp.extra_documents)

    async def suggest(self, uri: str, position: types.Position,
                      invoked: bool) -> tuple[Cursor, Suggestion | None]:
        """The cursor and what to suggest there, as the trigger rules allow (`invoked`: the user
        asked by hand); a daemon that cannot serve is RequestFailed. A suggestion shown has its
        accept branch prefetched."""
        cursor, around = self.cursor(uri, position), self.surroundings(uri)
        self.took(lambda: self.uptake.moved(uri, cursor))   # the one shown here before: typed over?
        decision = decide(self.trigger, invoked, around.language, cursor.line_rest)
        self.say_why_not(decision, invoked)
        try:
            suggestion = await self.suggester.suggest(uri, cursor, around, decision)
        except (DaemonUnavailable, DaemonError) as error:
            self.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"specd: {error}"))
            raise RequestFailed(message=str(error), code=RequestFailed.CODE) from None
        if suggestion is not None and is_open(self.workspace, uri):
            self.suggester.prefetch_after(uri, self.accepted(uri, cursor, suggestion), around)
        return cursor, suggestion

    def say_why_not(self, decision: Decision, invoked: bool) -> None:
        """A manual trigger that gets nothing is told why: the user pressed a key and waits."""
        if invoked and decision.action != "ask":
            self.window_show_message(types.ShowMessageParams(types.MessageType.Info, f"specd: {decision.why}"))

    def read_ahead(self, uri: str, position: types.Position | None = None) -> None:
        """Read `uri` ahead at `position` (None: its end, and only where the whole document fits
        the prompt's prefix budget, so that every cursor there shares that prompt's start). A
        position the client got wrong is logged: a notification has no one to answer."""
        document = self.workspace.get_text_document(uri)
        if not language_on(self.trigger, document.language_id or ""):
            return  # nothing at all, not even the model time of reading ahead
        if position is None:
            if len(document.source) > self.config.engine.prefix_tokens * CHARS_PER_TOKEN:
                return
            lines = document.lines
            last = lines[-1] if lines else ""
            ends_line = last.endswith(("\n", "\r"))
            position = types.Position(len(lines) if ends_line else max(len(lines) - 1, 0),
                                      0 if ends_line else document.position_codec.client_num_units(last))
        try:
            cursor = self.cursor(uri, position)
        except JsonRpcInvalidParams as error:
            log.warning("%s: %s", DID_FOCUS, error)
            return
        self.suggester.read_ahead(uri, cursor, self.surroundings(uri))

    def accepted(self, uri: str, cursor: Cursor, suggestion: Suggestion) -> Cursor:
        """The cursor after `suggestion` is accepted, cut from the document as it will then be, by
        the same rules as any request's: so the request after Tab is the one prefetched."""
        document = self.workspace.get_text_document(uri)
        start = document.offset_at_position(types.Position(cursor.line, cursor.character))
        end = start + len(cursor.line_rest) if suggestion.replaces_rest else start
        after = LspTextDocument(uri, document.source[:start] + suggestion.text + document.source[end:],
                                language_id=document.language_id, position_codec=document.position_codec)
        *above, last = suggestion.text.split("\n")
        character = (0 if above else cursor.character) + document.position_codec.client_num_units(last)
        return cursor_at(after, types.Position(cursor.line + len(above), character), self.config.lsp.multiline)

    def shown(self, suggestion: Suggestion, uri: str, cursor: Cursor) -> types.Command:
        """The command an editor runs when the user takes `suggestion` whole: it names its id."""
        language = self.workspace.get_text_document(uri).language_id or ""
        key, event = self.uptake.shown(suggestion.text, language, suggestion.request, uri, cursor)
        self.suggester.report(event)
        return types.Command(title="specd: suggestion taken", command=ACCEPT, arguments=[key])

    def took(self, report: Callable[[], Feedback | None]) -> None:
        """What the user did with a suggestion, read by `report` (from an editor's report or the
        server's own view); one naming none this server sent, or malformed, is the client's
        mistake: logged, nothing counted."""
        try:
            event = report()
        except UptakeError as error:
            log.warning("%s", error)
            return
        if event is not None:
            self.suggester.report(event)

    def reply_range(self, cursor: Cursor, suggestion: Suggestion, uri: str) -> types.Range:
        """Always a range: from the cursor, to the line's end where the suggestion replaces it."""
        start = types.Position(cursor.line, cursor.character)
        if not suggestion.replaces_rest:
            return types.Range(start, start)
        codec = self.workspace.get_text_document(uri).position_codec
        return types.Range(start, types.Position(cursor.line,
                                                 cursor.character + codec.client_num_units(cursor.line_rest)))


server = SpecdServer()


@server.feature(types.INITIALIZE)
def initialize(ls: SpecdServer, params: types.InitializeParams) -> None:
    ls.workspace.__class__ = LspWorkspace   # pygls has just made it; no document is open yet
    options = params.initialization_options or {}
    if isinstance(options, dict) and "trigger" in options:
        options = dict(options)
        ls.set_trigger(options.pop("trigger"), "initializationOptions")
    ls.suggester.configure(options)


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(ls: SpecdServer, params: types.DidChangeConfigurationParams) -> None:
    """An editor's new trigger settings: `{"specd": {"trigger": {...}}}` (VS Code's section) or
    `{"trigger": {...}}`, over the config's as in initializationOptions. Other settings: ignored."""
    settings = params.settings if isinstance(params.settings, dict) else {}
    section = settings.get("specd") if isinstance(settings.get("specd"), dict) else settings
    if "trigger" in section:
        ls.set_trigger(section["trigger"], "workspace/didChangeConfiguration")


@server.feature(types.INITIALIZED)
def initialized(ls: SpecdServer, params: types.InitializedParams) -> None:
    ls.suggester.warm_up()  # start (or find) the daemon while the editor settles


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: SpecdServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.touched(params.text_document.uri)
    ls.read_ahead(params.text_document.uri)


@server.feature(DID_FOCUS)
def did_focus(ls: SpecdServer, params) -> None:
    """specd's editor clients: the cursor rests here (lsp/focus.py)."""
    try:
        uri, position = read_focus(params)
    except ValueError as error:
        log.warning("%s", error)
        return
    if not is_open(ls.workspace, uri):
        log.warning("%s for %s, which is not open: ignored", DID_FOCUS, uri)
        return
    ls.read_ahead(uri, position)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: SpecdServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.touched(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: SpecdServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.closed(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
async def inline_completion(ls: SpecdServer, params: types.InlineCompletionParams) -> types.InlineCompletionList:
    uri = params.text_document.uri
    invoked = params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
    cursor, suggestion = await ls.suggest(uri, params.position, invoked)
    if suggestion is None:
        return types.InlineCompletionList(items=[])
    item = types.InlineCompletionItem(insert_text=suggestion.text, range=ls.reply_range(cursor, suggestion, uri),
                                      command=ls.shown(suggestion, uri, cursor))
    return types.InlineCompletionList(items=[item])


@server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[".", "(", " "]))
async def completion(ls: SpecdServer, params: types.CompletionParams) -> types.CompletionList:
    uri = params.text_document.uri
    # A client that does not say how it was triggered is taken as typing: automatic.
    invoked = params.context is not None and params.context.trigger_kind == types.CompletionTriggerKind.Invoked
    cursor, suggestion = await ls.suggest(uri, params.position, invoked)
    if suggestion is None:
        return types.CompletionList(is_incomplete=True, items=[])
    first = suggestion.text.strip().split("\n", 1)[0]
    item = types.CompletionItem(
        label=first[:80] + ("…" if len(first) > 80 or "\n" in suggestion.text.strip() else ""),
        kind=types.CompletionItemKind.Text, detail="specd", sort_text="0",
        insert_text_format=types.InsertTextFormat.PlainText,
        text_edit=types.TextEdit(ls.reply_range(cursor, suggestion, uri), suggestion.text),
        command=ls.shown(suggestion, uri, cursor))
    return types.CompletionList(is_incomplete=True, items=[item])


@server.command(ACCEPT)
def accept_command(ls: SpecdServer, *arguments) -> None:
    """The command on each item (workspace/executeCommand), which the editor runs once the user
    took it whole; its one argument is the suggestion's id."""
    ls.took(lambda: ls.uptake.accepted(arguments[0] if len(arguments) == 1 else None))


@server.feature(PARTIAL)
def did_partially_accept(ls: SpecdServer, params) -> None:
    """Copilot's notification for a word or a line of a suggestion taken (lsp/uptake.py)."""
    ls.took(lambda: ls.uptake.partially(*partial_params(params)))


@server.feature(DISMISS)
def did_dismiss(ls: SpecdServer, params) -> None:
    """specd's editor clients: the user hid the suggestion on screen (Escape)."""
    ls.took(lambda: ls.uptake.dismissed(item_id(params, DISMISS), "escaped"))


def serve(config: Config, launch: Launcher, tcp: tuple[str, int] | None = None) -> None:
    """Serve on stdio (or on `tcp`, a loopback host and port); `launch` starts the daemon when none answers."""
    server.use(config, launch)
    if tcp:
        server.start_tcp(*tcp)
    else:
        server.start_io()
