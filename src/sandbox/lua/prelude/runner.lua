-- The prelude's last module (after env.lua): the runner, one plugin run from environment to checked
-- result. It also names the library functions for error messages and clears the state's globals, then
-- returns what lua.runtime.ts calls: `run` and `gc`.
local _, P = ...
local active, new_env, copy = P.active, P.new_env, P.copy
local string_lib, string_meta = P.string_lib, P.string_meta
local os_time, os_date, os_difftime = P.os_time, P.os_date, P.os_difftime

local type, next, tostring, rawget = type, next, tostring, rawget
local error, pcall, assert, ipairs, select, tonumber, xpcall = error, pcall, assert, ipairs, select, tonumber, xpcall
local getmetatable, pairs, rawequal, rawlen, rawset = getmetatable, pairs, rawequal, rawlen, rawset
local collectgarbage = collectgarbage
local setupvalue = debug.setupvalue
local sub, find, format = string.sub, string.find, string.format
local randomseed = math.randomseed

local CYCLE, TOO_BIG, TOO_DEEP = {}, {}, {}

local function measure(value, onpath, remaining, depth)
  if type(value) == "string" then return remaining - #value - 2 end
  if type(value) ~= "table" then return remaining - 8 end
  if onpath[value] then error(CYCLE, 0) end
  if depth > 100 then error(TOO_DEEP, 0) end
  onpath[value] = true
  local k, v = next(value)
  while k ~= nil do
    remaining = measure(v, onpath, measure(k, onpath, remaining - 2, depth + 1), depth + 1)
    if remaining < 0 then error(TOO_BIG, 0) end
    k, v = next(value, k)
  end
  onpath[value] = nil
  return remaining
end

local function describe(v)
  if type(v) == "string" then return format("%q", #v > 40 and sub(v, 1, 40) .. "..." or v) end
  return type(v)
end

local function check_result(res, max_bytes)
  if type(res) ~= "table" then
    return "invalid_result", "the plugin must return a table {status=..., invoiceId=...}, got " .. type(res)
  end
  -- The usual result ({status=..., invoiceId=...} with string values) needs no walk.
  local plain, size, k, v = true, 0, next(res)
  while k ~= nil do
    if (k ~= "status" and k ~= "invoiceId" and k ~= "eventId") or type(v) ~= "string" then plain = false; break end
    size = size + #k + #v + 6
    k, v = next(res, k)
  end
  local ok, err = true, nil
  if not plain or size > max_bytes then ok, err = pcall(measure, res, {}, max_bytes, 0) end
  if not ok then
    if err == CYCLE then return "invalid_result", "the result table contains a reference cycle" end
    if err == TOO_BIG then return "invalid_result", "the result is larger than " .. max_bytes .. " bytes" end
    if err == TOO_DEEP then return "invalid_result", "the result is nested too deeply" end
    error(err, 0)
  end
  local status, id, event = rawget(res, "status"), rawget(res, "invoiceId"), rawget(res, "eventId")
  -- The provider's event id, by which the service applies each event once (optional).
  if event ~= nil and (type(event) ~= "string" or event == "" or #event > 255) then
    return "invalid_result", "eventId must be a non-empty string of at most 255 bytes, got " .. describe(event)
  end
  if status == "pushInvoice" or status == "disputeInvoice" then
    if type(id) ~= "string" or id == "" then
      return "invalid_result", "status " .. status .. " needs invoiceId, a non-empty string, got " .. describe(id)
    end
    return "ok", status, id, event
  elseif status == "ignore" then
    if id ~= nil and type(id) ~= "string" then return "invalid_result", "invoiceId must be a string, got " .. type(id) end
    return "ok", status, id, event
  end
  return "invalid_result", "status must be \"pushInvoice\", \"disputeInvoice\" or \"ignore\", got " .. describe(status)
end

local function errstring(e)
  local t = type(e)
  if t == "string" then return e end
  if t == "number" or t == "boolean" or t == "nil" then return tostring(e) end
  -- A __tostring may loop (the CPU hook stops it) or raise (pcall contains it).
  local ok, s = pcall(tostring, e)
  if ok and type(s) == "string" and not find(s, "^%a+: 0x%x+$") then return s end
  return "(error object is a " .. t .. " value)"
end

local function run(chunk, method, body, headers, query, store_id, plugin_name, plugin_version, secrets,
                   max_result_bytes, max_log_lines, seed1, seed2, clock)
  randomseed(seed1, seed2)
  local st = { reject_signal = {}, logs = 0, max_logs = max_log_lines, body = body, json_done = false, clock = clock }
  active.run = st
  local env = new_env(st, method, body, headers, query, store_id, plugin_name, plugin_version, secrets)
  setupvalue(chunk, 1, env)
  -- As in stock Lua, a function the script adds to `string` is a method of every string: the metatable
  -- leads to this run's own string table, and back to the untouched library when the run ends, so no run
  -- sees another's additions. Nothing here calls string methods, so a script's changes cannot reach it.
  string_meta.__index = env.string
  local ok, res = pcall(chunk)
  string_meta.__index = string_lib
  setupvalue(chunk, 1, nil)   -- the cached chunk must not keep this run's data alive
  local kind, a, b, c
  if st.rejected ~= nil then
    kind, a = "rejected", st.rejected
  elseif not ok then
    kind, a = "error", errstring(res)
  else
    kind, a, b, c = check_result(res, max_result_bytes)
  end
  active.run = nil
  return kind, a, b, c
end

local function full_gc()
  collectgarbage("restart")
  collectgarbage("collect")
  return collectgarbage("count")
end

-- A library error names its function as native Lua does ("bad argument #1 to 'string.rep'" when the
-- call site gives no name): luaL_argerror looks functions up in the registry's _LOADED table, which
-- scripts cannot reach and nothing else here uses.
do
  local registry = debug.getregistry()
  local loaded = registry._LOADED
  if type(loaded) ~= "table" then
    loaded = {}
    registry._LOADED = loaded
  end
  loaded.string, loaded.table, loaded.math, loaded.utf8, loaded.coroutine = string, table, math, utf8, coroutine
  loaded.os = { time = os_time, date = os_date, clock = os.clock, difftime = os_difftime }
  loaded._G = {
    assert = assert, error = error, getmetatable = getmetatable, ipairs = ipairs, next = next, pairs = pairs,
    pcall = pcall, rawequal = rawequal, rawget = rawget, rawlen = rawlen, rawset = rawset, select = select,
    tonumber = tonumber, tostring = tostring, type = type, xpcall = xpcall,
  }
end

-- The state's own globals are not needed any more; clearing them makes sure nothing above
-- depends on them by accident (every function here works on the locals captured at the top).
local G = _G
for k in next, copy(G) do G[k] = nil end

return { run = run, gc = full_gc }
