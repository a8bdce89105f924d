-- What the real-Neovim scripts share: a coroutine that plays a person, its pauses and waits, the
-- ghost text's extmarks, and the result, written as JSON to $SPECD_NVIM_RESULT for the Python test
-- to judge, after which Neovim quits. Load it with dofile (the scripts run with `-u NONE`).
--
-- Keys go in with nvim_input from a coroutine resumed by vim.defer_fn, so Neovim processes them
-- as typing (vim.wait does not process them; nvim_feedkeys with 'x!' hangs with no UI).
local H = { result = {}, ns = vim.api.nvim_create_namespace('nvim.lsp.inline_completion') }
local co

function H.finish(err)
  H.result.error = err
  vim.fn.writefile({ vim.json.encode(H.result) }, vim.env.SPECD_NVIM_RESULT)
  vim.cmd('qall!')
end

local function resume()
  local ok, err = coroutine.resume(co)
  if not ok then
    H.finish(debug.traceback(co, err))
  end
end

function H.sleep(ms)
  vim.defer_fn(resume, ms)
  coroutine.yield()
end

function H.wait_for(what, timeout_ms, done)
  local deadline = vim.uv.now() + timeout_ms
  while not done() do
    assert(vim.uv.now() < deadline, ('timed out after %d ms waiting for %s'):format(timeout_ms, what))
    H.sleep(50)
  end
end

function H.ghost_marks()
  return vim.api.nvim_buf_get_extmarks(0, H.ns, 0, -1, { details = true })
end

--- Runs `play` as the person, once Neovim has started; it ends with H.finish.
function H.play(play)
  vim.g.loaded_python3_provider = 0
  vim.cmd('filetype on')
  co = coroutine.create(play)
  vim.defer_fn(resume, 0)
end

return H
