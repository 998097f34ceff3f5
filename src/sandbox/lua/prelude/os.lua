-- The prelude's os module (after json.lua): os.time, os.date and os.difftime, written here so that
-- they give what native Lua 5.4 gives on a machine whose time zone is UTC (glibc, C locale) whatever the
-- server's zone, and so that a run can be given its clock (a replay keeps the original delivery's time).
-- os.clock is the real one. argerror and checkinteger serve math.lua too.
local _, P = ...
local copier, active = P.copier, P.active

local type, select, tostring, tonumber, error, ipairs = type, select, tostring, tonumber, error, ipairs
local byte, sub, find, format = string.byte, string.sub, string.find, string.format
local concat = table.concat

local real_time, tointeger, match = os.time, math.tointeger, string.match
local INT_MAX, INT_MIN = 2147483647, -2147483648

-- The run's clock (whole seconds) when it was given one, else the real time.
local function now()
  local st = active.run
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

P.argerror, P.checkinteger = argerror, checkinteger
P.os_time, P.os_date, P.os_difftime, P.new_os = os_time, os_date, os_difftime, new_os
