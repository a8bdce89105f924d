// specd for VS Code: runs `specd lsp` over stdio and shows its inline completions as ghost text.
//
// The client starts when the first document in one of `specd.languages` opens (starting the
// server may start the daemon, which loads the models: no reason to pay that for a Markdown file).
// vscode-languageclient 11 registers inline completion by default, so there is nothing to add
// for ghost text beyond the document selector. Where the cursor rests without typing (a file
// opened or switched to, a click, a jump), the server is told (`specd/didFocus`) and has the
// daemon read the document there before the first key.
//
// When to ask is the server's to decide (its `[trigger]` rules), so that every editor behaves
// alike: the `specd.trigger.*` settings the user set go to it as initializationOptions and, when
// they change, as workspace/didChangeConfiguration; one left unset keeps the config file's value.
// `specd: Suggest here` asks VS Code for an inline suggestion by hand (trigger kind Invoked),
// which the server serves even with `specd.trigger.auto` off.
//
// What the user takes is counted by the server (lsp/uptake.py): Tab runs the item's command
// (`specd.didAccept`, forwarded as workspace/executeCommand). VS Code's stable API says nothing
// when only a word or a line of a suggestion is taken, so `specd: Accept next word` (Ctrl+Right
// while a suggestion shows, where VS Code binds its own) and `specd: Accept next line` run VS
// Code's own commands, count what they inserted, and send Copilot's
// textDocument/didPartiallyAcceptCompletion for the suggestion on screen. Escape while a
// suggestion shows runs `specd: Dismiss the suggestion`, which hides it as VS Code's own Escape
// does and tells the server (`specd/didDismissCompletion`).
//
// A status-bar item says whether specd is starting, up (with the last suggestion's round trip),
// down or failing; clicking it opens specd's trace page (`specd trace --html`) beside the
// editor. The language server's log (its stderr) goes to the "specd" output channel.
import { execFile } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as vscode from 'vscode';
import {
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
  TransportKind,
} from 'vscode-languageclient/node';

const SECTION = 'specd';
const DID_FOCUS = 'specd/didFocus';
const ACCEPT = 'specd.didAccept'; // the command on each of the server's items; its argument the id
const PARTIAL = 'textDocument/didPartiallyAcceptCompletion';
const DISMISS = 'specd/didDismissCompletion';
const EDIT_WAIT_MS = 500; // a partial accept's edit reaches the extension host within this
const FOCUS_MS = 300; // the cursor rests this long before the server is told; each move restarts it
// VS Code's setting under `specd.trigger.` -> the server's name for it (lsp/trigger.py)
const TRIGGER_SETTINGS: Record<string, string> = {
  auto: 'auto',
  delayMs: 'delay_ms',
  languages: 'languages',
  maxLineSuffix: 'max_line_suffix',
};

let client: LanguageClient | undefined;
let starting: Promise<void> | undefined;
let focusTimer: ReturnType<typeof setTimeout> | undefined;
let lastEdit = 0;
let statusItem: vscode.StatusBarItem | undefined;
let output: vscode.LogOutputChannel | undefined;
let lastMs: number | undefined; // the last suggestion's round trip
let failing: string | undefined; // why the last start or request failed, until one succeeds
const TRACE_LAST = 500; // requests on the trace page
// The suggestion last shown (the server's item, with its id) and how much of it was taken.
let onScreen: { document: vscode.TextDocument; item: vscode.InlineCompletionItem; taken: number } | undefined;

interface Settings {
  path: string;
  languages: string[];
  readAhead: boolean;
}

function readSettings(): Settings {
  const config = vscode.workspace.getConfiguration(SECTION);
  return {
    path: config.get<string>('path', 'specd') || 'specd',
    languages: config.get<string[]>('languages', []),
    readAhead: config.get<boolean>('readAhead', true),
  };
}

// Only the settings the user set (in any scope): the others leave the config file's values.
function triggerOptions(): Record<string, unknown> {
  const config = vscode.workspace.getConfiguration(`${SECTION}.trigger`);
  const options: Record<string, unknown> = {};
  for (const [setting, name] of Object.entries(TRIGGER_SETTINGS)) {
    const set = config.inspect(setting);
    const value = set?.workspaceFolderValue ?? set?.workspaceValue ?? set?.globalValue;
    if (value !== undefined) {
      options[name] = value;
    }
  }
  return options;
}

function serves(document: vscode.TextDocument, settings: Settings): boolean {
  return settings.languages.includes(document.languageId);
}

function createClient(settings: Settings): LanguageClient {
  const serverOptions: ServerOptions = {
    command: settings.path,
    args: ['lsp'],
    transport: TransportKind.stdio,
  };
  const clientOptions: LanguageClientOptions = {
    initializationOptions: { trigger: triggerOptions() },
    outputChannel: output,
    documentSelector: settings.languages.flatMap((language) => [
      { scheme: 'file', language },
      { scheme: 'untitled', language },
    ]),
    middleware: {
      // `textDocument/completion` is the server's fallback for clients without inline
      // completion. VS Code has it: asking both would show each suggestion twice and have the
      // two requests for one document cancel each other in the daemon (newest wins).
      provideCompletionItem: () => undefined,
      provideInlineCompletionItems: async (document, position, context, token, next) => {
        const sent = Date.now();
        let result;
        try {
          result = await next(document, position, context, token);
        } catch (error) {
          showState(error instanceof Error ? error.message : String(error));
          throw error;
        }
        const item = (Array.isArray(result) ? result : result?.items)?.[0];
        if (item?.command?.command === ACCEPT) {
          onScreen = { document, item, taken: 0 };
          lastMs = Date.now() - sent;
        }
        showState(undefined);
        return result;
      },
    },
  };
  return new LanguageClient(SECTION, 'specd', serverOptions, clientOptions);
}

async function startIfNeeded(): Promise<void> {
  if (client) {
    return;
  }
  const settings = readSettings();
  if (!vscode.workspace.textDocuments.some((document) => serves(document, settings))) {
    return;
  }
  client = createClient(settings);
  client.onDidChangeState(() => showState(failing));
  showState(undefined);
  starting = client.start().catch((error: unknown) => {
    const message = error instanceof Error ? error.message : String(error);
    showState(`could not start \`${settings.path} lsp\`: ${message}`);
    void vscode.window.showErrorMessage(
      `specd: could not start \`${settings.path} lsp\` (${message}). Check the specd.path setting.`,
    );
  });
  await starting;
  focusRested(vscode.window.activeTextEditor);
}

// Typing moves the cursor too, but each key brings its own completion request: only a cursor
// that rests with no edit in the last FOCUS_MS is news.
function focusRested(editor: vscode.TextEditor | undefined): void {
  if (focusTimer) {
    clearTimeout(focusTimer);
  }
  focusTimer = setTimeout(() => {
    const running = client;
    const settings = readSettings();
    if (!editor || !running?.isRunning() || vscode.window.activeTextEditor !== editor) {
      return;
    }
    if (!settings.readAhead || !serves(editor.document, settings) || Date.now() - lastEdit < FOCUS_MS) {
      return;
    }
    void running.sendNotification(DID_FOCUS, {
      textDocument: { uri: running.code2ProtocolConverter.asUri(editor.document.uri) },
      position: running.code2ProtocolConverter.asPosition(editor.selection.active),
    });
  }, FOCUS_MS);
}

// The status-bar item: starting, up (and the last round trip), down, or failing (`why`).
function showState(why: string | undefined): void {
  failing = why;
  if (!statusItem) {
    return;
  }
  const state = client?.state;
  if (failing) {
    [statusItem.text, statusItem.tooltip] = ['$(error) specd', `specd: ${failing}`];
  } else if (state === State.Starting) {
    [statusItem.text, statusItem.tooltip] = ['$(loading~spin) specd', 'specd: starting the language server'];
  } else if (state === State.Running) {
    const ms = lastMs === undefined ? '' : ` ${lastMs} ms`;
    statusItem.text = `$(check) specd${ms}`;
    statusItem.tooltip = lastMs === undefined ? 'specd: up, no suggestion yet' : `specd: up; the last suggestion came in${ms}`;
  } else {
    [statusItem.text, statusItem.tooltip] = ['$(circle-slash) specd', 'specd: down (no document of specd.languages open, or stopped)'];
  }
  statusItem.tooltip += ' (click: the trace page)';
}

// `specd trace --html` for the last requests, shown in a panel beside the editor (the page is
// self-contained HTML and SVG: no scripts).
async function openTrace(): Promise<void> {
  const page = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'specd-trace-')), 'trace.html');
  const settings = readSettings();
  try {
    await new Promise<void>((resolve, reject) =>
      execFile(settings.path, ['trace', '--last', String(TRACE_LAST), '--html', page], { timeout: 60000 },
        (error, _stdout, stderr) => (error ? reject(new Error(stderr.trim() || error.message)) : resolve())),
    );
    const panel = vscode.window.createWebviewPanel('specd.trace', 'specd trace', vscode.ViewColumn.Beside, {});
    panel.webview.html = fs.readFileSync(page, 'utf8');
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    void vscode.window.showErrorMessage(`specd: no trace page (${message})`);
  } finally {
    fs.rmSync(path.dirname(page), { recursive: true, force: true });
  }
}

// The characters the next edit of `document` inserts (0 if none comes within EDIT_WAIT_MS).
function nextInsert(document: vscode.TextDocument): { done: Promise<number>; cancel: () => void } {
  let cancel = () => {};
  const done = new Promise<number>((resolve) => {
    const timer = setTimeout(() => finish(0), EDIT_WAIT_MS);
    const listener = vscode.workspace.onDidChangeTextDocument((event) => {
      if (event.document === document && event.contentChanges.length > 0) {
        finish(event.contentChanges.reduce((n, change) => n + [...change.text].length, 0));
      }
    });
    function finish(chars: number): void {
      clearTimeout(timer);
      listener.dispose();
      resolve(chars);
    }
    cancel = () => finish(0);
  });
  return { done, cancel };
}

// Takes the next word or line of the suggestion with VS Code's own command, and tells the server
// how many of its characters are taken so far.
async function acceptPart(unit: 'Word' | 'Line'): Promise<void> {
  const shown = onScreen;
  const document = vscode.window.activeTextEditor?.document;
  const insert = document ? nextInsert(document) : undefined;
  try {
    await vscode.commands.executeCommand(`editor.action.inlineSuggest.acceptNext${unit}`);
  } catch (error) {
    insert?.cancel();
    throw error;
  }
  const chars = (await insert?.done) ?? 0;
  if (!shown || shown.document !== document || chars === 0 || !client?.isRunning()) {
    return;
  }
  shown.taken += chars;
  const text = shown.item.insertText;
  void client.sendNotification(PARTIAL, {
    item: { insertText: typeof text === 'string' ? text : text.value, command: shown.item.command },
    acceptedLength: shown.taken,
  });
}

// Hides the suggestion on screen, as VS Code's Escape does, and tells the server it was dismissed.
async function dismiss(): Promise<void> {
  const shown = onScreen;
  onScreen = undefined;
  await vscode.commands.executeCommand('editor.action.inlineSuggest.hide');
  if (shown && client?.isRunning()) {
    void client.sendNotification(DISMISS, { item: { command: shown.item.command } });
  }
}

async function stop(): Promise<void> {
  const [running, started] = [client, starting];
  client = undefined;
  starting = undefined;
  await started; // a client can be stopped once it has started or failed to, not while starting
  if (running?.isRunning()) {
    await running.dispose();
  }
  showState(undefined);
}

// The server checks the values: one it refuses is shown as its message, and it goes on with the
// config file's.
function sendTriggerSettings(): void {
  if (client?.isRunning()) {
    void client.sendNotification('workspace/didChangeConfiguration', {
      settings: { [SECTION]: { trigger: triggerOptions() } },
    });
  }
}

async function restart(): Promise<void> {
  await stop();
  await startIfNeeded();
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel('specd', { log: true });
  statusItem = vscode.window.createStatusBarItem('specd.status', vscode.StatusBarAlignment.Right, 100);
  statusItem.name = 'specd';
  statusItem.command = 'specd.openTrace';
  showState(undefined);
  statusItem.show();
  context.subscriptions.push(
    output,
    statusItem,
    vscode.commands.registerCommand('specd.openTrace', openTrace),
    vscode.commands.registerCommand('specd.showLog', () => output?.show()),
    vscode.commands.registerCommand('specd.restart', restart),
    vscode.commands.registerCommand('specd.trigger', () =>
      vscode.commands.executeCommand('editor.action.inlineSuggest.trigger'),
    ),
    vscode.commands.registerCommand('specd.acceptNextWord', () => acceptPart('Word')),
    vscode.commands.registerCommand('specd.acceptNextLine', () => acceptPart('Line')),
    vscode.commands.registerCommand('specd.dismiss', dismiss),
    vscode.workspace.onDidOpenTextDocument(() => startIfNeeded()),
    vscode.workspace.onDidChangeTextDocument(() => {
      lastEdit = Date.now();
    }),
    vscode.window.onDidChangeActiveTextEditor(focusRested),
    vscode.window.onDidChangeTextEditorSelection((event) => focusRested(event.textEditor)),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration(`${SECTION}.path`) || event.affectsConfiguration(`${SECTION}.languages`)) {
        void restart();
      } else if (event.affectsConfiguration(`${SECTION}.trigger`)) {
        sendTriggerSettings();
      }
    }),
  );
  await startIfNeeded();
}

export function deactivate(): Promise<void> {
  return stop();
}
