-- Trusted Lua, loaded once into each Lua state before any plugin runs (see lua.runtime.ts).
-- It keeps private references to the standard library, removes what plugins must never reach,
-- and returns the runner: every run gets a brand-new environment whose tables are fresh copies,
-- so nothing one script changes is visible to the next one. Plugins cannot reach this chunk's
-- locals: their chunk's _ENV is replaced by the per-run environment before it runs.
local H = ...   -- host functions implemented in JavaScript (lua.host.ts), plain C functions without state

local type, next, pairs, select, tostring, tonumber = type, next, pairs, select, tostring, tonumber
local rawget, rawset, rawequal, rawlen = rawget, rawset, rawequal, rawlen
local error, pcall, xpcall, assert, ipairs, VERSION = error, pcall, xpcall, assert, ipairs, _VERSION
local setmetatable, getmetatable = setmetatable, getmetatable
local load, collectgarbage = load, collectgarbage
local setupvalue = debug.setupvalue
local byte, sub, find, gsub, format, lower, rep = string.byte, string.sub, string.find, string.gsub, string.format, string.lower, string.rep
local concat = table.concat
local floor, huge, randomseed = math.floor, math.huge, math.randomseed
local utf8char, char = utf8.char, string.char

-- string.dump would hand out bytecode; it goes from the real library too, because the string
-- metatable's __index (what ("x"):method() uses) is that real table. The metatable itself is
-- locked so scripts can neither read nor change it: getmetatable("") returns false.
string.dump = nil
getmetatable("").__metatable = false

local function copy(src)
  local t = {}
  for k, v in next, src do t[k] = v end
  return t
end

-- Returns a function that builds a fresh copy of `src` with one presized table constructor
-- (copying key by key would rehash the table several times on every run).
local function copier(name, src)
  local keys = {}
  for k in next, src do keys[#keys + 1] = k end
  table.sort(keys)
  local fields = {}
  for i, k in ipairs(keys) do fields[i] = format("[%q] = src[%q]", k, k) end
  local code = "local src = ...\nreturn function() return {" .. concat(fields, ", ") .. "} end"
  return load(code, "=[sandbox:" .. name .. "]", "t", {})(copy(src))
end

-- Builders of the per-run library tables.
local new_string, new_table, new_math = copier("string", string), copier("table", table), copier("math", math)
local new_utf8, new_coroutine = copier("utf8", utf8), copier("coroutine", coroutine)
local new_os = copier("os", { time = os.time, date = os.date, clock = os.clock })

---------------------------------------------------------------------------------------------------
-- JSON, compatible with dkjson: same function names and options, `json.null`, decoded objects and
-- arrays carry {__jsontype="object"|"array"} metatables so `{}` and `[]` survive a round trip,
-- empty plain tables encode as `[]`. Differences (documented in docs/plugins.md, `json`): decode errors
-- return `nil, message`; without a start position the whole string must be one JSON value.
---------------------------------------------------------------------------------------------------

local ENCODE_ERROR = {}
local MAX_DEPTH = 1000

local ESCAPES = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }
for i = 0, 31 do
  local c = char(i)
  if not ESCAPES[c] then ESCAPES[c] = format("\\u%04x", i) end
end
ESCAPES["\127"] = "\\u007f"
local SEPARATORS = { ["\226\128\168"] = "\\u2028", ["\226\128\169"] = "\\u2029" }

local function quotestring(s)
  if find(s, '[%z\1-\31"\\\127\226]') then
    s = gsub(s, '[%z\1-\31"\\\127]', ESCAPES)
    s = gsub(s, "\226\128[\168\169]", SEPARATORS)
  end
  return '"' .. s .. '"'
end

local function isarray(t)
  local max, n, arraylen = 0, 0, 0
  for k, v in pairs(t) do
    if k == "n" and type(v) == "number" then
      arraylen = v
      if v > max then max = v end
    else
      if type(k) ~= "number" or k < 1 or floor(k) ~= k then return false end
      if k > max then max = k end
      n = n + 1
    end
  end
  if max > 10 and max > arraylen and max > n * 2 then return false end
  return true, max
end

local function encode_fail(message) error({ ENCODE_ERROR, message }, 0) end

local encode_value

local function newline(ctx, level)
  if ctx.indent then
    local n = ctx.n + 1
    ctx.buf[n] = "\n" .. rep("  ", level)
    ctx.n = n
  end
end

local function put(ctx, s)
  local n = ctx.n + 1
  ctx.buf[n] = s
  ctx.n = n
end

local function encode_pair(ctx, k, v, first, level)
  local kt = type(k)
  if kt ~= "string" and kt ~= "number" then encode_fail("type '" .. kt .. "' is not supported as a key by JSON.") end
  if not first then put(ctx, ",") end
  newline(ctx, level)
  put(ctx, quotestring(kt == "string" and k or tostring(k)))
  put(ctx, ctx.indent and ": " or ":")
  encode_value(ctx, v, level)
end

encode_value = function(ctx, value, level)
  local vt = type(value)
  if vt == "string" then
    put(ctx, quotestring(value))
  elseif vt == "number" then
    if value ~= value or value >= huge or -value >= huge then put(ctx, "null") else put(ctx, tostring(value)) end
  elseif vt == "boolean" then
    put(ctx, value and "true" or "false")
  elseif value == nil then
    put(ctx, "null")
  elseif vt == "table" then
    local tables = ctx.tables
    if tables[value] then encode_fail("reference cycle") end
    local mt = getmetatable(value)
    if type(mt) ~= "table" then mt = nil end
    local tojson = mt and mt.__tojson
    if tojson then
      tables[value] = true
      local s, msg = tojson(value, ctx.state)
      if type(s) ~= "string" then encode_fail(msg or "custom encoder failed") end
      tables[value] = nil
      put(ctx, s)
      return
    end
    if level >= MAX_DEPTH then encode_fail("too deeply nested") end
    tables[value] = true
    level = level + 1
    local isa, n = isarray(value)
    if n == 0 and mt and mt.__jsontype == "object" then isa = false end
    if isa then
      put(ctx, "[")
      for i = 1, n do
        if i > 1 then put(ctx, ",") end
        encode_value(ctx, value[i], level)
      end
      put(ctx, "]")
    else
      put(ctx, "{")
      local first = true
      local order = mt and mt.__jsonorder or ctx.keyorder
      if order then
        local used = {}
        for i = 1, #order do
          local k = order[i]
          local v = value[k]
          if v ~= nil then
            used[k] = true
            encode_pair(ctx, k, v, first, level)
            first = false
          end
        end
        for k, v in pairs(value) do
          if not used[k] then
            encode_pair(ctx, k, v, first, level)
            first = false
          end
        end
      else
        for k, v in pairs(value) do
          encode_pair(ctx, k, v, first, level)
          first = false
        end
      end
      if not first then newline(ctx, level - 1) end
      put(ctx, "}")
    end
    tables[value] = nil
  else
    encode_fail("type '" .. vt .. "' is not supported by JSON.")
  end
end

local function encode(value, state)
  local ctx = { buf = {}, n = 0, tables = {}, state = state }
  if type(state) == "table" then
    ctx.indent = state.indent and true or false
    ctx.keyorder = type(state.keyorder) == "table" and state.keyorder or nil
  end
  local level = type(state) == "table" and tonumber(state.level) or 0
  local ok, err = pcall(encode_value, ctx, value, level)
  if not ok then
    if type(err) == "table" and err[1] == ENCODE_ERROR then error(err[2], 2) end
    error(err, 0)
  end
  return concat(ctx.buf, "", 1, ctx.n)
end

-- Reading JSON is done by the host (lua.json.ts), which builds the tables directly: the same
-- grammar and results as dkjson's reader, at a fraction of the cost of doing it in Lua.
local jsondecode = H.jsondecode

local function decode(str, pos, nullval, ...)
  if type(str) ~= "string" then return nil, "json.decode expects a string, got " .. type(str) end
  local objectmeta, arraymeta
  if select("#", ...) > 0 then
    objectmeta, arraymeta = ...
    -- The host sets these metatables from C, past safe_setmetatable: the same rule applies here, or a
    -- finalizer could run during a later run (another store's) on this Lua state.
    for _, mt in ipairs({ objectmeta or false, arraymeta or false }) do
      if type(mt) == "table" and rawget(mt, "__gc") ~= nil then error("__gc metamethods are not allowed in plugins", 2) end
    end
  else
    objectmeta, arraymeta = { __jsontype = "object" }, { __jsontype = "array" }
  end
  return jsondecode(str, tonumber(pos) or 1, pos == nil, nullval, objectmeta, arraymeta)
end

local function new_json()
  local json = { version = "dkjson 2.8 (storefront sandbox)", encode = encode, decode = decode, quotestring = quotestring }
  json.null = setmetatable({}, { __tojson = function() return "null" end })
  return json
end

---------------------------------------------------------------------------------------------------
-- The host API. The functions are shared by all runs (a function value holds no state a script
-- can change); what belongs to one run lives in `current`, a table made for that run and
-- dropped when it ends, so nothing (a log counter, a rejection) carries over to the next run.
---------------------------------------------------------------------------------------------------

local current = nil

local function run_state(fname)
  local st = current
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

-- Finalizers would run during a later run (another store's), so objects cannot get one.
local function safe_setmetatable(t, mt)
  if type(mt) == "table" and rawget(mt, "__gc") ~= nil then error("__gc metamethods are not allowed in plugins", 2) end
  return setmetatable(t, mt)
end

local function readonly_newindex() error("secrets is read-only", 2) end

-- request.json is decoded on first use: most of the cost of a run is the body, not the script.
local function request_index(t, k)
  if k ~= "json" then return nil end
  local st = current
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

---------------------------------------------------------------------------------------------------
-- The runner: one plugin run from environment to checked result.
---------------------------------------------------------------------------------------------------

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
                   max_result_bytes, max_log_lines, seed1, seed2)
  randomseed(seed1, seed2)
  local st = { reject_signal = {}, logs = 0, max_logs = max_log_lines, body = body, json_done = false }
  current = st
  local env = new_env(st, method, body, headers, query, store_id, plugin_name, plugin_version, secrets)
  setupvalue(chunk, 1, env)
  local ok, res = pcall(chunk)
  setupvalue(chunk, 1, nil)   -- the cached chunk must not keep this run's data alive
  local kind, a, b, c
  if st.rejected ~= nil then
    kind, a = "rejected", st.rejected
  elseif not ok then
    kind, a = "error", errstring(res)
  else
    kind, a, b, c = check_result(res, max_result_bytes)
  end
  current = nil
  return kind, a, b, c
end

local function full_gc()
  collectgarbage("restart")
  collectgarbage("collect")
  return collectgarbage("count")
end

-- The state's own globals are not needed any more; clearing them makes sure nothing above
-- depends on them by accident (every function here works on the locals captured at the top).
local G = _G
for k in next, copy(G) do G[k] = nil end

return { run = run, gc = full_gc }
