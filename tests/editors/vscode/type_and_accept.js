// Drives VS Code (code-server) in Debian's headless Chromium through playwright-core: opens a
// file by Quick Open, types at its end, waits for ghost text, takes its next word with Ctrl+Right
// and saves, then accepts the rest with Tab and saves; then types `typedNext` (unsaved), waits for
// ghost text and presses Escape (dismissed).
// Input: one JSON argument {url, chromium, userDataDir, path, typed, typedNext, ghostWaitMs, screenshot}.
// Then clicks specd's status-bar item, which opens the trace page.
// Output: one JSON line on stdout, {ghost, triggers, statusBar, afterWord, rest, escaped, tracePage,
// errors} or {error}; the test reads the saved file.
'use strict';

const fs = require('fs');
const path = require('path');
const { chromium } = require('playwright-core');

const opts = JSON.parse(process.argv[2]);
const STEP_MS = 30000;
// Ghost text on the cursor's line (more lines of it would be in a view zone below).
const GHOST = '.editor-instance .view-lines .ghost-text-decoration';

// Chromium as root in a container: no sandbox, no GPU, and nothing that reaches the network.
const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

async function quickInput(page, key, text) {
  // Quick Open (Ctrl+P) or the Command Palette (Ctrl+Shift+P): type, take the first match.
  await page.keyboard.press(key);
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ timeout: STEP_MS });
  await input.fill(text);
  await page.locator('.quick-input-list .monaco-list-row').first().waitFor({ timeout: STEP_MS });
  await page.keyboard.press('Enter');
  await page.locator('.quick-input-widget').waitFor({ state: 'hidden', timeout: STEP_MS });
}

async function openFile(page, name) {
  await page.locator('.monaco-workbench').waitFor({ timeout: 120000 });
  // The explorer lists the workspace once the window is ready for Quick Open.
  await page.getByRole('treeitem', { name }).waitFor({ timeout: 120000 });
  await quickInput(page, 'Control+P', name);
  const editor = page.locator('.editor-instance .monaco-editor textarea');
  await editor.waitFor({ timeout: STEP_MS });
  await page.locator('.tab.active', { hasText: name }).waitFor({ timeout: STEP_MS });
  await editor.focus();
}

async function waitForSave(file, before, timeoutMs) {
  // Saving is asynchronous (the browser sends the text to the server): wait for the disk.
  const deadline = Date.now() + timeoutMs;
  while (fs.readFileSync(file, 'utf8') === before) {
    if (Date.now() > deadline) throw new Error(`${file} unchanged ${timeoutMs} ms after Ctrl+S`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function waitForGhostChange(page, before, timeoutMs) {
  // Ctrl+Right runs specd's command in the extension host, which then runs VS Code's "accept
  // next word": the word lands after the key returns, and a Ctrl+S pressed at once can save the
  // file without it. The ghost text shrinking (or going) says the word is in the document.
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = (await page.locator(GHOST).allTextContents()).join('').replace(/\u00a0/g, ' ');
    if (text !== before) return;
    if (Date.now() > deadline) throw new Error(`ghost text unchanged ${timeoutMs} ms after Ctrl+Right`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function waitForGhost(page, deadline) {
  // The first requests may be answered empty while the server starts the daemon; VS Code asks
  // again only on the next edit, so after each quiet step ask explicitly, through the Command
  // Palette (Alt+\ does not reach the editor in headless Chromium).
  const ghost = page.locator(GHOST);
  let triggers = 0;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) {
      throw new Error(`no ghost text within ${opts.ghostWaitMs} ms (${triggers} explicit triggers)`);
    }
    try {
      await ghost.first().waitFor({ timeout: Math.min(STEP_MS, left) });
      const text = (await ghost.allTextContents()).join('').replace(/\u00a0/g, ' ');
      if (text.length > 0) {
        return { text, triggers };
      }
    } catch (e) {
      if (!(e instanceof Error && e.name === 'TimeoutError')) throw e;
    }
    await quickInput(page, 'Control+Shift+P', '>Trigger Inline Suggestion');
    triggers += 1;
  }
}

async function main() {
  const context = await chromium.launchPersistentContext(opts.userDataDir, {
    executablePath: opts.chromium,
    headless: true,
    chromiumSandbox: false,
    args: CHROMIUM_ARGS,
    viewport: { width: 1400, height: 900 },
  });
  const page = context.pages()[0] || (await context.newPage());
  const result = {};
  try {
    const before = fs.readFileSync(opts.path, 'utf8');
    await page.goto(opts.url, { timeout: 120000 });
    await openFile(page, path.basename(opts.path));
    await page.keyboard.press('Control+End');
    await page.keyboard.type(opts.typed, { delay: 50 });
    const deadline = Date.now() + opts.ghostWaitMs;
    const { text, triggers } = await waitForGhost(page, deadline);
    result.ghost = text;
    result.triggers = triggers;
    result.statusBar = (await page.locator('.statusbar-item', { hasText: /^\s*specd/ }).first().textContent()).trim();
    await page.keyboard.press('Control+ArrowRight');
    await waitForGhostChange(page, text, STEP_MS);
    await page.keyboard.press('Control+S');
    await waitForSave(opts.path, before, STEP_MS);
    result.afterWord = fs.readFileSync(opts.path, 'utf8');
    result.rest = (await waitForGhost(page, Date.now() + STEP_MS)).text;
    await page.keyboard.press('Tab');
    await page.locator(GHOST).first().waitFor({ state: 'detached', timeout: STEP_MS });
    await page.keyboard.press('Control+S');
    await waitForSave(opts.path, result.afterWord, STEP_MS);
    await page.keyboard.type(opts.typedNext, { delay: 50 });
    await waitForGhost(page, Date.now() + opts.ghostWaitMs);
    await page.keyboard.press('Escape');
    await page.locator(GHOST).first().waitFor({ state: 'detached', timeout: STEP_MS });
    result.escaped = true;
    await page.locator('.statusbar-item', { hasText: /^\s*specd/ }).first().click();
    await page.locator('.tab', { hasText: 'specd trace' }).waitFor({ timeout: STEP_MS });
    result.tracePage = true;
    result.errors = await page.locator('.notifications-toasts').allTextContents();
  } catch (e) {
    result.error = e instanceof Error ? e.stack || e.message : String(e);
    await page.screenshot({ path: opts.screenshot }).catch(() => {});
  } finally {
    await context.close();
  }
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ error: String(e && e.stack ? e.stack : e) }) + '\n');
  process.exitCode = 1;
});
