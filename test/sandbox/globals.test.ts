// Every global a plugin sees (docs/plugins.md, "The environment"): its normal use and its error cases, through the
// real worker pool.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { after, before, describe, test } from "node:test";
import { createSandbox, type Sandbox } from "../../src/sandbox/index.ts";
import { evaluate, expectError, run } from "./helpers.ts";

let sandbox: Sandbox;
before(() => {
  sandbox = createSandbox({ poolSize: 1, maxLogLines: 5, maxLogBytes: 64 });
});
after(() => sandbox.close());

describe("request", () => {
  test("request.body is the raw body byte for byte, including NUL and invalid UTF-8", async () => {
    const body = Buffer.from([0x00, 0xff, 0xfe, 0x41, 0x00, 0xc3, 0x28, 0x0a, 0x80]);
    const expected = crypto.createHash("sha256").update(body).digest("hex");
    const out = await evaluate(sandbox, `#request.body .. ":" .. sha(request.body, "sha256")`, { request: { body } });
    assert.equal(out, `${body.length}:${expected}`);
  });

  test("a signature computed over the raw body verifies in Lua", async () => {
    const body = Buffer.from('{"amount": 4999, "note": "caf\u00e9 \u2603"}');
    const sig = crypto.createHmac("sha256", "whsec_test").update(`1700000000.${body.toString("latin1")}`, "latin1").digest("hex");
    const out = await evaluate(sandbox, `timingSafeEqual(hmacShaSign(secrets.signingSecret, "1700000000." .. request.body, "sha256"), request.headers["x-sig"])`, {
      request: { body, headers: { "x-sig": sig } },
    });
    assert.equal(out, "true");
  });

  test("request.method, headers with lower-case names, and query", async () => {
    const out = await evaluate(sandbox, `request.method .. "|" .. request.headers["stripe-signature"] .. "|" .. tostring(request.headers["Stripe-Signature"]) .. "|" .. request.query.storeId`, {
      request: { method: "POST", headers: { "Stripe-Signature": "t=1,v1=aa" }, query: { storeId: "st_9" } },
    });
    assert.equal(out, "POST|t=1,v1=aa|nil|st_9");
  });

  test("request.json is the decoded body when it is JSON, else nil", async () => {
    assert.equal(await evaluate(sandbox, `request.json.data.invoiceId`), "inv_1");
    assert.equal(await evaluate(sandbox, `request.json`, { request: { body: Buffer.from("a=1&b=2") } }), "nil");
    assert.equal(await evaluate(sandbox, `request.json`, { request: { body: Buffer.alloc(0) } }), "nil");
    assert.equal(await evaluate(sandbox, `request.json[2]`, { request: { body: Buffer.from("[1, 2, 3]"), headers: { "content-type": "text/plain" } } }), "2");
  });
});

describe("store, plugin, secrets", () => {
  test("store.id, plugin.name and plugin.version", async () => {
    const out = await evaluate(sandbox, `store.id .. "/" .. plugin.name .. "/" .. plugin.version .. "/" .. math.type(plugin.version)`, {
      store: { id: "st_42" },
      plugin: { name: "acme", version: 7 },
    });
    assert.equal(out, "st_42/acme/7/integer");
  });

  test("secrets are readable and listable with pairs", async () => {
    const out = await evaluate(sandbox, `(function() local n = {} for k, v in pairs(secrets) do n[#n + 1] = k .. "=" .. v end table.sort(n) return table.concat(n, ",") end)()`);
    assert.equal(out, "apiKey=k_123,signingSecret=whsec_test");
    assert.equal(await evaluate(sandbox, `secrets.missing`), "nil");
  });

  test("writing to secrets is a script error, and its metatable is hidden", async () => {
    expectError(await run(sandbox, `secrets.apiKey = "x"`), "script_error", /^\[plugin\]:1: secrets is read-only$/);
    expectError(await run(sandbox, `secrets.newKey = "x"`), "script_error", /read-only/);
    assert.equal(await evaluate(sandbox, `getmetatable(secrets)`), "false");
    expectError(await run(sandbox, `setmetatable(secrets, nil)`), "script_error", /protected metatable/);
  });
});

describe("log and insertLog", () => {
  test("log records lines with their type (info by default) and an ISO time", async () => {
    const before = Date.now();
    const outcome = await run(sandbox, `log("one") log("two", "warning") insertLog("three", "error") log(42) return {status="ignore"}`);
    assert.ok(outcome.ok);
    assert.deepEqual(outcome.logs.map((l) => [l.description, l.type]), [["one", "info"], ["two", "warning"], ["three", "error"], ["42", "info"]]);
    for (const line of outcome.logs) {
      assert.match(line.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.ok(Date.parse(line.at) >= before - 5 && Date.parse(line.at) <= Date.now() + 5);
    }
  });

  test("insertLog is the same function as log; print logs its arguments", async () => {
    assert.equal(await evaluate(sandbox, `log == insertLog`), "true");
    const outcome = await run(sandbox, `print("a", 1, nil, true) return {status="ignore"}`);
    assert.deepEqual(outcome.logs.map((l) => l.description), ["a\t1\tnil\ttrue"]);
  });

  test("an unknown log type is recorded as info; type names are case-insensitive and 'warn' means warning", async () => {
    const outcome = await run(sandbox, `log("a", "debug") log("b", "WARNING") log("c", "warn") log("d", "Error") return {status="ignore"}`);
    assert.deepEqual(outcome.logs.map((l) => l.type), ["info", "warning", "warning", "error"]);
  });

  test("a line longer than maxLogBytes is cut without splitting a UTF-8 character", async () => {
    const outcome = await run(sandbox, `log(string.rep("é", 100)) return {status="ignore"}`);
    const line = outcome.logs[0]!.description;
    assert.ok(Buffer.byteLength(line) <= 64);
    assert.match(line, /^(é)+…$/);
  });

  test("lines past maxLogLines are dropped and the last line says so", async () => {
    const outcome = await run(sandbox, `for i = 1, 50 do log("line " .. i) end return {status="ignore"}`);
    assert.equal(outcome.logs.length, 5);
    assert.deepEqual(outcome.logs.slice(0, 4).map((l) => l.description), ["line 1", "line 2", "line 3", "line 4"]);
    assert.equal(outcome.logs[4]!.type, "warning");
    assert.match(outcome.logs[4]!.description, /log limit of 5 lines reached/);
  });

  test("the lines logged before a failure are returned with it", async () => {
    const outcome = await run(sandbox, `log("first") log("second") local x = nil; return x.field`);
    expectError(outcome, "script_error");
    assert.deepEqual(outcome.logs.map((l) => l.description), ["first", "second"]);
  });
});

describe("getInvoice", () => {
  test("returns this store's invoice as a table, or nil", async () => {
    assert.equal(await evaluate(sandbox, `getInvoice("inv_1").totalInUsd`), "49.99");
    assert.equal(await evaluate(sandbox, `getInvoice("inv_1").invoiceItems[1].productVariantId`), "pv_1");
    assert.equal(await evaluate(sandbox, `getInvoice("inv_1").couponId`), "nil");
    assert.equal(await evaluate(sandbox, `getInvoice("inv_404")`), "nil");
  });

  test("the host sees the id the script asked for", async () => {
    const asked: string[] = [];
    const outcome = await sandbox.run(
      { ...inputOf(`getInvoice("inv_a") getInvoice("inv_b") return {status="ignore"}`) },
      { getInvoice: (id) => (asked.push(id), Promise.resolve(null)) },
    );
    assert.ok(outcome.ok);
    assert.deepEqual(asked, ["inv_a", "inv_b"]);
  });

  test("a failing lookup is a script error; a non-string id is a script error", async () => {
    const failing = await sandbox.run(inputOf(`getInvoice("inv_1") return {status="ignore"}`), { getInvoice: () => Promise.reject(new Error("db down: password=hunter2")) });
    expectError(failing, "script_error", /^\[plugin\]:1: getInvoice: the invoice lookup failed$/);
    expectError(await run(sandbox, `getInvoice(42)`), "script_error", /getInvoice: id must be a string/);
  });

  test("getInvoice works from inside pcall, a gsub callback and a coroutine", async () => {
    const out = await evaluate(
      sandbox,
      `select(2, pcall(getInvoice, "inv_1")).id .. ("x"):gsub("x", function() return getInvoice("inv_1").status end) .. coroutine.wrap(function() return getInvoice("inv_1").id end)()`,
    );
    assert.equal(out, "inv_1pendinginv_1");
  });
});

describe("timingSafeEqual, sha, base64", () => {
  test("timingSafeEqual compares strings of any length", async () => {
    assert.equal(await evaluate(sandbox, `timingSafeEqual("abc", "abc")`), "true");
    assert.equal(await evaluate(sandbox, `timingSafeEqual("abc", "abd")`), "false");
    assert.equal(await evaluate(sandbox, `timingSafeEqual("abc", "abcd")`), "false");
    assert.equal(await evaluate(sandbox, `timingSafeEqual("", "")`), "true");
    expectError(await run(sandbox, `timingSafeEqual("a", nil)`), "script_error", /bad argument #2 to 'timingSafeEqual' \(string expected, got nil\)/);
  });

  test("sha hashes with any supported algorithm name, hex or base64", async () => {
    assert.equal(await evaluate(sandbox, `sha("abc", "SHA-256")`), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert.equal(await evaluate(sandbox, `sha("abc", "sha1", "base64")`), Buffer.from("a9993e364706816aba3e25717850c26c9cd0d89d", "hex").toString("base64"));
    expectError(await run(sandbox, `sha("abc", "md5")`), "script_error", /^\[plugin\]:1: sha: unsupported hash "md5"/);
  });

  test("base64.decode of bad input returns nil and a message", async () => {
    assert.equal(await evaluate(sandbox, `select("#", base64.decode("@@@")) .. tostring(base64.decode("@@@")) .. select(2, base64.decode("@@@"))`), "2nilinvalid base64");
    assert.equal(await evaluate(sandbox, `base64.decode("aGk")`), "hi");
    assert.equal(await evaluate(sandbox, `base64.decode("-_8") == "\\251\\255"`), "true");
  });
});

describe("reject", () => {
  test("reject(message) ends the run as rejected with the message and keeps the logs", async () => {
    const outcome = await run(sandbox, `log("checking") reject("bad signature") return {status="ignore"}`);
    expectError(outcome, "rejected", /^bad signature$/);
    assert.deepEqual(outcome.logs.map((l) => l.description), ["checking"]);
  });

  test("a rejection caught by pcall still ends the run as rejected", async () => {
    expectError(await run(sandbox, `pcall(reject, "caught") return {status="pushInvoice", invoiceId="inv_1"}`), "rejected", /^caught$/);
    expectError(await run(sandbox, `reject()`), "rejected", /rejected by the plugin/);
  });
});

describe("require and the Lua libraries", () => {
  test("require returns json for 'json' and 'dkjson' and fails for anything else", async () => {
    assert.equal(await evaluate(sandbox, `require("json") == json and require("dkjson") == json`), "true");
    for (const name of ["os", "io", "debug", "package", "string", "ffi", "socket"]) {
      expectError(await run(sandbox, `require("${name}")`), "script_error", /not found: plugins can only require 'json' or 'dkjson'/);
    }
  });

  test("string, table, math, utf8, coroutine and os.time/date/clock are available", async () => {
    const out = await evaluate(
      sandbox,
      `string.format("%05.1f", 3.14159) .. table.concat({1, 2}, "-") .. math.floor(2.7) .. utf8.char(233) .. coroutine.wrap(function() coroutine.yield("y") end)() .. type(os.time()) .. os.date("!%Y", 0) .. type(os.clock()) .. ("abc"):upper() .. string.pack(">I2", 258):byte(2)`,
    );
    assert.equal(out, "003.11-22éynumber1970numberABC2");
  });

  test("io, debug, package, dofile, loadfile, string.dump and the rest of os are absent", async () => {
    const out = await evaluate(
      sandbox,
      `table.concat({ tostring(io), tostring(debug), tostring(package), tostring(dofile), tostring(loadfile), tostring(string.dump), tostring(("x").dump), tostring(os.exit), tostring(os.execute), tostring(os.getenv), tostring(os.remove), tostring(os.rename), tostring(os.tmpname), tostring(os.setlocale), tostring(newproxy), tostring(warn) }, ",")`,
    );
    assert.equal(out, Array(16).fill("nil").join(","));
  });

  test("load compiles text with the run's environment and refuses bytecode", async () => {
    assert.equal(await evaluate(sandbox, `load("return store.id")()`), "st_1");
    assert.equal(await evaluate(sandbox, `load("return x", "chunk", "t", {x = 5})()`), "5");
    assert.equal(await evaluate(sandbox, `select(2, load("\\27Lua"))`), "attempt to load a binary chunk (mode is 't')");
    assert.equal(await evaluate(sandbox, `select(2, load("\\27Lua", "x", "b"))`), "attempt to load a binary chunk (mode is 't')");
  });
});

describe("results and errors", () => {
  test("pushInvoice, disputeInvoice and ignore (with or without an invoiceId) are results", async () => {
    const results = [];
    for (const src of [`return {status="pushInvoice", invoiceId="inv_1"}`, `return {status="disputeInvoice", invoiceId="inv_2"}`, `return {status="ignore"}`, `return {status="ignore", invoiceId="inv_3"}`]) {
      const outcome = await run(sandbox, src);
      assert.ok(outcome.ok, JSON.stringify(outcome));
      assert.ok(Number.isFinite(outcome.durationMs) && outcome.durationMs > 0, `the run's time is measured: ${outcome.durationMs}`);
      results.push(outcome.result);
    }
    assert.deepEqual(results, [
      { status: "pushInvoice", invoiceId: "inv_1" },
      { status: "disputeInvoice", invoiceId: "inv_2" },
      { status: "ignore" },
      { status: "ignore", invoiceId: "inv_3" },
    ]);
  });

  test("anything else is invalid_result, with the reason", async () => {
    expectError(await run(sandbox, `return {status="pushInvoice"}`), "invalid_result", /needs invoiceId, a non-empty string, got nil/);
    expectError(await run(sandbox, `return {status="pushInvoice", invoiceId=""}`), "invalid_result", /non-empty string/);
    expectError(await run(sandbox, `return {status="pushInvoice", invoiceId=12}`), "invalid_result", /got number/);
    expectError(await run(sandbox, `return {status="paid", invoiceId="inv_1"}`), "invalid_result", /got "paid"/);
    expectError(await run(sandbox, `return "pushInvoice"`), "invalid_result", /must return a table/);
    expectError(await run(sandbox, `local x = 1`), "invalid_result", /got nil/);
    expectError(await run(sandbox, `return {status="ignore", invoiceId={}}`), "invalid_result", /invoiceId must be a string/);
  });

  test("a script error carries the Lua message and its line", async () => {
    const outcome = await run(sandbox, `local a = 1\nlocal b = 2\nlocal t = nil\nreturn t.x`);
    expectError(outcome, "script_error", /^\[plugin\]:4: attempt to index a nil value \(local 't'\)$/);
    assert.equal(!outcome.ok && outcome.error.line, 4);
    const explicit = await run(sandbox, `\n\nerror("custom failure")`);
    expectError(explicit, "script_error", /^\[plugin\]:3: custom failure$/);
    assert.equal(!explicit.ok && explicit.error.line, 3);
  });

  test("error objects: a table with __tostring gives its text, other values say what they are", async () => {
    expectError(await run(sandbox, `error(setmetatable({}, {__tostring = function() return "custom object" end}))`), "script_error", /^custom object$/);
    expectError(await run(sandbox, `error({code = 1})`), "script_error", /^\(error object is a table value\)$/);
    expectError(await run(sandbox, `error(42)`), "script_error", /^42$/);
    expectError(await run(sandbox, `error()`), "script_error", /^nil$/);
  });

  test("a source that does not compile is a script error with its line", async () => {
    const outcome = await run(sandbox, `local x = 1\nif x then\nreturn {status="ignore"}\n`);
    expectError(outcome, "script_error", /^\[plugin\]:4: 'end' expected \(to close 'if' at line 2\) near <eof>$/);
    assert.equal(!outcome.ok && outcome.error.line, 4);
  });
});

describe("check", () => {
  test("check accepts a valid source and names the line of a syntax error", async () => {
    assert.deepEqual(await sandbox.check(`return {status="ignore"}`), { ok: true });
    assert.deepEqual(await sandbox.check(`local a = 1\nlocal b = = 2`), { ok: false, message: "[plugin]:2: unexpected symbol near '='", line: 2 });
  });

  test("check refuses binary chunks", async () => {
    const result = await sandbox.check("\x1bLuaT\x00\x19\x93");
    assert.equal(result.ok, false);
    assert.match(!result.ok ? result.message : "", /binary/);
  });
});

function inputOf(source: string) {
  return { source, request: { method: "POST", body: Buffer.from("{}"), headers: {}, query: {} }, store: { id: "st_1" }, plugin: { name: "t", version: 1 }, secrets: {} };
}
