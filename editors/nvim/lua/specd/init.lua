--- specd for Neovim 0.12: starts `specd lsp` for chosen filetypes, shows its completions as ghost
--- text (vim.lsp.inline_completion) and maps a key that accepts the ghost text when there is one
--- and otherwise does what the key does without the mapping. Where the cursor rests outside insert
--- mode (a file opened or entered, a jump), it tells specd (`specd/didFocus`), which reads the
--- document there ahead of the first key. When to ask is the server's `[trigger]` rules, which
--- `trigger` overrides; `suggest_key` asks by hand (LSP's trigger kind Invoked), which the server
--- serves even with automatic suggestions off. Leaving insert mode while ghost text shows (Escape)
--- tells specd the suggestion was dismissed (`specd/didDismissCompletion`), for its uptake counts.
local M = {}

local NAME = 'specd'
local DID_FOCUS = 'specd/didFocus'
local PARTIAL = 'textDocument/didPartiallyAcceptCompletion' -- Copilot's name: specd counts it
local DISMISS = 'specd/didDismissCompletion'

M.defaults = {
  --- How to start the language server (it starts the daemon itself when none answers).
  cmd = { 'specd', 'lsp' },
  filetypes = {
    'c', 'cpp', 'cs', 'css', 'go', 'html', 'java', 'javascript', 'javascriptreact', 'json', 'lua',
    'markdown', 'php', 'python', 'ruby', 'rust', 'sh', 'sql', 'toml', 'typescript',
    'typescriptreact', 'yaml', 'zig',
  },
  --- Insert-mode key that accepts the ghost text; without one it types as usual. false: no mapping.
  accept_key = '<Tab>',
  --- Insert-mode keys that take the ghost text's next word, or the rest of its line, and leave
  --- the rest shown; without ghost text they do what they do unmapped. false: no mapping.
  accept_word_key = '<M-Right>',
  accept_line_key = '<M-C-Right>',
  --- Insert-mode key that asks for a suggestion here, by hand. false: no mapping.
  suggest_key = '<M-\\>',
  --- ms the cursor rests outside insert mode before specd is told where (false: never told).
  focus_ms = 300,
  --- Over specd's `[trigger]` config (a field left out keeps the config's): auto (boolean),
  --- delay_ms (integer), languages ({ [filetype] = boolean, ['*'] = boolean }), max_line_suffix
  --- (integer, -1: never). Sent as init_options.trigger; the server checks them.
  trigger = {},
  --- Extra fields for vim.lsp.config (cmd_env, init_options, settings, on_attach, ...).
  lsp = {},
}

--- Accepts the ghost text shown in the current buffer, else returns `key` for the expr mapping
--- to type as if nothing were mapped. (get() inserts on the next event-loop turn.)
local function accept_or(key)
  return function()
    if vim.lsp.inline_completion.get() then
      return ''
    end
    return key
  end
end

--- The part of `text` that "next word" or "next line" takes: blanks (line ends included) then a
--- word, or a run of other characters; or up to the first line's end (all of the next line where
--- the text starts a new one).
local function part_of(text, unit)
  if unit == 'word' then
    return text:match('^%s*[%w_]+') or text:match('^%s*[^%w_%s]+') or text
  end
  return text:match('^\n?[^\n]*')
end

--- Inserts `part` of the item at its start and puts the cursor after it. A part leaves the
--- range's end alone (what the whole would replace stays until the whole is taken); the whole
--- replaces the range, as Tab does.
local function insert(buf, item, part, whole)
  local start, stop = item.range.start, whole and item.range.end_ or item.range.start
  local lines = vim.split(part, '\n')
  vim.api.nvim_buf_set_text(buf, start.row, start.col, stop.row, stop.col, lines)
  vim.api.nvim_win_set_cursor(0, { start.row + #lines, (#lines == 1 and start.col or 0) + #lines[#lines] })
end

--- Takes the next word or line of the ghost text (an on_accept of vim.lsp.inline_completion.get)
--- and tells specd how much of the item was taken: Copilot's notification for a part, the item's
--- command (as Tab runs it) for what turns out to be all of it. specd's items are plain text
--- with a range; any other is left alone.
local function take_part(unit)
  return function(item)
    local buf = vim.api.nvim_get_current_buf()
    local client = vim.lsp.get_client_by_id(item.client_id)
    local text = item.insert_text
    if type(text) ~= 'string' or not item.range or not client then
      return
    end
    local part = part_of(text, unit)
    insert(buf, item, part, part == text)
    if part ~= text then
      client:notify(PARTIAL, { item = { insertText = text, command = item.command }, acceptedLength = vim.fn.strchars(part) })
    elseif item.command then
      client:exec_cmd(item.command, { bufnr = buf })
    end
  end
end

--- Takes part of the ghost text shown, else returns `key` for the expr mapping to type.
local function accept_part_or(key, unit)
  return function()
    if vim.lsp.inline_completion.get({ on_accept = take_part(unit) }) then
      return ''
    end
    return key
  end
end

--- Neovim 0.12's per-buffer inline-completion state (vim.lsp._capability), which has no public
--- call to ask by hand or to see the item on screen; nil where this Neovim has none.
local function completor_of(buf)
  local ok, capability = pcall(require, 'vim.lsp._capability')
  return ok and capability.all.inline_completion and capability.all.inline_completion.active[buf] or nil
end

--- Asks for inline completion at the cursor by hand: the answer is then shown, cycled and
--- accepted as any other. The pending automatic request is dropped first: sent after this one,
--- it would make this one stale in the server (newest wins).
local function suggest_here()
  local completor = completor_of(vim.api.nvim_get_current_buf())
  if not (completor and completor.request and completor.reset_timer) then
    vim.notify('specd: this Neovim cannot ask for inline completion by hand', vim.log.levels.WARN)
    return
  end
  completor:reset_timer()
  completor:request(vim.lsp.protocol.InlineCompletionTriggerKind.Invoked)
end

--- Tells specd where the cursor rests in `buf` once it has rested `ms` there: each move restarts
--- the wait, so a scroll or a run of jumps sends one notification, for where it ended.
local function send_focus_after_rest(buf, group, ms)
  local timer = assert(vim.uv.new_timer())
  local function send()
    if not vim.api.nvim_buf_is_valid(buf) or vim.api.nvim_get_current_buf() ~= buf then
      return
    end
    local client = vim.lsp.get_clients({ bufnr = buf, name = NAME })[1]
    if client and not vim.startswith(vim.api.nvim_get_mode().mode, 'i') then
      client:notify(DID_FOCUS, vim.lsp.util.make_position_params(0, client.offset_encoding))
    end
  end
  local function restart()
    timer:stop()
    timer:start(ms, 0, vim.schedule_wrap(send))
  end
  vim.api.nvim_create_autocmd({ 'BufEnter', 'CursorMoved' }, { group = group, buffer = buf, callback = restart })
  vim.api.nvim_create_autocmd('BufWipeout', {
    group = group,
    buffer = buf,
    callback = function()
      timer:stop()
      timer:close()
    end,
  })
  restart() -- attached: the file was just opened, its cursor rests where it was put
end

--- Tells specd when insert mode is left while its ghost text shows (InsertLeavePre: Neovim hides
--- the item at InsertLeave): the suggestion was dismissed. One taken whole or typed over before is
--- already settled there, and the server ignores the report.
local function dismiss_on_leave(buf, group)
  vim.api.nvim_create_autocmd('InsertLeavePre', {
    group = group,
    buffer = buf,
    callback = function()
      local completor = completor_of(buf)
      local item = completor and completor.current
      local client = item and item.command and vim.lsp.get_client_by_id(item.client_id)
      if client and client.name == NAME then
        client:notify(DISMISS, { item = { command = item.command } })
      end
    end,
  })
end

--- The last suggestion's round trip, for M.statusline: each inlineCompletion request of the
--- client is timed from when Neovim sends it to its answer.
local last = { ms = nil, shown = false }

local function time_requests(client)
  if client._specd_timed then
    return
  end
  client._specd_timed = true
  local request = client.request
  client.request = function(self, method, params, handler, ...)
    if method == 'textDocument/inlineCompletion' and handler then
      local sent, answer = vim.uv.hrtime(), handler
      handler = function(err, result, ...)
        if not err then
          local items = result and (result.items or result) or {}
          last = { ms = (vim.uv.hrtime() - sent) / 1e6, shown = #items > 0 }
        end
        return answer(err, result, ...)
      end
    end
    return request(self, method, params, handler, ...)
  end
end

--- For 'statusline': "" where specd does not serve the buffer; else "specd", "specd: starting",
--- "specd: stopped", or "specd 312ms" (the last suggestion's round trip; "specd 312ms (none)" if
--- it brought no suggestion).
--- E.g. `vim.o.statusline = '%f %= %{v:lua.require("specd").statusline()}'`.
function M.statusline()
  local buf = vim.api.nvim_get_current_buf()
  local client = vim.lsp.get_clients({ bufnr = buf, name = NAME })[1]
  if not client then
    local known = M.options and vim.tbl_contains(M.options.filetypes, vim.bo[buf].filetype)
    return known and #vim.lsp.get_clients({ name = NAME }) == 0 and M.started and 'specd: stopped' or ''
  end
  if client:is_stopped() then
    return 'specd: stopped'
  end
  if not client.initialized then
    return 'specd: starting'
  end
  if not last.ms then
    return 'specd'
  end
  return ('specd %dms%s'):format(math.floor(last.ms + 0.5), last.shown and '' or ' (none)')
end

--- Turns inline completion on for a buffer specd attached to, and maps the accept key there.
local function on_specd_attach(buf, opts, group)
  vim.lsp.inline_completion.enable(true, { bufnr = buf })
  if opts.accept_key then
    vim.keymap.set('i', opts.accept_key, accept_or(opts.accept_key), {
      buffer = buf,
      expr = true,
      desc = 'specd: accept the ghost text, else ' .. opts.accept_key,
    })
  end
  for unit, key in pairs({ word = opts.accept_word_key, line = opts.accept_line_key }) do
    if key then
      vim.keymap.set('i', key, accept_part_or(key, unit), {
        buffer = buf,
        expr = true,
        desc = ('specd: take the ghost text\'s next %s, else %s'):format(unit, key),
      })
    end
  end
  if opts.suggest_key then
    vim.keymap.set('i', opts.suggest_key, suggest_here, { buffer = buf, desc = 'specd: suggest here' })
  end
  if opts.focus_ms then
    send_focus_after_rest(buf, group, opts.focus_ms)
  end
  dismiss_on_leave(buf, group)
end

--- @param opts? {cmd?: string[], filetypes?: string[], accept_key?: string|false, accept_word_key?: string|false, accept_line_key?: string|false, suggest_key?: string|false, focus_ms?: integer|false, trigger?: table, lsp?: table}
function M.setup(opts)
  opts = vim.tbl_deep_extend('force', M.defaults, opts or {})
  M.options = opts -- for :checkhealth specd and M.statusline
  assert(vim.lsp.inline_completion, 'specd: needs Neovim 0.12 (vim.lsp.inline_completion)')

  local lsp = vim.deepcopy(opts.lsp)
  if next(opts.trigger) then
    lsp.init_options = vim.tbl_deep_extend('force', lsp.init_options or {}, { trigger = opts.trigger })
  end
  vim.lsp.config(NAME, vim.tbl_extend('force', {
    cmd = opts.cmd,
    filetypes = opts.filetypes,
    -- specd needs no project root: one server for the whole editor, so every open document
    -- can serve as context for the others.
    root_dir = function(_, on_dir) on_dir(vim.fn.getcwd()) end,
    reuse_client = function(client, config) return client.name == config.name end,
  }, lsp))

  local group = vim.api.nvim_create_augroup('specd', { clear = true })
  vim.api.nvim_create_autocmd('LspAttach', {
    group = group,
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      if client and client.name == NAME then
        M.started = true
        time_requests(client)
        on_specd_attach(args.buf, opts, group)
      end
    end,
  })
  vim.lsp.enable(NAME)
end

return M
