// Lua states are reused from run to run (that is where the speed comes from), so these tests prove
// that nothing one run does is visible to the next: globals, the string metatable, library tables,
// package.loaded, the state behind host functions, the random generator, memory. The pool has one
// worker, so every run here lands on the same Lua state as the one before it.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createSandbox, type Sandbox } from "../../src/sandbox/index.ts";
import { evaluate, expectError, run } from "./helpers.ts";

let sandbox: Sandbox;
before(() => {
  sandbox = createSandbox({ poolSize: 1, memoryBytes: 8 * 1024 * 1024, maxLogLines: 10 });
});
after(() => sandbox.close());

const storeA = { store: { id: "st_A" }, secrets: { signingSecret: "secret-of-store-A" } };
const storeB = { store: { id: "st_B" }, secrets: { signingSecret: "secret-of-store-B" } };

describe("isolation between runs on one reused Lua state", () => {
  test("a global set by one store is not visible to the next run (another store)", async () => {
    const first = await run(sandbox, `leaked = secrets.signingSecret; _G.viaG = store.id; rawset(_G, "raw", 1); function helper() return 1 end; return {status="ignore"}`, storeA);
    assert.ok(first.ok);
    assert.equal(await evaluate(sandbox, `tostring(leaked) .. tostring(viaG) .. tostring(raw) .. tostring(helper)`, storeB), "nilnilnilnil");
  });

  test("no value of one store's run is reachable from the next run's environment", async () => {
    await run(sandbox, `string.stash = secrets.signingSecret; table.stash = {secrets}; json.stash = secrets; math.stash = store.id; _G.deep = {{{secrets.signingSecret}}}; return {status="ignore"}`, storeA);
    const found = await evaluate(
      sandbox,
      `(function()
        local seen, hits = {}, {}
        local function walk(v, path)
          if type(v) == "string" then if v:find("store%-A") or v:find("st_A") then hits[#hits + 1] = path end return end
          if type(v) ~= "table" or seen[v] then return end
          seen[v] = true
          for k, x in pairs(v) do walk(k, path .. ".key"); walk(x, path .. "." .. tostring(k)) end
          local mt = getmetatable(v)
          if type(mt) == "table" then walk(mt, path .. ".<mt>") end
        end
        walk(_G, "_G")
        walk(getmetatable(""), "stringmt")
        return #hits == 0 and "clean" or table.concat(hits, ",")
      end)()`,
      storeB,
    );
    assert.equal(found, "clean");
  });

  test("the string metatable cannot be changed, and string library changes do not carry over", async () => {
    expectError(await run(sandbox, `getmetatable("").__index = {upper = function() return "pwned" end}`), "script_error", /attempt to index a boolean value/);
    expectError(await run(sandbox, `setmetatable("", {})`), "script_error", /bad argument #1 to 'setmetatable' \(table expected, got string\)/);
    const poison = await run(sandbox, `string.upper = function() return "pwned" end; string.rep = nil; string.format = error; return {status="ignore", invoiceId=("x"):upper()}`);
    assert.deepEqual(poison.ok && poison.result, { status: "ignore", invoiceId: "pwned" }); // method calls see the run's own string table, as in stock Lua
    assert.equal(await evaluate(sandbox, `("abc"):upper() .. string.upper("d") .. string.rep("e", 2) .. string.format("%d", 7) .. tostring(getmetatable(""))`), "ABCDee7false");
  });

  test("a function one run adds to string is not visible to the next run, as a method or a field", async () => {
    const first = await run(sandbox, `function string.trim(s) return "A:" .. s end
string.upper = function() return secrets.signingSecret end
return {status="ignore", invoiceId=("x"):trim() .. ("y"):upper()}`, storeA);
    assert.deepEqual(first.ok && first.result, { status: "ignore", invoiceId: "A:xsecret-of-store-A" });
    // A run that fails after changing string leaves nothing behind either.
    expectError(await run(sandbox, `string.trim = function() return "failed run" end error("boom")`, storeA), "script_error", /boom/);
    const next = await evaluate(sandbox, `tostring(("x").trim) .. " " .. tostring(string.trim) .. " " .. ("b"):upper() .. " " .. select(2, pcall(function() local s = ("x"):trim() return s end))`, storeB);
    assert.equal(next, "nil nil B [plugin]:1: attempt to call a nil value (method 'trim')");
  });

  test("library tables (table, math, os, utf8, coroutine, json, base64) are fresh copies every run", async () => {
    const poison = await run(
      sandbox,
      `table.concat = nil; math.floor = function() return 99 end; math.pi = 3; os.time = function() return 0 end
       utf8.char = nil; coroutine.wrap = nil; json.encode = function() return "pwned" end; json.null.polluted = true
       base64.encode = nil; setmetatable(json, {__index = function() return "pwned" end}); return {status="ignore"}`,
    );
    assert.ok(poison.ok);
    assert.equal(
      await evaluate(sandbox, `table.concat({math.floor(1.5), tostring(math.pi > 3.14), tostring(os.time() > 0), utf8.char(65), tostring(coroutine.wrap ~= nil), json.encode({1}), tostring(json.null.polluted), base64.encode("a"), tostring(json.nothing)}, ",")`),
      "1,true,true,A,true,[1],nil,YQ==,nil",
    );
  });

  test("package.loaded and require cannot be poisoned for the next run", async () => {
    await run(sandbox, `package = {loaded = {json = {encode = function() return "pwned" end}}}; require("json").decode = function() return "pwned" end; require = function() return {} end; return {status="ignore"}`);
    assert.equal(await evaluate(sandbox, `tostring(package) .. require("json").encode(require("dkjson").decode("[2]"))`), "nil[2]");
  });

  test("the state behind host functions (log count, rejection, request.json) belongs to one run", async () => {
    const noisy = await run(sandbox, `for i = 1, 50 do log("x") end pcall(reject, "caught rejection") return {status="ignore"}`, { request: { body: Buffer.from('{"n": 1}') } });
    expectError(noisy, "rejected", /caught rejection/);
    assert.equal(noisy.logs.length, 10);
    const next = await run(sandbox, `log("fresh") return {status="ignore", invoiceId=tostring(request.json.n)}`, { request: { body: Buffer.from('{"n": 2}') } });
    assert.ok(next.ok, JSON.stringify(next));
    assert.equal(next.result.invoiceId, "2");
    assert.deepEqual(next.logs.map((l) => l.description), ["fresh"]);
  });

  test("host functions called outside their run (kept in a coroutine) cannot act on a later run", async () => {
    // The coroutine and its environment become garbage when the run ends; nothing can resume it later.
    await run(sandbox, `parked = coroutine.create(function() while true do coroutine.yield(log("late")) end end) coroutine.resume(parked) return {status="ignore"}`);
    const next = await run(sandbox, `return {status="ignore", invoiceId=tostring(parked)}`);
    assert.deepEqual(next.ok && next.result, { status: "ignore", invoiceId: "nil" });
    assert.deepEqual(next.logs, []);
  });

  test("a replaced _G metatable does not carry over", async () => {
    await run(sandbox, `setmetatable(_G, {__index = function() return "pwned" end, __newindex = function() error("no") end}) return {status="ignore"}`);
    assert.equal(await evaluate(sandbox, `tostring(undefinedName) .. tostring(getmetatable(_G))`), "nilnil");
  });

  test("the same cached chunk starts from a clean environment for each store", async () => {
    const source = `counter = (counter or 0) + 1 return {status="ignore", invoiceId=tostring(counter) .. store.id}`;
    const a = await run(sandbox, source, storeA);
    const b = await run(sandbox, source, storeB);
    const a2 = await run(sandbox, source, storeA);
    assert.deepEqual([a, b, a2].map((o) => o.ok && o.result.invoiceId), ["1st_A", "1st_B", "1st_A"]);
  });

  test("math.randomseed in one run does not make the next run's numbers predictable", async () => {
    const seeded = await evaluate(sandbox, `(function() math.randomseed(42) return math.random(1, 2^53) end)()`);
    const again = await evaluate(sandbox, `(function() math.randomseed(42) return math.random(1, 2^53) end)()`);
    assert.equal(seeded, again); // randomseed itself works
    await run(sandbox, `math.randomseed(42) return {status="ignore"}`);
    const next = await evaluate(sandbox, `math.random(1, 2^53)`);
    assert.notEqual(next, seeded);
  });

  test("memory kept by one run does not count against the next", async () => {
    // string.rep needs twice the size of its result for a moment (buffer and string): 6 of 8 MiB.
    const first = await run(sandbox, `hoard = string.rep("x", 3e6) return {status="ignore"}`);
    assert.ok(first.ok, JSON.stringify(first));
    const second = await run(sandbox, `local s = string.rep("y", 3e6) return {status="ignore", invoiceId=tostring(#s)}`);
    assert.deepEqual(second.ok && second.result, { status: "ignore", invoiceId: "3000000" });
  });

  test("a source whose compiled chunk was evicted (more than 64 plugins) is sent again and runs correctly", async () => {
    const source = (n: number) => `return {status="ignore", invoiceId="plugin ${n}"}`;
    for (let n = 0; n < 70; n++) assert.deepEqual((await run(sandbox, source(n))).ok, true);
    const again = await run(sandbox, source(0));
    assert.deepEqual(again.ok && again.result, { status: "ignore", invoiceId: "plugin 0" });
  });

  test("runs on one state stay correct over thousands of runs (no leak of threads or references)", async () => {
    const source = `local co = coroutine.wrap(function(a) return a * 2 end) local t = json.decode(request.body) return {status="ignore", invoiceId=tostring(co(t.data and 21 or 0))}`;
    for (let i = 0; i < 3000; i++) {
      const outcome = await run(sandbox, source);
      if (!outcome.ok || outcome.result.invoiceId !== "42") assert.fail(`run ${i}: ${JSON.stringify(outcome)}`);
    }
  });
});
