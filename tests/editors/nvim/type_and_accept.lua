-- Plays a person in a real headless Neovim with editors/nvim loaded: opens $SPECD_NVIM_FILE,
-- presses the accept key before any suggestion can exist (it must type as usual), types
-- $SPECD_NVIM_TYPE on a new last line, waits for the ghost text, takes its next word with
-- $SPECD_NVIM_WORD_KEY, waits for the rest, accepts that with the key; then starts a new function,
-- takes the first line of its ghost text with $SPECD_NVIM_LINE_KEY, waits for the next ghost text
-- and leaves insert mode with it on screen (dismissed); runs :checkhealth specd. What it saw goes to
-- $SPECD_NVIM_RESULT as JSON; then it quits. tests/editors/test_nvim.py judges it.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'harness.lua'))
local env = vim.env
local result = H.result
local sleep, wait_for, ghost_marks, finish = H.sleep, H.wait_for, H.ghost_marks, H.finish

--- Types like a person: one key at a time, `gap_ms` apart (under Neovim's 200 ms debounce).
local function type_text(text, gap_ms)
  for ch in text:gmatch('.') do
    vim.api.nvim_input(ch == '<' and '<lt>' or ch)
    sleep(gap_ms)
  end
end

--- The ghost text as the person sees it: its position, the rest of its first line, further lines.
local function ghost()
  local mark = ghost_marks()[1]
  local first = ''
  for _, chunk in ipairs(mark[4].virt_text or {}) do
    first = first .. chunk[1]
  end
  local rest = {}
  for _, line in ipairs(mark[4].virt_lines or {}) do
    local text = ''
    for _, chunk in ipairs(line) do
      text = text .. chunk[1]
    end
    table.insert(rest, text)
  end
  return { row = mark[2], col = mark[3], first = first, lines = rest }
end

local function snapshot()
  return {
    lines = vim.api.nvim_buf_get_lines(0, 0, -1, true),
    cursor = vim.api.nvim_win_get_cursor(0),
    mode = vim.api.nvim_get_mode().mode,
  }
end

local function specd_client()
  return vim.lsp.get_clients({ bufnr = 0, name = 'specd' })[1]
end

local function open_and_attach(key)
  require('specd').setup({ cmd = vim.json.decode(env.SPECD_NVIM_CMD), filetypes = { 'python' }, accept_key = key })
  vim.cmd.edit(vim.fn.fnameescape(env.SPECD_NVIM_FILE))
  wait_for('specd to attach', 120000, function()
    local client = specd_client()
    return client ~= nil and client.initialized and vim.lsp.inline_completion.is_enabled({ bufnr = 0 })
  end)
  assert(specd_client():supports_method('textDocument/inlineCompletion'),
    'specd lsp does not advertise inlineCompletionProvider')
  sleep(100) -- the inline-completion capability attaches on the next event-loop turn
  local map = vim.fn.maparg(key, 'i', false, true)
  result.mapping = { buffer = map.buffer, expr = map.expr, desc = map.desc }
  map = vim.fn.maparg(env.SPECD_NVIM_WORD_KEY, 'i', false, true)
  result.word_mapping = { buffer = map.buffer, expr = map.expr, desc = map.desc }
end

--- Moves the cursor in normal mode and lets it rest: the plugin tells specd where
--- (`specd/didFocus`, recorded here on its way out).
local function rest_the_cursor()
  local client = specd_client()
  local notify = client.notify
  result.focus = {}
  client.notify = function(self, method, params)
    if method == 'specd/didFocus' then
      table.insert(result.focus, params)
    end
    return notify(self, method, params)
  end
  vim.api.nvim_win_set_cursor(0, { 3, 4 })
  sleep(1000)
end

--- Opens a new last line and presses the key at once: the first request leaves 200 ms after
--- InsertEnter, so there is no suggestion yet and the key must type itself. <BS> takes it back.
local function press_without_suggestion(key)
  vim.api.nvim_input('Go')
  sleep(20)
  result.ghosts_before_key = #ghost_marks()
  vim.api.nvim_input(key)
  sleep(50)
  result.without_suggestion = snapshot()
  vim.api.nvim_input('<BS>')
  sleep(20)
end

local function type_and_accept(key)
  type_text(env.SPECD_NVIM_TYPE, 80)
  result.typed = snapshot()
  local typed_at = vim.uv.now()
  wait_for('the ghost text', tonumber(env.SPECD_NVIM_WAIT_MS), function()
    return #ghost_marks() > 0
  end)
  result.ghost = ghost()
  result.ghost_after_ms = vim.uv.now() - typed_at
  result.statusline = require('specd').statusline()
  result.before_accept = snapshot()

  local typed_line = result.typed.lines[#result.typed.lines]
  vim.api.nvim_input(env.SPECD_NVIM_WORD_KEY)
  wait_for('the word taken', 5000, function()
    return vim.api.nvim_get_current_line() ~= typed_line
  end)
  result.word_taken = snapshot()
  wait_for('the rest of the ghost text', 60000, function()
    return #ghost_marks() > 0
  end)
  result.rest = ghost()

  local before_tab = vim.api.nvim_get_current_line()
  vim.api.nvim_input(key)
  wait_for('the accepted text', 5000, function()
    return vim.api.nvim_get_current_line() ~= before_tab
  end)
  sleep(100)
  result.accepted = snapshot()
  result.ghosts_after_accept = #ghost_marks()
end

--- On a new function: the line key takes the ghost text's first line; the next ghost text is
--- left with Escape.
local function take_a_line_then_escape()
  vim.api.nvim_input('<CR><CR><CR>def fib_sum(n):<CR>')
  type_text(env.SPECD_NVIM_NEXT_TYPE, 80)
  wait_for('the ghost text on the new function', 120000, function()
    return #ghost_marks() > 0
  end)
  result.line_ghost = ghost()
  local before = vim.api.nvim_get_current_line()
  vim.api.nvim_input(env.SPECD_NVIM_LINE_KEY)
  wait_for('the line taken', 5000, function()
    return vim.api.nvim_get_current_line() ~= before
  end)
  result.line_taken = snapshot()
  vim.api.nvim_input('<CR><CR><CR>def fib_max(n):<CR>')
  type_text('    return max(', 80)
  wait_for('ghost text to leave', 120000, function()
    return #ghost_marks() > 0
  end)
  vim.api.nvim_input('<Esc>')
  sleep(50)
  result.ghosts_after_escape = #ghost_marks()
  result.escaped_mode = vim.api.nvim_get_mode().mode
end

local function play()
  local key = env.SPECD_NVIM_KEY
  open_and_attach(key)
  rest_the_cursor()
  press_without_suggestion(key)
  type_and_accept(key)
  take_a_line_then_escape()
  vim.cmd('checkhealth specd')
  result.health = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  finish(nil)
end

vim.o.autoindent = false
vim.o.expandtab = false
H.play(play)
