-- The prelude's JSON module (after base.lua): JSON with dkjson's API and output: the same functions (encode, decode, quotestring, addnewline,
-- encodeexception, use_lpeg, null, version), the same encode state fields (indent, keyorder, level,
-- buffer, bufferlen, tables, exception), the same bytes out, and decode's `nil, position, message`.
-- Decoded objects and arrays carry {__jsontype="object"|"array"} metatables so `{}` and `[]` survive a
-- round trip. Written for the sandbox from dkjson's documentation; what still differs is listed in
-- docs/plugins.md ("Differences from dkjson and stock Lua 5.4").
local H, P = ...   -- host functions implemented in JavaScript (lua.host.ts); what earlier modules export

local type, pairs, select, tostring, tonumber = type, pairs, select, tostring, tonumber
local rawget, error, pcall, ipairs, setmetatable = rawget, error, pcall, ipairs, setmetatable
local find, gsub, format, rep = string.find, string.gsub, string.format, string.rep
local concat = table.concat
local floor, huge = math.floor, math.huge
local utf8char, char = utf8.char, string.char

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

P.encode, P.decode, P.new_json = encode, decode, new_json
