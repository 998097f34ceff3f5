// Scripts written for stock Lua 5.4 run here unchanged (issue 31). Stock Lua 5.4 is built with
// LUA_COMPAT_5_3 (lua.org's makefile does it, so does Debian's package): it keeps math.pow, log10,
// ldexp, frexp, cosh, sinh and tanh, and answers `a <= b` with `not (b < a)` when no __le is found.
// Each expected value is what stock Lua 5.4.4 (Debian's lua5.4 5.4.4-3+deb12u1) printed for the same
// script: save the script as x.lua and run `lua5.4 -e 'print((loadfile("x.lua"))())'`.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createSandbox, type Sandbox } from "../../src/sandbox/index.ts";
import { returned } from "./helpers.ts";

let sandbox: Sandbox;
before(() => {
  sandbox = createSandbox({ poolSize: 1 });
});
after(() => sandbox.close());

describe("the math functions of LUA_COMPAT_5_3", () => {
  test("math.pow, log10, ldexp, frexp, cosh, sinh and tanh give stock Lua's results", async () => {
    const script = String.raw`local r = {}
local function put(v) r[#r + 1] = string.format("%s%s", v, math.type(v) == "integer" and "i" or "") end
local function put2(a, b) put(a) put(b) end
put(math.pow(2, 10)) put(math.pow(2, 0.5)) put(math.pow("3", 2)) put(math.pow(-2, 3)) put(math.pow(10, -2))
put(math.log10(1000)) put(math.log10(2)) put(math.log10(0)) put(math.log10("100")) put(math.log10(1e-300))
put(math.ldexp(0.75, 4)) put(math.ldexp(1, -1074)) put(math.ldexp(1, 1024)) put(math.ldexp(3, "2")) put(math.ldexp(1, -1075))
put(math.ldexp(0.75, -1074)) put(math.ldexp(-0.0, 3)) put(math.ldexp(1, 2^32 + 3)) put(math.ldexp(5, 0)) put(math.ldexp(-3, 1023))
put2(math.frexp(12)) put2(math.frexp(-0.3)) put2(math.frexp(0)) put2(math.frexp(5e-324)) put2(math.frexp(math.huge))
put2(math.frexp(1.7976931348623157e308)) put2(math.frexp(-0.0)) put2(math.frexp(1)) put2(math.frexp(2^-1022)) put2(math.frexp(-7))
put(math.cosh(0)) put(math.cosh(1)) put(math.cosh(-2.5)) put(math.cosh(-710)) put(math.cosh(1e-8))
put(math.sinh(1)) put(math.sinh(-1e-10)) put(math.sinh(0.5)) put(math.sinh(710)) put(math.sinh(-0.0)) put(math.sinh(3))
put(math.tanh(0.5)) put(math.tanh(-30)) put(math.tanh(-0.0)) put(math.tanh(1e-9)) put(math.tanh(2)) put(math.tanh(0.9))
return table.concat(r, " ")`;
    // What stock Lua 5.4.4 prints (floats as %.14g; "i" marks an integer, as frexp's exponent is).
    const stock = [
      "1024.0 1.4142135623731 9.0 -8.0 0.01",
      "3.0 0.30102999566398 -inf 2.0 -300.0",
      "12.0 4.9406564584125e-324 inf 12.0 0.0",
      "4.9406564584125e-324 -0.0 8.0 5.0 -inf",
      "0.75 4i -0.6 -1i 0.0 0i 0.5 -1073i inf 0i",
      "1.0 1024i -0.0 0i 0.5 1i 0.5 -1021i -0.875 3i",
      "1.0 1.5430806348152 6.1322894796637 1.1169973830809e+308 1.0",
      "1.1752011936438 -1e-10 0.52109530549375 1.1169973830809e+308 -0.0 10.01787492741",
      "0.46211715726001 -1.0 -0.0 1e-09 0.96402758007582 0.71629787019902",
    ].join(" ");
    assert.equal(await returned(sandbox, script), stock);
  });

  test("their argument errors name the function and the script's line, as stock Lua's do", async () => {
    const script = String.raw`local r = {}
local function e(f) local ok, m = pcall(f) r[#r + 1] = (m:gsub("^[^:]*:(%d+):", "line %1:")) end
e(function() local x = math.pow(2) return x end)
e(function() local x = math.pow("x", 2) return x end)
e(function() local x = math.log10() return x end)
e(function() local x = math.ldexp(1, 1.5) return x end)
e(function() local x = math.ldexp(nil, 1) return x end)
e(function() local x = math.frexp({}) return x end)
e(function() local x = math.tanh() return x end)
e(function() local x = math.sinh("1e") return x end)
e(function() local f = math.cosh local x = f(true) return x end)
local ok, m = pcall(math.cosh) r[#r + 1] = m
return table.concat(r, "\n")`;
    // What stock Lua 5.4.4 prints.
    const stock = [
      "line 3: bad argument #2 to 'pow' (number expected, got no value)",
      "line 4: bad argument #1 to 'pow' (number expected, got string)",
      "line 5: bad argument #1 to 'log10' (number expected, got no value)",
      "line 6: bad argument #2 to 'ldexp' (number has no integer representation)",
      "line 7: bad argument #1 to 'ldexp' (number expected, got nil)",
      "line 8: bad argument #1 to 'frexp' (number expected, got table)",
      "line 9: bad argument #1 to 'tanh' (number expected, got no value)",
      "line 10: bad argument #1 to 'sinh' (number expected, got string)",
      "line 11: bad argument #1 to 'f' (number expected, got boolean)",
      "bad argument #1 to 'math.cosh' (number expected, got no value)",
    ].join("\n");
    assert.equal(await returned(sandbox, script), stock);
  });
});

describe("<= through __lt (LUA_COMPAT_LT_LE)", () => {
  test("a <= b is not (b < a) when neither metatable has __le; a real __le still wins", async () => {
    const script = String.raw`local Version = {}
Version.__index = Version
Version.__lt = function(a, b) return a.n < b.n end
local function v(n) return setmetatable({ n = n }, Version) end
local r = { tostring(v(1) <= v(2)), tostring(v(2) <= v(2)), tostring(v(3) <= v(2)), tostring(v(2) >= v(1)), tostring(v(1) >= v(2)) }
local plain = setmetatable({ n = 5 }, {})
r[#r + 1] = tostring(plain <= v(7))
local B = setmetatable({}, { __le = function() return false end })
r[#r + 1] = tostring(setmetatable({}, { __lt = function() return false end }) <= B)
r[#r + 1] = tostring(setmetatable({}, { __lt = function() return false end, __le = function() return 1 end }) <= {})
local ok, err = pcall(function() local x = {} <= {} return x end)
r[#r + 1] = (err:gsub("^[^:]*:(%d+):", "line %1:"))
return table.concat(r, " ")`;
    // What stock Lua 5.4.4 prints.
    const stock = "true true false true false true false true line 11: attempt to compare two table values";
    assert.equal(await returned(sandbox, script), stock);
  });

  test("once __lt is removed, <= raises stock's message at the script's line", async () => {
    const script = String.raw`local Money = { __lt = function(a, b) return a.cents < b.cents end, __name = "Money" }
local a, b = setmetatable({ cents = 1 }, Money), setmetatable({ cents = 2 }, Money)
local before = a <= b
Money.__lt = nil
local ok, err = pcall(function() local x = a <= b return x end)
local ok2, err2 = pcall(function() local x = a <= 5 return x end)
return tostring(before) .. " | " .. (err:gsub("^[^:]*:(%d+):", "line %1:")) .. " | " .. (err2:gsub("^[^:]*:(%d+):", "line %1:"))`;
    // What stock Lua 5.4.4 prints.
    const stock = "true | line 5: attempt to compare two Money values | line 6: attempt to compare Money with number";
    assert.equal(await returned(sandbox, script), stock);
  });
});

describe("functions added to string", () => {
  test("a function added to string can be called as a method, as in stock Lua", async () => {
    const script = String.raw`function string.trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end
string.startswith = function(s, prefix) return s:sub(1, #prefix) == prefix end
local s = "  t=1700000000,v1=abc  "
return "[" .. s:trim() .. "] " .. tostring(("whsec_x"):startswith("whsec_")) .. " " .. tostring(("x").trim == string.trim)`;
    // What stock Lua 5.4.4 prints.
    assert.equal(await returned(sandbox, script), "[t=1700000000,v1=abc] true true");
  });
});
