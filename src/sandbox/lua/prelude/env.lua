-- The prelude's environment module (after math.lua): the host API a plugin calls (log, print, fetch,
-- getInvoice, reject, require, load) and `new_env`, which builds each run's brand-new environment whose
-- library tables are fresh copies, so nothing one script changes is visible to the next one.
-- The functions are shared by all runs (a function value holds no state a script can change); what
-- belongs to one run lives in `active.run` (base.lua).
local H, P = ...
local active, encode, decode, new_json = P.active, P.encode, P.decode, P.new_json
local new_string, new_table, new_utf8, new_coroutine = P.new_string, P.new_table, P.new_utf8, P.new_coroutine
local new_math, new_os = P.new_math, P.new_os

local type, next, pairs, select, tostring, tonumber = type, next, pairs, select, tostring, tonumber
local rawget, rawset, rawequal, rawlen = rawget, rawset, rawequal, rawlen
local error, pcall, xpcall, assert, ipairs, VERSION = error, pcall, xpcall, assert, ipairs, _VERSION
local setmetatable, getmetatable = setmetatable, getmetatable
local load, collectgarbage = load, collectgarbage
local lower, concat = string.lower, table.concat
local metatable_of = debug.getmetatable

local function run_state(fname)
  local st = active.run
  if st == nil then error(fname .. " called outside a plugin run", 3) end
  return st
end

local LOG_TYPES = { info = "info", warning = "warning", warn = "warning", error = "error" }

local function log(description, kind)
  local st = run_state("log")
  local count = st.logs
  if count >= st.max_logs then
    -- Past the limit lines are dropped without leaving Lua; the host is told once.
    if count == st.max_logs then st.logs = count + 1; H.logoverflow() end
    return
  end
  if type(description) ~= "string" then description = tostring(description) end
  local t = "info"
  if kind ~= nil then t = LOG_TYPES[lower(tostring(kind))] or "info" end
  st.logs = count + 1
  H.log(description, t)
end

local function print_(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
  log(concat(parts, "\t"))
end

local function get_json(st)
  local json = st.json
  if json == nil then
    json = new_json()
    st.json = json
  end
  return json
end

local function fetch(url, options)
  if type(url) ~= "string" then error("fetch: url must be a string, got " .. type(url), 2) end
  local method, headers, body, timeout = "GET", nil, nil, nil
  if options ~= nil then
    if type(options) ~= "table" then error("fetch: options must be a table, got " .. type(options), 2) end
    if options.method ~= nil then
      if type(options.method) ~= "string" then error("fetch: options.method must be a string", 2) end
      method = options.method
    end
    if options.headers ~= nil then
      if type(options.headers) ~= "table" then error("fetch: options.headers must be a table", 2) end
      local flat = setmetatable({}, { __jsontype = "object" })
      for k, v in pairs(options.headers) do
        if type(k) ~= "string" or (type(v) ~= "string" and type(v) ~= "number") then
          error("fetch: header names and values must be strings", 2)
        end
        flat[k] = tostring(v)
      end
      headers = encode(flat)
    end
    if options.body ~= nil then
      if type(options.body) ~= "string" then error("fetch: options.body must be a string (use json.encode for tables)", 2) end
      body = options.body
    end
    if options.timeout ~= nil then
      timeout = tonumber(options.timeout)
      if not timeout then error("fetch: options.timeout must be a number of milliseconds", 2) end
    end
  end
  run_state("fetch")
  local status, resp_headers, resp_body = H.fetch(url, method, headers, body, timeout)
  if not status then return nil, resp_headers end
  return { status = status, ok = status >= 200 and status <= 299, headers = resp_headers, body = resp_body }
end

local function get_invoice(id)
  if type(id) ~= "string" then error("getInvoice: id must be a string, got " .. type(id), 2) end
  run_state("getInvoice")
  local text, failure = H.invoice(id)
  if failure then error("getInvoice: " .. failure, 2) end
  if text == nil then return nil end
  return (decode(text))
end

local function reject(message)
  local st = run_state("reject")
  if st.rejected == nil then
    st.rejected = message == nil and "rejected by the plugin" or tostring(message)
  end
  error(st.reject_signal, 0)
end

local function require_(name)
  if name == "json" or name == "dkjson" then return get_json(run_state("require")) end
  error("module '" .. tostring(name) .. "' not found: plugins can only require 'json' or 'dkjson'", 2)
end

local function load_(chunk, chunkname, _mode, ...)
  -- Text only (bytecode is not verified by the VM), and the run's environment unless one is given.
  if select("#", ...) == 0 then return load(chunk, chunkname, "t", run_state("load").env) end
  return load(chunk, chunkname, "t", (...))
end

local GC_ALLOWED = { collect = true, count = true, step = true, isrunning = true }

local function safe_collectgarbage(opt, ...)
  if opt == nil then opt = "collect" end
  if not GC_ALLOWED[opt] then error("collectgarbage('" .. tostring(opt) .. "') is not allowed in plugins", 2) end
  return collectgarbage(opt, ...)
end

-- a <= b through __lt. Stock Lua 5.4 is built with LUA_COMPAT_5_3, whose LUA_COMPAT_LT_LE makes the VM
-- answer a <= b with not (b < a) when neither operand's metatable has __le; this VM was built without it
-- and raises "attempt to compare". The VM reads metamethods raw from metatables, so setmetatable is the
-- only place to act: a metatable with __lt and no __le is given this __le, which does what stock's VM does.
local function objtypename(v)
  local mt = metatable_of(v)
  local name = type(mt) == "table" and rawget(mt, "__name") or nil
  if type(name) == "string" then return name end
  return type(v)
end

local function le_through_lt(a, b)
  -- The VM found this __le on a, or on b when a had none. Stock would still prefer b's own __le,
  -- then __lt from b, then from a, called as (b, a) either way.
  local mb, ma = metatable_of(b), metatable_of(a)
  mb = type(mb) == "table" and mb or nil
  local le = mb and rawget(mb, "__le")
  if le ~= nil and le ~= le_through_lt then return le(a, b) end
  local lt = mb and rawget(mb, "__lt")
  if lt == nil and type(ma) == "table" then lt = rawget(ma, "__lt") end
  if lt == nil then -- __lt was removed after setmetatable
    local t1, t2 = objtypename(a), objtypename(b)
    if t1 == t2 then error("attempt to compare two " .. t1 .. " values", 2) end
    error("attempt to compare " .. t1 .. " with " .. t2, 2)
  end
  return not lt(b, a)
end

-- Finalizers would run during a later run (another store's), so objects cannot get one.
local function safe_setmetatable(t, mt)
  if type(mt) == "table" and rawget(mt, "__gc") ~= nil then error("__gc metamethods are not allowed in plugins", 2) end
  -- Checked here so that the error names the script's line, not this one.
  if type(t) ~= "table" then error("bad argument #1 to 'setmetatable' (table expected, got " .. (t == nil and "no value" or type(t)) .. ")", 2) end
  if mt ~= nil and type(mt) ~= "table" then error("bad argument #2 to 'setmetatable' (nil or table expected)", 2) end
  local ok, err = pcall(setmetatable, t, mt)
  if not ok then error(err, 2) end -- "cannot change a protected metatable"
  if mt ~= nil and rawget(mt, "__lt") ~= nil and rawget(mt, "__le") == nil then rawset(mt, "__le", le_through_lt) end
  return t
end

local function readonly_newindex() error("secrets is read-only", 2) end

-- request.json is decoded on first use: most of the cost of a run is the body, not the script.
local function request_index(t, k)
  if k ~= "json" then return nil end
  local st = active.run
  if st == nil or st.request ~= t then return nil end
  if not st.json_done then
    st.json_done = true
    st.decoded = decode(st.body)
    if st.decoded ~= nil then rawset(t, "json", st.decoded) end
  end
  return st.decoded
end

local function new_env(st, method, body, headers, query, store_id, plugin_name, plugin_version, secrets)
  local request = setmetatable({ method = method, body = body, headers = headers, query = query }, { __index = request_index })
  st.request = request
  local env = {
    assert = assert, error = error, getmetatable = getmetatable, ipairs = ipairs, next = next, pairs = pairs,
    pcall = pcall, rawequal = rawequal, rawget = rawget, rawlen = rawlen, rawset = rawset, select = select,
    tonumber = tonumber, tostring = tostring, type = type, xpcall = xpcall, _VERSION = VERSION,
    setmetatable = safe_setmetatable, collectgarbage = safe_collectgarbage, load = load_, require = require_,
    print = print_, log = log, insertLog = log, fetch = fetch, getInvoice = get_invoice, reject = reject,
    string = new_string(), table = new_table(), math = new_math(), utf8 = new_utf8(),
    coroutine = new_coroutine(), os = new_os(),
    json = get_json(st),
    hmacShaSign = H.hmac, sha = H.sha, timingSafeEqual = H.timingsafeequal,
    base64 = { encode = H.b64encode, decode = H.b64decode },
    request = request,
    store = { id = store_id },
    plugin = { name = plugin_name, version = plugin_version },
    secrets = setmetatable({}, {
      __index = secrets, __newindex = readonly_newindex, __metatable = false,
      __pairs = function() return next, secrets, nil end,
    }),
  }
  env._G = env
  st.env = env
  return env
end

P.new_env = new_env
