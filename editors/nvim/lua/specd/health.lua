--- `:checkhealth specd`: what a user checks when no ghost text shows. The Neovim, the `specd`
--- command, the models (`specd models`), the daemon (`specd status`: up, its device, its socket
--- owner-only as specd makes it), and which buffers specd serves now.
local M = {}

local TIMEOUT_MS = 60000

--- `cmd`'s result ({code, stdout, stderr}), or nil and why it could not run.
local function run(cmd)
  local ok, done = pcall(function()
    return vim.system(cmd, { text = true }):wait(TIMEOUT_MS)
  end)
  if not ok then
    return nil, tostring(done)
  end
  return done
end

--- The value of `name`'s line in `specd status`'s output ("device    cpu: ..." -> "cpu: ...").
local function field(status, name)
  return status:match('\n' .. name .. '%s+([^\n]*)')
end

local function check_neovim()
  vim.health.start('specd: Neovim')
  if vim.lsp.inline_completion then
    vim.health.ok(('Neovim %s has vim.lsp.inline_completion'):format(tostring(vim.version())))
  else
    vim.health.error('Neovim 0.12 or newer is needed (vim.lsp.inline_completion)')
  end
  if not require('specd').options then
    vim.health.warn("setup() has not run", { "call require('specd').setup{} in your config" })
  end
end

local function check_command(exe)
  vim.health.start('specd: the command')
  if vim.fn.executable(exe) == 1 then
    vim.health.ok(('%s (%s)'):format(exe, vim.fn.exepath(exe)))
    return true
  end
  vim.health.error(('%s is not an executable on PATH'):format(exe), {
    'install specd (its README, "Install"), or set `cmd` in setup{} to its full path',
  })
  return false
end

local function check_models(exe)
  vim.health.start('specd: models')
  local done, why = run({ exe, 'models' })
  if not done or done.code ~= 0 then
    vim.health.error('`specd models` failed: ' .. (why or done.stderr), { 'run `specd models` in a shell' })
    return
  end
  for line in done.stdout:gmatch('[^\n]+') do
    local role, converted = line:match('^(%a+)%s+(%a+)')
    if role == 'target' or role == 'draft' then
      local report = converted == 'yes' and vim.health.ok or vim.health.warn
      report(line, converted == 'yes' and {} or { '`specd models pull` fetches the built-in pair' })
    end
  end
end

--- The socket and its folder must be the user's alone (specd makes them 0600 and 0700).
local function check_socket(path)
  local socket, folder = vim.uv.fs_stat(path), vim.uv.fs_stat(vim.fs.dirname(path))
  if not socket or not folder then
    vim.health.error('the socket ' .. path .. ' is gone')
    return
  end
  local mine = socket.uid == vim.uv.getuid() and folder.uid == vim.uv.getuid()
  local private = bit.band(socket.mode, 63) == 0 and bit.band(folder.mode, 63) == 0 -- no group or other bits
  if mine and private then
    vim.health.ok(('socket %s: yours alone (%o, its folder %o)'):format(path, bit.band(socket.mode, 511),
      bit.band(folder.mode, 511)))
  else
    vim.health.error(('socket %s is not yours alone (%o, its folder %o)'):format(path, bit.band(socket.mode, 511),
      bit.band(folder.mode, 511)), { '`specd stop`, then `specd start`: it makes both owner-only' })
  end
end

local function check_daemon(exe)
  vim.health.start('specd: daemon')
  local done, why = run({ exe, 'status' })
  if not done then
    vim.health.error('`specd status` failed: ' .. why)
    return
  end
  if done.code ~= 0 then
    vim.health.info(vim.trim(done.stdout .. done.stderr)
      .. ': it starts with the first buffer specd serves, or `specd start`')
    return
  end
  local status = '\n' .. done.stdout
  vim.health.ok(vim.trim(done.stdout:match('^[^\n]*')))
  for _, name in ipairs({ 'device', 'memory', 'latency', 'taken' }) do
    local value = field(status, name)
    if value then
      vim.health.info(name .. ': ' .. value)
    end
  end
  local socket = field(status, 'socket')
  if socket then
    check_socket(socket:match('^[^,]+'))
  end
end

local function check_buffers()
  vim.health.start('specd: buffers')
  local clients = vim.lsp.get_clients({ name = 'specd' })
  if #clients == 0 then
    vim.health.info('specd lsp is not running: it starts when a buffer of one of its filetypes opens')
    return
  end
  for _, client in ipairs(clients) do
    local buffers = vim.tbl_map(vim.api.nvim_buf_get_name, vim.tbl_keys(client.attached_buffers))
    vim.health.ok(('specd lsp (client %d) serves %d buffer(s): %s'):format(client.id, #buffers,
      table.concat(buffers, ', ')))
  end
end

function M.check()
  check_neovim()
  local exe = (require('specd').options or require('specd').defaults).cmd[1]
  if check_command(exe) then
    check_models(exe)
    check_daemon(exe)
  end
  check_buffers()
end

return M
