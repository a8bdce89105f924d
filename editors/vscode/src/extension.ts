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
import * as vscode from 'vscode';
import {
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  TransportKind,
} from 'vscode-languageclient/node';

const SECTION = 'specd';
const DID_FOCUS = 'specd/didFocus';
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
    documentSelector: settings.languages.flatMap((language) => [
      { scheme: 'file', language },
      { scheme: 'untitled', language },
    ]),
    middleware: {
      // `textDocument/completion` is the server's fallback for clients without inline
      // completion. VS Code has it: asking both would show each suggestion twice and have the
      // two requests for one document cancel each other in the daemon (newest wins).
      provideCompletionItem: () => undefined,
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
  starting = client.start().catch((error: unknown) => {
    const message = error instanceof Error ? error.message : String(error);
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

async function stop(): Promise<void> {
  const [running, started] = [client, starting];
  client = undefined;
  starting = undefined;
  await started; // a client can be stopped once it has started or failed to, not while starting
  if (running?.isRunning()) {
    await running.dispose();
  }
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
  context.subscriptions.push(
    vscode.commands.registerCommand('specd.restart', restart),
    vscode.commands.registerCommand('specd.trigger', () =>
      vscode.commands.executeCommand('editor.action.inlineSuggest.trigger'),
    ),
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
