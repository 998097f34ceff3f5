-- Runs compute.lua under the native interpreter: `lua5.4 compute-native.lua <rounds>`; prints the
-- CPU milliseconds of each round (os.clock) and the checksum.
local here = arg[0]:match("^(.*)/") or "."
local work = dofile(here .. "/compute.lua")
local rounds = tonumber(arg[1]) or 5
local result
for _ = 1, rounds do
  local t = os.clock()
  result = work()
  io.write(string.format("%.3f ", (os.clock() - t) * 1000))
end
print(result)
