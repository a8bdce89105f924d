// specd for VS Code: runs `specd lsp` over stdio and shows its inline completions as ghost text.
//
// The client starts when the first document in one of `specd.languages` opens (starting the
// server may start the daemon, which loads the models: no reason to pay that for a Markdown file).
// vscode-languageclient 11 registers inline completion by default, so there is nothing to add
// for ghost text beyond the document selector.
import * as vscode from 'vscode';
import {
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  TransportKind,
} from 'vscode-languageclient/node';

const SECTION = 'specd';

let client: LanguageClient | undefined;
let starting: Promise<void> | undefined;

interface Settings {
  path: string;
  languages: string[];
}

function readSettings(): Settings {
  const config = vscode.workspace.getConfiguration(SECTION);
  return {
    path: config.get<string>('path', 'specd') || 'specd',
    languages: config.get<string[]>('languages', []),
  };
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

async function restart(): Promise<void> {
  await stop();
  await startIfNeeded();
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  context.subscriptions.push(
    vscode.commands.registerCommand('specd.restart', restart),
    vscode.workspace.onDidOpenTextDocument(() => startIfNeeded()),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration(`${SECTION}.path`) || event.affectsConfiguration(`${SECTION}.languages`)) {
        void restart();
      }
    }),
  );
  await startIfNeeded();
}

export function deactivate(): Promise<void> {
  return stop();
}
