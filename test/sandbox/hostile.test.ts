// The hostile suite: scripts written to escape, exhaust or poison the sandbox, each with the outcome
// it must get, run against the real worker pool. After every one of them a normal script must still
// run correctly (and, for the state-poisoning ones, see nothing of the hostile run).
import assert from "node:assert/strict";
import dns from "node:dns";
import type http from "node:http";
import { after, before, describe, test } from "node:test";
import { createSandbox, type LookupFunction, type RunOutcome, type Sandbox } from "../../src/sandbox/index.ts";
import { assertHealthy, expectError, run, startServer, type TestServer } from "./helpers.ts";

const CPU_MS = 100;
const MEMORY = 8 * 1024 * 1024;

let sandbox: Sandbox;
let server: TestServer;
let v6server: TestServer;

/** "public.test" stands for a public host: it is allowed by name and resolves to the test server. */
const publicTest: LookupFunction = (hostname, options, callback) =>
  hostname === "public.test" ? callback(null, [{ address: "127.0.0.1", family: 4 }]) : dns.lookup(hostname, options, callback);

before(async () => {
  server = await startServer(route);
  v6server = await startServer((_req, res) => res.end("v6"), "::1");
  sandbox = createSandbox(
    { poolSize: 2, cpuMs: CPU_MS, wallMs: 3_000, memoryBytes: MEMORY, fetchTimeoutMs: 400, maxFetches: 3, fetchMaxBytes: 64 * 1024, fetchAllow: ["public.test"] },
    {
      lookup: publicTest,
    },
  );
});

after(async () => {
  await sandbox.close();
  await server.close();
  await v6server.close();
});

function route(req: http.IncomingMessage, res: http.ServerResponse): void {
  const url = new URL(req.url ?? "/", "http://x");
  const to = url.searchParams.get("to");
  if (url.pathname === "/redirect" && to) {
    res.writeHead(302, { location: to }).end();
  } else if (url.pathname === "/chain") {
    const n = Number(url.searchParams.get("n"));
    res.writeHead(302, { location: n > 0 ? `/chain?n=${n - 1}` : "/ok" }).end();
  } else if (url.pathname === "/slow") {
    res.writeHead(200, { "content-type": "text/plain" });
    const timer = setInterval(() => res.write("."), 50); // an endless, slow body
    res.on("close", () => clearInterval(timer));
  } else if (url.pathname === "/big") {
    res.end(Buffer.alloc(200 * 1024, 97));
  } else {
    res.end("ok");
  }
}

interface Case {
  name: string;
  source: string | (() => string);
  expect: (outcome: RunOutcome) => void;
}

const timeout = (outcome: RunOutcome) => expectError(outcome, "timeout", /CPU budget of 100 ms/);
const memory = (outcome: RunOutcome) => expectError(outcome, "memory_limit", /memory limit of 8388608 bytes/);
const scriptError = (message: RegExp) => (outcome: RunOutcome) => expectError(outcome, "script_error", message);
/** The script returns what fetch gave: "<response or nil>|<message>". */
const FETCH = (url: string) => `local r, e = fetch(${JSON.stringify(url)}) return { status = "ignore", invoiceId = tostring(r and r.status) .. "|" .. tostring(e) }`;
const fetchRefused = (message: RegExp, untouched = true) => (outcome: RunOutcome) => {
  assert.ok(outcome.ok, JSON.stringify(outcome));
  const [status, error] = (outcome.result.invoiceId ?? "").split("|");
  assert.equal(status, "nil");
  assert.match(error!, message);
  assert.equal(outcome.fetches.length, 1);
  assert.equal(outcome.fetches[0]!.status, null);
  if (untouched) assert.equal(server.requests.length + v6server.requests.length, 0, "the internal server must not have been reached");
};

const cases: Case[] = [
  // Runaway CPU: every form ends at the CPU budget because the worker thread is terminated.
  { name: "an endless loop", source: `while true do end`, expect: timeout },
  { name: "an endless loop hidden in pcall, retried forever", source: `while true do pcall(function() while true do end end) end`, expect: timeout },
  { name: "an endless loop in xpcall's message handler", source: `xpcall(function() error("x") end, function() while true do end end)`, expect: timeout },
  { name: "an endless loop inside coroutine.resume, resumed again on error", source: `while true do coroutine.resume(coroutine.create(function() while true do end end)) end`, expect: timeout },
  { name: "an endless loop in a <close> handler", source: `do local x <close> = setmetatable({}, {__close = function() while true do end end}) end`, expect: timeout },
  { name: "an endless loop in __tostring of an error object", source: `error(setmetatable({}, {__tostring = function() while true do end end}))`, expect: timeout },
  { name: "a catastrophic gsub (a slow C function no hook could stop)", source: `local s = string.rep("a", 600) .. "" ; return s:gsub("a*a*a*b", "")`, expect: timeout },
  { name: "sorting a huge table in C", source: `local t = {} for i = 1, 2e5 do t[i] = (i * 7919) % 2e5 end while true do table.sort(t) end`, expect: timeout },

  // Memory.
  { name: "a string.rep bomb", source: `local s = string.rep("x", 1e9)`, expect: memory },
  { name: "a concatenation bomb", source: `local s = "x" while true do s = s .. s end`, expect: memory },
  { name: "a table bomb", source: `local t = {} local i = 0 while true do i = i + 1 t[i] = {i} end`, expect: memory },
  { name: "a coroutine bomb", source: `local t = {} while true do t[#t + 1] = coroutine.create(function() end) end`, expect: memory },
  { name: "a memory error caught by pcall and raised again", source: `local ok, e = pcall(string.rep, "x", 1e8) error(e)`, expect: memory },
  // The Lua stack reaches the memory limit before Lua's own limit of a million slots.
  { name: "infinite recursion", source: `local function f(n) return 1 + f(n + 1) end return f(1)`, expect: memory },
  { name: "C stack exhaustion through gsub callbacks", source: `local function f(s) return (s:gsub(".", f)) end return f("ab")`, expect: scriptError(/stack overflow/) },
  // A __newindex runs inside json.decode's reader and may call it again: the nesting limit counts every
  // decode on the stack, so the reader's recursion (JavaScript frames) stays as bounded as for one decode.
  { name: "json.decode re-entered from a __newindex deep inside nested input", source: `local text = string.rep("[", 950) .. '{"x": 1}' .. string.rep("]", 950)
local meta, inner
meta = { __newindex = function(t, k, v) rawset(t, k, v) inner = select(3, json.decode(text, 1, nil, meta, nil)) end }
json.decode(text, 1, nil, meta, nil)
return { status = "ignore", invoiceId = inner }`, expect: (o) => assert.deepEqual(o.ok && o.result, { status: "ignore", invoiceId: "too deeply nested at line 1, column 50" }) },
  { name: "json.decode re-entered from __newindex without end", source: `local meta
meta = { __newindex = function() json.decode('{"x": 1}', 1, nil, meta) end }
json.decode('{"x": 1}', 1, nil, meta)`, expect: scriptError(/C stack overflow/) },
  { name: "C stack exhaustion through __index functions", source: `local t = setmetatable({}, {}) getmetatable(t).__index = function(t, k) return t[k .. "x"] end return t.a`, expect: scriptError(/stack overflow/) },

  // Escapes: the process, the file system, the debug library, bytecode.
  { name: "os.exit", source: `os.exit(3)`, expect: scriptError(/attempt to call a nil value \(field 'exit'\)/) },
  { name: "io.open", source: `local f = io.open("/etc/passwd") return {status="ignore", invoiceId=f:read("a")}`, expect: scriptError(/attempt to index a nil value \(global 'io'\)/) },
  { name: "require of a module other than json", source: `local os = require("os") os.exit(1)`, expect: scriptError(/module 'os' not found/) },
  { name: "the debug library", source: `debug.sethook()`, expect: scriptError(/global 'debug'/) },
  { name: "collectgarbage(\"stop\")", source: `collectgarbage("stop")`, expect: scriptError(/collectgarbage\('stop'\) is not allowed/) },
  { name: "string.dump", source: `local b = string.dump(function() end)`, expect: scriptError(/attempt to call a nil value \(field 'dump'\)/) },
  { name: "load of bytecode", source: `local f = assert(load("\\27LuaT\\0\\25\\147\\r\\n\\26\\n\\4\\8\\8xV\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0(w@\\1", "x", "b")) f()`, expect: scriptError(/attempt to load a binary chunk \(mode is 't'\)/) },
  { name: "a source that is a binary chunk (starts with \\27)", source: "\x1bLuaT\x00\x19\x93\r\n\x1a\n\x04\x08\x08", expect: scriptError(/attempt to load a binary chunk/) },
  { name: "finalizers (a __gc loop)", source: `setmetatable({}, {__gc = function() while true do end end}) collectgarbage()`, expect: scriptError(/__gc metamethods are not allowed/) },
  { name: "finalizers through json.decode's object metatable", source: `json.decode("{}", 1, nil, {__gc = function() while true do end end}) collectgarbage()`, expect: scriptError(/__gc metamethods are not allowed/) },
  { name: "finalizers through json.decode's array metatable", source: `json.decode("[]", 1, nil, nil, {__gc = function() log("finalizer ran") end}) collectgarbage()`, expect: scriptError(/__gc metamethods are not allowed/) },
  { name: "a __gc added after setmetatable never runs", source: `local mt = {} setmetatable({}, mt) mt.__gc = function() while true do end end collectgarbage() collectgarbage() return {status="ignore"}`, expect: (o) => assert.ok(o.ok) },
  { name: "a throwing __tostring on the error object", source: `error(setmetatable({}, {__tostring = function() error(setmetatable({}, {__tostring = function() error("again") end})) end}))`, expect: scriptError(/^\(error object is a table value\)$/) },
  { name: "the main thread closed from a coroutine", source: `coroutine.close(coroutine.running())`, expect: scriptError(/cannot close a running coroutine/) },

  // State poisoning: the run that follows checks it sees nothing (assertHealthy plus the isolation suite).
  { name: "poisoning the string metatable", source: `getmetatable("").__index = function() return "pwned" end`, expect: scriptError(/attempt to index a boolean value/) },
  { name: "replacing string library functions and globals", source: `string.format = nil string.rep = function() return "pwned" end json.encode = nil hmacShaSign = nil _G.secrets = {signingSecret = "pwned"} return {status="ignore"}`, expect: (o) => assert.ok(o.ok) },
  { name: "host prototype pollution through every value that reaches JavaScript", source: pollution, expect: (o) => {
    assert.ok(o.ok, JSON.stringify(o));
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.equal(Object.prototype.hasOwnProperty.call(Object.prototype, "polluted"), false);
  } },

  // Host limits: logs and results.
  { name: "a million log calls", source: `for i = 1, 1e6 do log("spam " .. i) end return {status="ignore"}`, expect: (o) => {
    timeout(o);
    assert.equal(o.logs.length, 100);
    assert.equal(o.logs[98]!.description, "spam 99");
    assert.match(o.logs[99]!.description, /log limit of 100 lines reached; further lines were dropped/);
  } },
  { name: "a cyclic result", source: `local r = {status="ignore"} r.self = r return r`, expect: (o) => expectError(o, "invalid_result", /reference cycle/) },
  { name: "an oversized result", source: `return {status="ignore", invoiceId="inv_1", padding=string.rep("x", 70000)}`, expect: (o) => expectError(o, "invalid_result", /larger than 65536 bytes/) },
  { name: "a huge error message", source: `error(string.rep("x", 1e6))`, expect: (o) => {
    expectError(o, "script_error");
    assert.ok(!o.ok && o.error.message.length <= 4097);
  } },

  // fetch: internal addresses in every spelling, by name, by redirect; slow and endless answers; too many fetches.
  { name: "fetch to 127.0.0.1", source: () => FETCH(`http://127.0.0.1:${server.port}/`), expect: fetchRefused(/^fetch refused: 127\.0\.0\.1 is a private or reserved address$/) },
  { name: "fetch to [::1]", source: () => FETCH(`http://[::1]:${v6server.port}/`), expect: fetchRefused(/^fetch refused: ::1 is a private or reserved address$/) },
  { name: "fetch to 2130706433 (127.0.0.1 as one number)", source: () => FETCH(`http://2130706433:${server.port}/`), expect: fetchRefused(/^fetch refused: 127\.0\.0\.1 is a private/) },
  { name: "fetch to 0x7f.1 (127.0.0.1 in hex shorthand)", source: () => FETCH(`http://0x7f.1:${server.port}/`), expect: fetchRefused(/^fetch refused: 127\.0\.0\.1 is a private/) },
  { name: "fetch to [::ffff:127.0.0.1] (IPv4-mapped)", source: () => FETCH(`http://[::ffff:127.0.0.1]:${server.port}/`), expect: fetchRefused(/^fetch refused: ::ffff:7f00:1 is a private/) },
  { name: "fetch to 169.254.169.254 (cloud metadata)", source: FETCH("http://169.254.169.254/latest/meta-data/"), expect: fetchRefused(/169\.254\.169\.254 is a private/) },
  { name: "fetch to 10.0.0.1", source: FETCH("http://10.0.0.1/"), expect: fetchRefused(/10\.0\.0\.1 is a private/) },
  { name: "fetch to a name resolving to loopback (localhost)", source: () => FETCH(`http://localhost:${server.port}/`), expect: fetchRefused(/^fetch refused: localhost resolves to (127\.0\.0\.1|::1), a private or reserved address$/) },
  { name: "fetch of file://", source: FETCH("file:///etc/passwd"), expect: fetchRefused(/only http and https/) },
  { name: "a redirect to an internal address", source: () => FETCH(`http://public.test:${server.port}/redirect?to=${encodeURIComponent(`http://127.0.0.1:${server.port}/secret`)}`), expect: (o) => {
    fetchRefused(/^fetch refused: 127\.0\.0\.1 is a private/, false)(o);
    assert.deepEqual(server.requests.map((r) => r.url), [`/redirect?to=${encodeURIComponent(`http://127.0.0.1:${server.port}/secret`)}`]);
  } },
  { name: "a redirect to a name resolving to loopback", source: () => FETCH(`http://public.test:${server.port}/redirect?to=${encodeURIComponent(`http://localhost:${server.port}/secret`)}`), expect: (o) => {
    fetchRefused(/localhost resolves to/, false)(o);
    assert.equal(server.requests.length, 1);
  } },
  { name: "a redirect to file://", source: () => FETCH(`http://public.test:${server.port}/redirect?to=${encodeURIComponent("file:///etc/passwd")}`), expect: fetchRefused(/redirect to file: refused: only http and https/, false) },
  { name: "more than 3 redirects", source: () => FETCH(`http://public.test:${server.port}/chain?n=5`), expect: (o) => {
    fetchRefused(/too many redirects \(more than 3\)/, false)(o);
    assert.equal(server.requests.length, 4);
  } },
  { name: "an endless slow response", source: () => FETCH(`http://public.test:${server.port}/slow`), expect: fetchRefused(/fetch timed out after 400 ms/, false) },
  { name: "a response larger than fetchMaxBytes", source: () => FETCH(`http://public.test:${server.port}/big`), expect: fetchRefused(/larger than 65536 bytes/, false) },
  { name: "too many fetches", source: () => `local out = {} for i = 1, 6 do local r, e = fetch("http://public.test:${server.port}/ok") out[i] = r and r.status or e end return {status="ignore", invoiceId=table.concat(out, "|")}`, expect: (o) => {
    assert.ok(o.ok);
    const parts = (o.result.invoiceId ?? "").split("|");
    assert.deepEqual(parts.slice(0, 3), ["200", "200", "200"]);
    for (const p of parts.slice(3)) assert.match(p, /limit of 3 fetches per run/);
    assert.equal(server.requests.length, 3);
    assert.equal(o.fetches.length, 6);
  } },
];

function pollution(): string {
  return `
    local evil = json.decode('{"__proto__": {"polluted": "yes"}, "constructor": {"prototype": {"polluted": "yes"}}}')
    request.headers.__proto__ = { polluted = "yes" }
    getInvoice("__proto__")
    getInvoice("constructor")
    fetch("http://public.test:${server.port}/ok", { method = "POST", headers = { ["__proto__"] = "x", polluted = "yes" }, body = json.encode(evil) })
    log(json.encode(evil))
    return { status = "ignore", invoiceId = "__proto__", __proto__ = evil, constructor = evil }`;
}

describe("host prototype pollution inside the sandbox worker's own realm", () => {
  test("nothing a script sends to the host (JSON, headers, ids, results) reaches the worker's prototypes", async () => {
    const instrumented = createSandbox(
      { poolSize: 1, cpuMs: 1_000, wallMs: 3_000, fetchAllow: ["public.test"] },
      {
        workerUrl: new URL("./fixtures/crashing.worker.ts", import.meta.url),
        lookup: publicTest,
      },
    );
    try {
      const clean = await run(instrumented, `--probe:realm`);
      assert.deepEqual(clean.ok && clean.result.invoiceId, "undefined|undefined|false");
      const outcome = await run(instrumented, pollution());
      assert.ok(outcome.ok, JSON.stringify(outcome));
      assert.equal(outcome.fetches[0]?.status, 200, "the polluting fetch reached the worker's fetch path");
      const after = await run(instrumented, `--probe:realm`);
      assert.deepEqual(after.ok && after.result.invoiceId, "undefined|undefined|false");
    } finally {
      await instrumented.close();
    }
  });
});

describe("hostile scripts", () => {
  assert.ok(cases.length >= 25);
  for (const c of cases) {
    test(`${c.name}: contained, and a normal script runs after it`, async () => {
      server.requests.length = 0;
      v6server.requests.length = 0;
      const source = typeof c.source === "function" ? c.source() : c.source;
      const outcome = await run(sandbox, source);
      c.expect(outcome);
      await assertHealthy(sandbox);
    });
  }
});
