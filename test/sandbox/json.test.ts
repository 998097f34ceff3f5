// The dkjson behaviours plugins rely on: [] vs {} round trips, json.null, unicode escapes, nil plus
// a position and a message on bad input, and encoding rules (empty table, numbers, escapes, cycles,
// options). test/sandbox/dkjson.test.ts compares the finer points with dkjson byte for byte.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createSandbox, type Sandbox } from "../../src/sandbox/index.ts";
import { evaluate, expectError, run } from "./helpers.ts";

let sandbox: Sandbox;
before(() => {
  sandbox = createSandbox({ poolSize: 1 });
});
after(() => sandbox.close());

const lua = (expression: string) => evaluate(sandbox, expression);

describe("json.encode", () => {
  test("encodes scalars, arrays and objects", async () => {
    assert.equal(await lua(`json.encode({1, 2, "three", true, false})`), `[1,2,"three",true,false]`);
    assert.equal(await lua(`json.encode({a = {b = {c = 1}}})`), `{"a":{"b":{"c":1}}}`);
    assert.equal(await lua(`json.encode("x") .. json.encode(12) .. json.encode(1.5) .. json.encode(nil) .. json.encode(true)`), `"x"121.5nulltrue`);
  });

  test("an empty table encodes as [] (dkjson), a decoded {} stays {}", async () => {
    assert.equal(await lua(`json.encode({})`), "[]");
    assert.equal(await lua(`json.encode(json.decode("{}"))`), "{}");
    assert.equal(await lua(`json.encode(json.decode("[]"))`), "[]");
    assert.deepEqual(JSON.parse(await lua(`json.encode(json.decode('{"a":[],"b":{},"c":[{}]}'))`)), { a: [], b: {}, c: [{}] });
    assert.equal(await lua(`json.encode(setmetatable({}, {__jsontype = "object"}))`), "{}");
  });

  test("json.null encodes as null, also inside tables", async () => {
    assert.equal(await lua(`json.encode(json.null)`), "null");
    assert.equal(await lua(`json.encode({json.null, 1})`), "[null,1]");
    assert.equal(await lua(`json.encode({a = json.null})`), `{"a":null}`);
  });

  test("strings are escaped; UTF-8 passes through; U+2028/2029 are escaped", async () => {
    const out = await lua(`json.encode("quote \\" backslash \\\\ nl \\n tab \\t nul \\0 bell \\7 é ☃ \\u{2028}")`);
    assert.equal(out, `"quote \\" backslash \\\\ nl \\n tab \\t nul \\u0000 bell \\u0007 é ☃ \\u2028"`);
    assert.equal(JSON.parse(out), `quote " backslash \\ nl \n tab \t nul \u0000 bell \u0007 é ☃ \u2028`);
  });

  test("integers stay integers, floats are floats, NaN and infinity become null", async () => {
    assert.equal(await lua(`json.encode({1, 2.5, 3.0, -0.25, 1e300, 0/0, math.huge, -math.huge, math.maxinteger})`), `[1,2.5,3.0,-0.25,1e+300,null,null,null,9223372036854775807]`);
  });

  test("sparse arrays keep their holes as null; mixed keys make an object", async () => {
    assert.equal(await lua(`json.encode({[1] = "a", [3] = "c"})`), `["a",null,"c"]`);
    assert.deepEqual(JSON.parse(await lua(`json.encode({1, 2, x = 3})`)), { "1": 1, "2": 2, x: 3 });
  });

  test("keyorder and __jsonorder fix the key order; indent pretty-prints", async () => {
    assert.equal(await lua(`json.encode({b = 1, a = 2, c = 3}, {keyorder = {"c", "a", "b"}})`), `{"c":3,"a":2,"b":1}`);
    assert.equal(await lua(`json.encode(setmetatable({b = 1, a = 2}, {__jsonorder = {"a", "b"}}))`), `{"a":2,"b":1}`);
    assert.equal(await lua(`json.encode({a = {b = 1}}, {indent = true})`), `{\n  "a":{\n    "b":1\n  }\n}`);
  });

  test("__tojson customises a value", async () => {
    assert.equal(await lua(`json.encode({x = setmetatable({}, {__tojson = function() return '"custom"' end})})`), `{"x":"custom"}`);
  });

  test("cycles and unsupported types are errors at the caller's line", async () => {
    expectError(await run(sandbox, `local t = {} t.self = t\nlocal s = json.encode(t)`), "script_error", /^\[plugin\]:2: reference cycle$/);
    expectError(await run(sandbox, `json.encode({f = print})`), "script_error", /^\[plugin\]:1: type 'function' is not supported by JSON\.$/);
    expectError(await run(sandbox, `json.encode({[{}] = 1, [{}] = 2, x = 1})`), "script_error", /not supported as a key/);
  });
});

describe("json.decode", () => {
  test("decodes objects, arrays, numbers, booleans and nested values", async () => {
    assert.equal(await lua(`json.decode('{"a": [1, 2, {"b": true}], "c": "d"}').a[3].b`), "true");
    assert.equal(await lua(`math.type(json.decode("[1]")[1]) .. math.type(json.decode("[1.0]")[1]) .. json.decode("[-1.5e2]")[1]`), "integerfloat-150.0");
    assert.equal(await lua(`json.decode(" \\n\\t 42 \\r\\n")`), "42");
  });

  test("decoded objects and arrays carry __jsontype metatables", async () => {
    assert.equal(await lua(`getmetatable(json.decode("{}")).__jsontype .. getmetatable(json.decode("[]")).__jsontype`), "objectarray");
  });

  test("null decodes to nil by default, or to the nullval argument (json.null)", async () => {
    assert.equal(await lua(`json.decode('{"a": null, "b": 1}').a`), "nil");
    assert.equal(await lua(`json.decode('{"a": null}', 1, json.null).a == json.null`), "true");
    assert.equal(await lua(`json.decode("null", 1, json.null) == json.null`), "true");
    assert.deepEqual(JSON.parse(await lua(`json.encode(json.decode('{"a":null,"b":[null]}', 1, json.null))`)), { a: null, b: [null] });
  });

  test("unicode escapes become UTF-8, surrogate pairs are joined", async () => {
    assert.equal(await lua(`json.decode('"caf\\\\u00e9 \\\\u2603 \\\\ud83d\\\\ude00"')`), "café ☃ 😀");
    assert.equal(await lua(`#json.decode('"\\\\ud83d\\\\ude00"')`), "4");
    assert.equal(await lua(`json.decode('"\\\\"\\\\\\\\\\\\/\\\\b\\\\f\\\\n\\\\r\\\\t"') == "\\"\\\\/\\b\\f\\n\\r\\t"`), "true");
    assert.equal(await lua(`json.decode('"\\\\u0000"') == "\\0"`), "true");
  });

  test("raw UTF-8 passes through and a round trip keeps every character", async () => {
    const text = "Grüße, 日本語, emoji 🎉, quote \" and \\ backslash";
    const out = await evaluate(sandbox, `json.decode(json.encode(json.decode(request.body))).text`, { request: { body: Buffer.from(JSON.stringify({ text })) } });
    assert.equal(out, text);
  });

  test("bad input returns nil, a position and a message (dkjson's shape) instead of raising", async () => {
    for (const bad of [`{`, `{"a":}`, `[1,]`, `[1 2]`, `{"a" 1}`, `tru`, `"unterminated`, `{'a':1}`, ``, `   `, `[1]x`, `{"a":1}}`, `"\\x"`, `"\\u12"`, `01x`, `-`]) {
      const out = await lua(`select("#", json.decode(${luaString(bad)})) .. "|" .. tostring(json.decode(${luaString(bad)})) .. "|" .. math.type(select(2, json.decode(${luaString(bad)}))) .. "|" .. tostring(select(3, json.decode(${luaString(bad)})))`);
      const [count, value, position, message] = out.split("|");
      assert.equal(count, "3", `${bad}: ${out}`);
      assert.equal(value, "nil", `${bad}: ${out}`);
      assert.equal(position, "integer", `${bad}: ${out}`);
      assert.match(message!, /at line \d+, column \d+$|\(reached the end\)$/, `${bad}: ${out}`);
    }
  });

  test("a non-string argument returns nil, 1 and a message", async () => {
    assert.equal(await lua(`select(2, json.decode(nil)) .. " " .. select(3, json.decode(nil))`), "1 json.decode expects a string, got nil");
    assert.equal(await lua(`select(3, json.decode({}))`), "json.decode expects a string, got table");
  });

  test("with a start position, decode scans one value and returns the next position", async () => {
    assert.equal(await lua(`(function() local v, pos = json.decode('[1] [2]', 1) local w = json.decode('[1] [2]', pos) return v[1] .. "," .. pos .. "," .. w[1] end)()`), "1,4,2");
  });

  test("very deep nesting is refused, not a crash", async () => {
    assert.match(await lua(`select(3, json.decode(string.rep("[", 5000) .. string.rep("]", 5000)))`), /^too deeply nested at line 1, column 1001$/);
  });

  test("a UTF-8 byte order mark is skipped", async () => {
    assert.equal(await lua(`json.decode("\\239\\187\\191[7]")[1]`), "7");
  });
});

function luaString(s: string): string {
  return `"${s.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
}
