-- A compute-heavy script (no host calls): a prime sieve, string formatting and pattern matching,
-- a sort, recursion and table churn. Returns a function so the same file runs under native lua5.4
-- (compute-native.lua) and, wrapped as a plugin, in the sandbox (run.ts).
return function()
  local N = 300000
  local sieve = {}
  for i = 2, N do sieve[i] = true end
  for i = 2, math.floor(math.sqrt(N)) do
    if sieve[i] then
      for j = i * i, N, i do sieve[j] = false end
    end
  end
  local primes = 0
  for i = 2, N do if sieve[i] then primes = primes + 1 end end

  local parts = {}
  for i = 1, 30000 do parts[#parts + 1] = string.format("%05d:%x", i, i * 31) end
  local text = table.concat(parts, ",")
  local digits = 0
  for w in text:gmatch("(%d+):") do digits = digits + tonumber(w) % 7 end

  local t = {}
  for i = 1, 60000 do t[i] = (i * 7919) % 60013 end
  table.sort(t)

  local function fib(k) if k < 2 then return k end return fib(k - 1) + fib(k - 2) end

  local objects = 0
  for i = 1, 50000 do
    local o = { id = i, name = "item" .. i, tags = { "a", "b" } }
    objects = objects + #o.name + #o.tags
  end

  return primes .. "/" .. digits .. "/" .. t[1] .. "/" .. fib(25) .. "/" .. objects
end
