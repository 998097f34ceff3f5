-- The prelude's math module (after os.lua): math.pow, log10, ldexp, frexp, cosh, sinh and tanh. Stock
-- Lua 5.4 is built with LUA_COMPAT_5_3 (lua.org's makefile, Debian's package), which keeps these 5.2
-- functions; this interpreter was built without it, so scripts written for stock Lua would call nil.
-- Written here with stock's argument checks and results: floats, and frexp's exponent an integer.
-- Uses argerror and checkinteger from os.lua.
local _, P = ...
local copy, copier, argerror, checkinteger = P.copy, P.copier, P.argerror, P.checkinteger

local type, select, tonumber = type, select, tonumber
local floor, huge = math.floor, math.huge

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

P.new_math = new_math
