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

-- string.dump would hand out bytecode; it goes from the real library too, which is what the string
-- metatable's __index (what ("x"):method() uses) points at between runs. During a run it points at the
-- run's own copy (see `run`). The metatable itself is locked so scripts can neither read nor change it:
-- getmetatable("") returns false.
string.dump = nil
local string_lib, string_meta = string, getmetatable("")
string_meta.__metatable = false

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

-- Builders of the per-run library tables (math's is made below, once its compatibility functions exist).
local new_string, new_table = copier("string", string), copier("table", table)
local new_utf8, new_coroutine = copier("utf8", utf8), copier("coroutine", coroutine)

---------------------------------------------------------------------------------------------------
-- JSON with dkjson's API and output: the same functions (encode, decode, quotestring, addnewline,
-- encodeexception, use_lpeg, null, version), the same encode state fields (indent, keyorder, level,
-- buffer, bufferlen, tables, exception), the same bytes out, and decode's `nil, position, message`.
-- Decoded objects and arrays carry {__jsontype="object"|"array"} metatables so `{}` and `[]` survive a
-- round trip. Written for the sandbox from dkjson's documentation; what still differs is listed in
-- docs/plugins.md ("Differences from dkjson and stock Lua 5.4").
---------------------------------------------------------------------------------------------------

local MAX_DEPTH = 1000
-- dkjson reads metatables past a __metatable field (debug.getmetatable); so does the encoder here.
local metatable_of = debug.getmetatable

-- Single bytes that JSON strings cannot hold raw, and the multi-byte characters dkjson also writes
-- as \u escapes because they are invisible or break lines in some readers: U+0080–009F, U+00AD,
-- U+0600–0604, U+070F, U+17B4–17B5, U+200C–200F, U+2028–202F, U+2060–206F, U+FEFF, U+FFF0–FFFF.
local BYTE_ESCAPES = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t", ["\127"] = "\\u007f" }
for b = 0, 31 do
  local c = char(b)
  if not BYTE_ESCAPES[c] then BYTE_ESCAPES[c] = format("\\u%04x", b) end
end
local CHAR_ESCAPES = {}
for _, range in ipairs({ { 0x80, 0x9F }, { 0xAD, 0xAD }, { 0x600, 0x604 }, { 0x70F, 0x70F }, { 0x17B4, 0x17B5 },
                         { 0x200C, 0x200F }, { 0x2028, 0x202F }, { 0x2060, 0x206F }, { 0xFEFF, 0xFEFF }, { 0xFFF0, 0xFFFF } }) do
  for cp = range[1], range[2] do CHAR_ESCAPES[utf8char(cp)] = format("\\u%04x", cp) end
end

local function quotestring(s)
  if not find(s, '[%z\1-\31"\\\127\194\216\220\225\226\239]') then return '"' .. s .. '"' end -- most strings: nothing to escape
  if find(s, '[%z\1-\31"\\\127]') then s = gsub(s, '[%z\1-\31"\\\127]', BYTE_ESCAPES) end
  -- Every escaped character starts with one of these lead bytes; the pair and triple patterns cannot
  -- overlap (a continuation byte is never a lead byte), so each escaped character is found.
  if find(s, "[\194\216\220\225\226\239]") then
    s = gsub(s, "[\194\216\220][\128-\191]", CHAR_ESCAPES)
    s = gsub(s, "[\225\226\239][\128-\191][\128-\191]", CHAR_ESCAPES)
  end
  return '"' .. s .. '"'
end

-- A table is written as an array when all its keys are positive integers (a numeric `n` field counts
-- as the length) and it is not too sparse: past index 10, at least half the slots up to the largest
-- index (or to `n`) must be filled. Returns the length to write.
local function array_length(t)
  local largest, count, declared = 0, 0, 0
  for k, v in pairs(t) do
    if k == "n" and type(v) == "number" then
      declared = v
      if v > largest then largest = v end
    elseif type(k) == "number" and k >= 1 and floor(k) == k then
      count = count + 1
      if k > largest then largest = k end
    else
      return nil
    end
  end
  if largest > 10 and largest > declared and largest > 2 * count then return nil end
  return largest
end

-- Encoding errors travel as {ENCODE_FAILED, message} to json.encode, which raises the message at its caller.
local ENCODE_FAILED = {}
local function encode_fail(message) error({ ENCODE_FAILED, message }, 0) end

local function put_newline(buf, n, level)
  buf[n + 1] = "\n"
  buf[n + 2] = rep("  ", level)
  return n + 2
end

-- After a __tojson or an exception handler ran: it may have written into state.buffer itself (and
-- moved state.bufferlen), and a string it returned goes after that.
local function after_custom(ctx, ret)
  local n = ctx.state.bufferlen
  if type(ret) == "string" then
    n = n + 1
    ctx.buf[n] = ret
  end
  return n
end

-- A value that cannot be encoded: the state's exception handler may supply text instead; without one,
-- or when it returns nothing, encoding stops with the message.
local function encode_exception(ctx, reason, value, n, message)
  message = message or reason
  local state = ctx.state
  local handler = state.exception
  if not handler then encode_fail(message) end
  state.bufferlen = n
  local ret, msg = handler(reason, value, state, message)
  if not ret then encode_fail(msg or message) end
  return after_custom(ctx, ret)
end

local encode_value

local function encode_member(ctx, k, v, first, level, n, depth)
  local kt = type(k)
  if kt ~= "string" and kt ~= "number" then encode_fail("type '" .. kt .. "' is not supported as a key by JSON.") end
  local buf = ctx.buf
  if not first then
    n = n + 1
    buf[n] = ","
  end
  if ctx.indent then n = put_newline(buf, n, level) end
  buf[n + 1] = quotestring(k)
  buf[n + 2] = ":"
  return encode_value(ctx, v, level, n + 2, depth + 1)
end

-- Appends `value` to ctx.buf after index n and returns the new last index.
encode_value = function(ctx, value, level, n, depth)
  local buf, tables = ctx.buf, ctx.tables
  local mt = metatable_of(value)
  if type(mt) ~= "table" then mt = nil end
  local tojson = mt and mt.__tojson
  if tojson then
    if tables[value] then return encode_exception(ctx, "reference cycle", value, n) end
    tables[value] = true
    local state = ctx.state
    state.bufferlen = n
    local ret, msg = tojson(value, state)
    if not ret then return encode_exception(ctx, "custom encoder failed", value, n, msg) end
    tables[value] = nil
    return after_custom(ctx, ret)
  end
  local vt = type(value)
  if vt == "string" then
    n = n + 1
    buf[n] = quotestring(value)
  elseif vt == "number" then
    n = n + 1
    if value ~= value or value >= huge or -value >= huge then buf[n] = "null" else buf[n] = tostring(value) end
  elseif vt == "boolean" then
    n = n + 1
    buf[n] = value and "true" or "false"
  elseif value == nil then
    n = n + 1
    buf[n] = "null"
  elseif vt == "table" then
    if tables[value] then return encode_exception(ctx, "reference cycle", value, n) end
    if depth >= MAX_DEPTH then encode_fail("too deeply nested") end
    tables[value] = true
    level = level + 1
    local len = array_length(value)
    if len == 0 and mt and mt.__jsontype == "object" then len = nil end
    if len then
      n = n + 1
      buf[n] = "["
      for i = 1, len do
        if i > 1 then
          n = n + 1
          buf[n] = ","
        end
        n = encode_value(ctx, value[i], level, n, depth + 1)
      end
      n = n + 1
      buf[n] = "]"
    else
      n = n + 1
      buf[n] = "{"
      local first, written = true, nil
      local order = mt and mt.__jsonorder or ctx.keyorder
      if type(order) == "table" then
        written = {}
        for i = 1, #order do
          local k = order[i]
          local v = value[k]
          if v ~= nil then
            written[k] = true
            n = encode_member(ctx, k, v, first, level, n, depth)
            first = false
          end
        end
      end
      for k, v in pairs(value) do
        if not (written and written[k]) then
          n = encode_member(ctx, k, v, first, level, n, depth)
          first = false
        end
      end
      if ctx.indent then n = put_newline(buf, n, level - 1) end
      n = n + 1
      buf[n] = "}"
    end
    tables[value] = nil
  else
    return encode_exception(ctx, "unsupported type", value, n, "type '" .. vt .. "' is not supported by JSON.")
  end
  return n
end

local function encode(value, state)
  -- Anything but a table is no state: json.encode(json.decode(s)) passes decode's position here,
  -- which dkjson would fail on.
  if type(state) ~= "table" then state = {} end
  local given = state.buffer
  local buf = given or {}
  state.buffer = buf
  local ctx = { buf = buf, state = state, indent = state.indent, keyorder = state.keyorder, tables = state.tables or {} }
  local ok, n = pcall(encode_value, ctx, value, state.level or 0, state.bufferlen or 0, 0)
  if not ok then
    if type(n) == "table" and n[1] == ENCODE_FAILED then error(n[2], 2) end
    error(n, 0) -- the script's own error (from a __tojson or an exception handler), as it was raised
  end
  if given then
    -- The caller's buffer: the text stays in it, state.bufferlen says where it ends.
    state.bufferlen = n
    return true
  end
  state.buffer, state.bufferlen = nil, nil
  return concat(buf)
end

local function addnewline(state)
  if state.indent then
    local buf = state.buffer
    state.bufferlen = put_newline(buf, state.bufferlen or #buf, state.level or 0)
  end
end

-- For state.exception: writes what could not be encoded as a string saying why ("<reference cycle>").
local function encodeexception(_reason, _value, _state, defaultmessage)
  return quotestring("<" .. tostring(defaultmessage) .. ">")
end

-- Reading JSON is done by the host (lua.json.ts), which builds the tables directly: the same
-- results as dkjson's reader, at a fraction of the cost of doing it in Lua.
local jsondecode = H.jsondecode

local function decode(str, pos, nullval, ...)
  local t = type(str)
  if t == "number" then
    str = tostring(str) -- dkjson reads a number as its text: json.decode(123) gives 123, 4
  elseif t ~= "string" then
    return nil, 1, "json.decode expects a string, got " .. t
  end
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
  local start = 1
  if pos ~= nil then
    start = tonumber(pos) or 1
    if start ~= start then start = 1 end -- NaN
    if start < 0 then start = #str + start + 1 end -- counted from the end, as string.find does
  end
  return jsondecode(str, start, pos == nil, nullval, objectmeta, arraymeta)
end

local function null_tojson() return "null" end

local function new_json()
  local json = {
    version = "dkjson 2.8 (storefront sandbox)", encode = encode, decode = decode, quotestring = quotestring,
    addnewline = addnewline, encodeexception = encodeexception,
  }
  -- There is no LPeg here; the built-in decoder is already native, so use_lpeg just returns the module.
  json.use_lpeg = function() return json end
  json.null = setmetatable({}, { __tojson = null_tojson }) -- a metatable per run: a script may change it
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

---------------------------------------------------------------------------------------------------
-- os.time, os.date and os.difftime, written here so that they give what native Lua 5.4 gives on a
-- machine whose time zone is UTC (glibc, C locale) whatever the server's zone, and so that a run can
-- be given its clock (a replay keeps the original delivery's time). os.clock is the real one.
---------------------------------------------------------------------------------------------------

local real_time, tointeger, match = os.time, math.tointeger, string.match
local INT_MAX, INT_MIN = 2147483647, -2147483648

-- The run's clock (whole seconds) when it was given one, else the real time.
local function now()
  local st = current
  if st ~= nil and st.clock ~= nil then return st.clock end
  return real_time()
end

local getinfo = debug.getinfo

-- luaL_argerror's message, raised at the script's line. `level` 1 is the os function itself; it is
-- named as the call wrote it ('date' for os.date(...)), else by its full name, as native Lua does.
local function argerror(n, fname, message, level)
  level = (level or 1) + 1
  local info = getinfo(level, "n")
  error("bad argument #" .. n .. " to '" .. (info and info.name or fname) .. "' (" .. message .. ")", level + 1)
end

-- luaL_checkinteger: integral numbers and numeric strings; `present` tells nil from no value.
local function checkinteger(v, n, fname, present)
  local t = type(v)
  if t == "number" or (t == "string" and tonumber(v) ~= nil) then
    local i = tointeger(tonumber(v))
    if i == nil then argerror(n, fname, "number has no integer representation", 2) end
    return i
  end
  argerror(n, fname, "number expected, got " .. (present and t or "no value"), 2)
end

-- Days from 1970-01-01 to a date of the proleptic Gregorian calendar, and back (era arithmetic:
-- 400-year eras of 146097 days, years counted from March so the leap day comes last).
local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = y // 400
  local yoe = y - era * 400
  local doy = (153 * ((m + 9) % 12) + 2) // 5 + d - 1
  return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
end

local function civil_from_days(z)
  z = z + 719468
  local era = z // 146097
  local doe = z - era * 146097
  local yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
  local doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
  local mp = (5 * doy + 2) // 153
  local d = doy - (153 * mp + 2) // 5 + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m, d
end

-- A time as a date table (what os.date("*t") returns), or nil when the year does not fit a C int
-- (struct tm's limit, which native Lua reports as "cannot be represented").
local function broken_down(t)
  local days, secs = t // 86400, t % 86400
  local y, m, d = civil_from_days(days)
  if y - 1900 > INT_MAX or y - 1900 < INT_MIN then return nil end
  return {
    year = y, month = m, day = d, hour = secs // 3600, min = secs % 3600 // 60, sec = secs % 60,
    wday = (days + 4) % 7 + 1, yday = days - days_from_civil(y, 1, 1) + 1, isdst = false,
  }
end

local DAY_NAMES = { "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday" }
local MONTH_NAMES = { "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December" }

-- ISO 8601 week-based year and week (%G, %V): weeks start on Monday, week 1 holds the year's first Thursday.
local function iso_weeks_in(y)
  local function dec31(year) return (year + year // 4 - year // 100 + year // 400) % 7 end -- weekday of Dec 31, 0 = Sunday
  return (dec31(y) == 4 or dec31(y - 1) == 3) and 53 or 52
end

local function iso_week(tm)
  local wday = (tm.wday + 5) % 7 + 1 -- 1 = Monday … 7 = Sunday
  local week = (tm.yday - wday + 10) // 7
  if week < 1 then return tm.year - 1, iso_weeks_in(tm.year - 1) end
  if week > iso_weeks_in(tm.year) then return tm.year + 1, 1 end
  return tm.year, week
end

local function two(n) return format("%02d", n) end

-- One conversion each, as glibc's strftime writes it in the C locale (years are not padded).
local CONVERSIONS
CONVERSIONS = {
  a = function(tm) return sub(DAY_NAMES[tm.wday], 1, 3) end,
  A = function(tm) return DAY_NAMES[tm.wday] end,
  b = function(tm) return sub(MONTH_NAMES[tm.month], 1, 3) end,
  B = function(tm) return MONTH_NAMES[tm.month] end,
  c = function(tm)
    return format("%s %s %2d %02d:%02d:%02d %d", CONVERSIONS.a(tm), CONVERSIONS.b(tm), tm.day, tm.hour, tm.min, tm.sec, tm.year)
  end,
  C = function(tm) return tostring(tm.year // 100) end,
  d = function(tm) return two(tm.day) end,
  D = function(tm) return format("%02d/%02d/%02d", tm.month, tm.day, tm.year % 100) end,
  e = function(tm) return format("%2d", tm.day) end,
  F = function(tm) return format("%d-%02d-%02d", tm.year, tm.month, tm.day) end,
  g = function(tm) return two((iso_week(tm)) % 100) end,
  G = function(tm) return tostring((iso_week(tm))) end,
  H = function(tm) return two(tm.hour) end,
  I = function(tm) return two((tm.hour + 11) % 12 + 1) end,
  j = function(tm) return format("%03d", tm.yday) end,
  m = function(tm) return two(tm.month) end,
  M = function(tm) return two(tm.min) end,
  n = function() return "\n" end,
  p = function(tm) return tm.hour < 12 and "AM" or "PM" end,
  r = function(tm) return format("%02d:%02d:%02d %s", (tm.hour + 11) % 12 + 1, tm.min, tm.sec, tm.hour < 12 and "AM" or "PM") end,
  R = function(tm) return format("%02d:%02d", tm.hour, tm.min) end,
  S = function(tm) return two(tm.sec) end,
  t = function() return "\t" end,
  T = function(tm) return format("%02d:%02d:%02d", tm.hour, tm.min, tm.sec) end,
  u = function(tm) return tostring((tm.wday + 5) % 7 + 1) end,
  U = function(tm) return two((tm.yday + 6 - (tm.wday - 1)) // 7) end,
  V = function(tm) return two(select(2, iso_week(tm))) end,
  w = function(tm) return tostring(tm.wday - 1) end,
  W = function(tm) return two((tm.yday + 6 - (tm.wday + 5) % 7) // 7) end,
  y = function(tm) return two(tm.year % 100) end,
  Y = function(tm) return tostring(tm.year) end,
  z = function() return "+0000" end,
  Z = function(_, utc) return utc and "GMT" or "UTC" end,
  ["%"] = function() return "%" end,
}
CONVERSIONS.h, CONVERSIONS.x, CONVERSIONS.X = CONVERSIONS.b, CONVERSIONS.D, CONVERSIONS.T
-- The E and O modifiers Lua 5.4 accepts; in the C locale they change nothing.
for _, two_char in ipairs({ "Ec", "EC", "Ex", "EX", "Ey", "EY", "Od", "Oe", "OH", "OI", "Om", "OM", "OS", "Ou", "OU", "OV", "Ow", "OW", "Oy" }) do
  CONVERSIONS[two_char] = CONVERSIONS[sub(two_char, 2, 2)]
end

local function os_date(...)
  local fmt, t = ...
  local ft = type(fmt)
  if fmt == nil then
    fmt = "%c"
  elseif ft == "number" then
    fmt = tostring(fmt)
  elseif ft ~= "string" then
    argerror(1, "os.date", "string expected, got " .. ft)
  end
  if t == nil then t = now() else t = checkinteger(t, 2, "os.date", true) end
  local utc = byte(fmt, 1) == 33 -- "!"
  local i = utc and 2 or 1
  local tm = broken_down(t)
  if tm == nil then error("date result cannot be represented in this installation", 2) end
  if match(fmt, "^[^%z]*", i) == "*t" then return tm end -- C compares up to a NUL byte
  local out, n, len = {}, 0, #fmt
  while i <= len do
    local p = find(fmt, "%", i, true)
    if p == nil then
      n = n + 1
      out[n] = sub(fmt, i)
      break
    end
    if p > i then
      n = n + 1
      out[n] = sub(fmt, i, p - 1)
    end
    local one, pair = sub(fmt, p + 1, p + 1), sub(fmt, p + 1, p + 2)
    local conversion
    if #one == 1 and CONVERSIONS[one] then
      conversion, i = CONVERSIONS[one], p + 2
    elseif #pair == 2 and CONVERSIONS[pair] then
      conversion, i = CONVERSIONS[pair], p + 3
    else
      argerror(1, "os.date", "invalid conversion specifier '%" .. match(fmt, "^[^%z]*", p + 1) .. "'")
    end
    n = n + 1
    out[n] = conversion(tm, utc)
  end
  return concat(out, "", 1, n)
end

-- A field of os.time's table as C reads it (an int, after taking `delta` off), or its default.
local function date_field(t, key, default, delta)
  local v = t[key]
  local i = v
  if type(v) == "string" then i = tonumber(v) end
  if type(i) == "number" then i = tointeger(i) else i = nil end
  if i == nil then
    if v ~= nil then error("field '" .. key .. "' is not an integer", 3) end
    if default == nil then error("field '" .. key .. "' missing in date table", 3) end
    return default
  end
  if (i >= 0 and i - delta > INT_MAX) or (i < 0 and i < INT_MIN + delta) then error("field '" .. key .. "' is out-of-bound", 3) end
  return i - delta
end

local function os_time(...)
  local t = ...
  if t == nil then return now() end
  if type(t) ~= "table" then argerror(1, "os.time", "table expected, got " .. type(t)) end
  local year = date_field(t, "year", nil, 1900) + 1900
  local month = date_field(t, "month", nil, 1) + 1
  local day = date_field(t, "day", nil, 0)
  local hour = date_field(t, "hour", 12, 0)
  local min = date_field(t, "min", 0, 0)
  local sec = date_field(t, "sec", 0, 0)
  -- mktime's normalisation: months past 12 carry into years, everything else into seconds.
  year = year + (month - 1) // 12
  month = (month - 1) % 12 + 1
  local result = (days_from_civil(year, month, 1) + day - 1) * 86400 + hour * 3600 + min * 60 + sec
  -- glibc's mktime in UTC takes an hour off a time said to be in daylight saving time.
  if t.isdst then result = result - 3600 end
  local tm = broken_down(result)
  -- mktime's -1 is its error value, so native Lua refuses 1969-12-31 23:59:59 too.
  if tm == nil or result == -1 then error("time result cannot be represented in this installation", 2) end
  t.year, t.month, t.day, t.hour, t.min, t.sec = tm.year, tm.month, tm.day, tm.hour, tm.min, tm.sec
  t.yday, t.wday, t.isdst = tm.yday, tm.wday, false
  return result
end

local function os_difftime(...)
  local n = select("#", ...)
  local t2, t1 = ...
  t2 = checkinteger(t2, 1, "os.difftime", n >= 1)
  t1 = checkinteger(t1, 2, "os.difftime", n >= 2)
  return (t2 + 0.0) - t1
end

local new_os = copier("os", { time = os_time, date = os_date, clock = os.clock, difftime = os_difftime })

---------------------------------------------------------------------------------------------------
-- math.pow, log10, ldexp, frexp, cosh, sinh and tanh. Stock Lua 5.4 is built with LUA_COMPAT_5_3
-- (lua.org's makefile, Debian's package), which keeps these 5.2 functions; this interpreter was built
-- without it, so scripts written for stock Lua would call nil. Written here with stock's argument checks
-- and results: floats, and frexp's exponent an integer. Uses argerror and checkinteger from above.
---------------------------------------------------------------------------------------------------

local exp, log, abs = math.exp, math.log, math.abs

-- luaL_checknumber: numbers and numeric strings; `present` tells nil from no value.
local function checknumber(v, n, fname, present)
  local t = type(v)
  if t == "number" then return v end
  if t == "string" and tonumber(v) ~= nil then return tonumber(v) end
  argerror(n, fname, "number expected, got " .. (present and t or "no value"), 2)
end

local function is_finite_nonzero(x) return x == x and x ~= 0 and x ~= huge and x ~= -huge end

-- x * 2^k for a result known to be a normal float: two exact steps, so that neither 2^k (up to 2^1075
-- for the smallest subnormal) nor the intermediate product leaves the range of doubles.
local function scale_exactly(x, k)
  local half = k // 2
  return x * 2.0 ^ half * 2.0 ^ (k - half)
end

-- x = m * 2^e with 0.5 <= |m| < 1 for a finite non-zero float: log2 guesses e, exact halving or doubling corrects it.
local function split_float(x)
  local e = floor(log(abs(x), 2)) + 1
  local m = scale_exactly(x, -e)
  while abs(m) >= 1 do m, e = m / 2, e + 1 end
  while abs(m) < 0.5 do m, e = m * 2, e - 1 end
  return m, e
end

local function math_frexp(...)
  local x = checknumber((...), 1, "math.frexp", select("#", ...) >= 1) * 1.0
  if not is_finite_nonzero(x) then return x, 0 end -- C's frexp: zeros, infinities and NaN with exponent 0
  return split_float(x)
end

local function math_ldexp(...)
  local n = select("#", ...)
  local x, e = ...
  x = checknumber(x, 1, "math.ldexp", n >= 1) * 1.0
  e = checkinteger(e, 2, "math.ldexp", n >= 2)
  e = ((e + 0x80000000) & 0xFFFFFFFF) - 0x80000000 -- stock casts the exponent to a C int
  if not is_finite_nonzero(x) then return x end
  local m, k = split_float(x)
  local total = k + e
  if total > 1024 then return m * huge end -- overflows to an infinity of x's sign
  if total <= -1075 then return m * 0.0 end -- below half the smallest subnormal: a zero of x's sign
  -- m scaled by an exact power of two first, then one multiplication that rounds (only a subnormal
  -- result is inexact), so the result is rounded once as C's ldexp rounds it.
  if total > 0 then return (m * 2) * 2.0 ^ (total - 1) end
  return (m * 2.0 ^ -100) * 2.0 ^ (total + 100)
end

local function math_pow(...)
  local n = select("#", ...)
  local x, y = ...
  x = checknumber(x, 1, "math.pow", n >= 1)
  y = checknumber(y, 2, "math.pow", n >= 2)
  return x ^ y -- the same C pow stock's math.pow calls
end

local function math_log10(...)
  local x = checknumber((...), 1, "math.log10", select("#", ...) >= 1)
  return log(x, 10) -- math.log with base 10 calls C's log10
end

-- sinh for |x| < 1 by its series: exp(x) - exp(-x) would cancel most digits near 0.
local function sinh_series(x)
  local x2, term, sum, k = x * x, x, x, 1
  repeat
    local before = sum
    term = term * x2 / ((2 * k) * (2 * k + 1))
    sum = sum + term
    k = k + 1
  until sum == before
  return sum
end

-- exp(a) / 2, also past exp's overflow (709.78) where the result still fits: exp(a/2)^2 / 2.
local function half_exp(a)
  if a > 709 then
    local h = exp(a / 2)
    return (h / 2) * h
  end
  return exp(a) / 2
end

-- sinh, cosh and tanh follow the shape of glibc's formulas on top of exp (which gives the same bits here
-- as glibc's): results are within one unit in the last place of stock Lua's on Linux, which tostring's
-- 14 digits show only next to a rounding boundary.
local function math_sinh(...)
  local x = checknumber((...), 1, "math.sinh", select("#", ...) >= 1) * 1.0
  local a = abs(x)
  if a < 1 then return sinh_series(x) end -- keeps the sign of -0.0
  local r
  if a < 22 then
    local t = exp(a) - 1 -- exact subtraction for exp(a) >= 2
    r = (t + t / (t + 1)) / 2
  else
    r = half_exp(a) -- exp(-a) no longer counts
  end
  if x < 0 then return -r end
  return r
end

local function math_cosh(...)
  local x = checknumber((...), 1, "math.cosh", select("#", ...) >= 1) * 1.0
  local a = abs(x)
  if a < 22 then
    local t = exp(a)
    return t / 2 + 0.5 / t
  end
  return half_exp(a)
end

local function math_tanh(...)
  local x = checknumber((...), 1, "math.tanh", select("#", ...) >= 1) * 1.0
  local a = abs(x)
  if a < 1 then return sinh_series(x) / ((exp(a) + exp(-a)) / 2) end -- keeps the sign of -0.0
  local r = 1 - 2 / (exp(2 * a) + 1) -- exp overflows to inf past 354: 1, as tanh is there
  if x < 0 then return -r end
  return r
end

local math_with_compat = copy(math)
math_with_compat.pow, math_with_compat.log10, math_with_compat.ldexp, math_with_compat.frexp = math_pow, math_log10, math_ldexp, math_frexp
math_with_compat.cosh, math_with_compat.sinh, math_with_compat.tanh = math_cosh, math_sinh, math_tanh
local new_math = copier("math", math_with_compat)

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
                   max_result_bytes, max_log_lines, seed1, seed2, clock)
  randomseed(seed1, seed2)
  local st = { reject_signal = {}, logs = 0, max_logs = max_log_lines, body = body, json_done = false, clock = clock }
  current = st
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
  current = nil
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
