-- editors/nvim with automatic suggestions off (`trigger = { auto = false }`), in a real headless
-- Neovim: appends $SPECD_NVIM_TYPE to the last line of $SPECD_NVIM_FILE, lets Neovim's automatic
-- requests be answered (with nothing, auto being off), then presses the suggest key
-- ($SPECD_NVIM_KEY) and waits for the ghost text, and accepts it with <Tab>. Every inline
-- completion request the client sends is recorded with its trigger kind and how many items came
-- back. What it saw goes to $SPECD_NVIM_RESULT; tests/editors/test_nvim_trigger.py judges it.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'harness.lua'))
local env = vim.env
local result = H.result
result.requests = {}

local function await(what, done)
  H.wait_for(what, tonumber(env.SPECD_NVIM_WAIT_MS), done)
end

--- Records each inline completion request on its way out, and its answer on its way back.
local function record(client)
  local request = client.request
  client.request = function(self, method, params, handler, ...)
    if method == 'textDocument/inlineCompletion' then
      local sent = { kind = params.context.triggerKind }
      table.insert(result.requests, sent)
      local show = handler
      handler = function(err, answer, ...)
        sent.items = answer and #(answer.items or answer) or 0
        sent.error = err and err.message or nil
        return show(err, answer, ...)
      end
    end
    return request(self, method, params, handler, ...)
  end
end

local function all_answered()
  for _, sent in ipairs(result.requests) do
    if sent.items == nil and sent.error == nil then
      return false
    end
  end
  return #result.requests > 0
end

local function play()
  require('specd').setup({
    cmd = vim.json.decode(env.SPECD_NVIM_CMD), filetypes = { 'python' },
    suggest_key = env.SPECD_NVIM_KEY, trigger = { auto = false },
  })
  vim.cmd.edit(vim.fn.fnameescape(env.SPECD_NVIM_FILE))
  local client
  await('specd to attach', function()
    client = vim.lsp.get_clients({ bufnr = 0, name = 'specd' })[1]
    return client ~= nil and client.initialized and vim.lsp.inline_completion.is_enabled({ bufnr = 0 })
  end)
  H.sleep(100) -- the inline-completion capability attaches on the next event-loop turn
  result.init_options = client.config.init_options
  local map = vim.fn.maparg(env.SPECD_NVIM_KEY, 'i', false, true)
  result.mapping = { buffer = map.buffer, desc = map.desc }
  record(client)

  vim.api.nvim_input('GA')
  for ch in env.SPECD_NVIM_TYPE:gmatch('.') do
    vim.api.nvim_input(ch)
    H.sleep(80)
  end
  H.sleep(400) -- past Neovim's 200 ms debounce: the last key's automatic request is out
  await('the automatic requests to be answered', all_answered)
  result.automatic = vim.deepcopy(result.requests)
  result.ghosts_before_key = #H.ghost_marks()

  vim.api.nvim_input(env.SPECD_NVIM_KEY)
  await('the ghost text', function() return #H.ghost_marks() > 0 end)
  result.invoked = result.requests[#result.requests]
  local mark = H.ghost_marks()[1]
  result.ghost = table.concat(vim.tbl_map(function(chunk) return chunk[1] end, mark[4].virt_text or {}))
  result.ghost_lines = #(mark[4].virt_lines or {})
  result.before = vim.api.nvim_get_current_line()

  vim.api.nvim_input('<Tab>')
  await('the accepted text', function() return vim.api.nvim_get_current_line() ~= result.before end)
  result.after = vim.api.nvim_buf_get_lines(0, 0, -1, true)
  vim.api.nvim_input('<Esc>')
  H.sleep(20)
  H.finish(nil)
end

H.play(play)
