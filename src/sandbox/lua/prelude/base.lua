-- The prelude's first module (lua.runtime.ts loads the modules in order, each as its own chunk, with
-- the host functions and the table of what earlier modules export): private references to the standard
-- library, the string metatable locked, and the builders that copy a library table for each run.
-- Trusted Lua, loaded once into each Lua state before any plugin runs. Plugins cannot reach the
-- prelude's locals: their chunk's _ENV is replaced by the per-run environment before it runs.
local _, P = ...

local next, ipairs, getmetatable, load = next, ipairs, getmetatable, load
local format, concat = string.format, table.concat

-- string.dump would hand out bytecode; it goes from the real library too, which is what the string
-- metatable's __index (what ("x"):method() uses) points at between runs. During a run it points at the
-- run's own copy (see `run` in runner.lua). The metatable itself is locked so scripts can neither read nor change it:
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

-- Builders of the per-run library tables (os.lua and math.lua make theirs, once their functions exist).
local new_string, new_table = copier("string", string), copier("table", table)
local new_utf8, new_coroutine = copier("utf8", utf8), copier("coroutine", coroutine)

-- The run in progress: `active.run` is a table made for that run (runner.lua) and dropped when it ends,
-- so nothing (a log counter, a rejection) carries over to the next run.
local active = { run = nil }

P.copy, P.copier, P.active = copy, copier, active
P.string_lib, P.string_meta = string_lib, string_meta
P.new_string, P.new_table, P.new_utf8, P.new_coroutine = new_string, new_table, new_utf8, new_coroutine
