// dkjson compatibility (issue 15): plugins written for dkjson run unchanged. Every expected value in
// the tables below was produced by dkjson itself (2.6, the pure-Lua reader) under the stock `lua5.4`
// interpreter, running the same Lua source; the sandbox's implementation is its own.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createSandbox, type Sandbox } from "../../src/sandbox/index.ts";
import { evaluate, expectError, returned, run } from "./helpers.ts";

let sandbox: Sandbox;
before(() => {
  sandbox = createSandbox({ poolSize: 1, cpuMs: 5000 }); // the BMP sweep below takes more than the default budget on a busy machine
});
after(() => sandbox.close());

const lua = (expression: string) => evaluate(sandbox, expression);

/** A Lua string literal holding exactly the UTF-8 bytes of `s` (every byte as a decimal escape). */
function luaBytes(s: string): string {
  return `"${[...Buffer.from(s, "utf8")].map((b) => `\\${b}`).join("")}"`;
}

const chunk = (source: string) => returned(sandbox, source);

/** Input dkjson refuses too: [text, position, message] as dkjson returns them. */
const DKJSON_REFUSALS: [string, number, string][] = [
  ["{", 2, "unterminated object at line 1, column 1"],
  ["{\"a\":}", 6, "no valid JSON value at line 1, column 6"],
  ["tru", 1, "no valid JSON value at line 1, column 1"],
  ["\"unterminated", 14, "unterminated string at line 1, column 1"],
  ["{'a':1}", 2, "no valid JSON value at line 1, column 2"],
  ["", 1, "no valid JSON value (reached the end)"],
  ["   ", 4, "no valid JSON value (reached the end)"],
  ["-", 1, "no valid JSON value at line 1, column 1"],
  ["1e", 1, "no valid JSON value at line 1, column 1"],
  ["+1", 1, "no valid JSON value at line 1, column 1"],
  ["1.5e+", 1, "no valid JSON value at line 1, column 1"],
  ["Infinity", 1, "no valid JSON value at line 1, column 1"],
  ["NaN", 1, "no valid JSON value at line 1, column 1"],
  ["[1,2", 5, "unterminated array at line 1, column 1"],
  ["{\"a\":1", 7, "unterminated object at line 1, column 1"],
  ["[", 2, "unterminated array at line 1, column 1"],
  ["\"abc", 5, "unterminated string at line 1, column 1"],
  ["[-]", 2, "no valid JSON value at line 1, column 2"],
  ["\n\n  [1,\n  x]", 11, "no valid JSON value at line 4, column 3"],
  ["nul", 1, "no valid JSON value at line 1, column 1"],
  ["truex", 1, "no valid JSON value at line 1, column 1"],
  ["0.1e", 1, "no valid JSON value at line 1, column 1"],
  ["--1", 1, "no valid JSON value at line 1, column 1"],
  ["1..2", 1, "no valid JSON value at line 1, column 1"],
  ["1-2", 1, "no valid JSON value at line 1, column 1"],
  ["{\"a\":1,,}", 8, "no valid JSON value at line 1, column 8"],
  ["[,1]", 2, "no valid JSON value at line 1, column 2"],
  ["{\"a\":1\r\n,\r\n x}", 13, "no valid JSON value at line 3, column 2"],
  ["\r\r[x]", 4, "no valid JSON value at line 1, column 4"],
  ["\n\r[x]", 4, "no valid JSON value at line 2, column 3"],
  ["[1,\n\"abc", 9, "unterminated string at line 2, column 1"],
  ["{\"a\":[1,{\"b\":", 14, "unterminated object at line 1, column 9"],
  ["{\"a\":tru}", 6, "no valid JSON value at line 1, column 6"],
  ["\"a\\", 4, "unterminated string at line 1, column 1"],
  ["{,}", 2, "no valid JSON value at line 1, column 2"],
  ["[[[", 4, "unterminated array at line 1, column 3"],
  ["[[1]", 5, "unterminated array at line 1, column 1"],
  ["\u0000", 1, "no valid JSON value at line 1, column 1"],
  ["[1.5.5]", 2, "no valid JSON value at line 1, column 2"],
  ["{\"a\":[1,2,", 11, "unterminated array at line 1, column 6"],
];

/** [what, Lua source returning a string, what dkjson's run of the same source returned]. */
const DKJSON_ENCODINGS: [string, string, string][] = [
  ["indent: objects break lines, arrays do not, no space after the colon", "return json.encode({ a = { 1, 2, { b = 3 } }, c = {} }, { indent = true, keyorder = { \"a\", \"c\" } })", "{\n  \"a\":[1,2,{\n      \"b\":3\n    }],\n  \"c\":[]\n}"],
  ["indent: an empty object", "return json.encode(setmetatable({}, { __jsontype = \"object\" }), { indent = true }) .. \"|\" .. json.encode({ x = setmetatable({}, { __jsontype = \"object\" }) }, { indent = true })", "{\n}|{\n  \"x\":{\n  }\n}"],
  ["indent: objects in an array", "return json.encode({ { a = 1 }, { b = 2 } }, { indent = true })", "[{\n    \"a\":1\n  },{\n    \"b\":2\n  }]"],
  ["indent: state.level, any true value, false", "return json.encode({ a = 1 }, { indent = true, level = 2 }) .. \"|\" .. json.encode({ a = 1 }, { indent = 1 }) .. \"|\" .. json.encode({ a = 1 }, { indent = false })", "{\n      \"a\":1\n    }|{\n  \"a\":1\n}|{\"a\":1}"],
  ["exception = json.encodeexception writes the reason as a string", "local t = {} t.self = t\nreturn json.encode({ f = print }, { exception = json.encodeexception }) .. \"|\" .. json.encode(t, { exception = json.encodeexception }) .. \"|\" ..\n  json.encode({ x = setmetatable({}, { __tojson = function() return nil, \"boom\" end }) }, { exception = json.encodeexception }) .. \"|\" ..\n  json.encode({ x = setmetatable({}, { __tojson = function() return nil end }) }, { exception = json.encodeexception })", "{\"f\":\"<type 'function' is not supported by JSON.>\"}|{\"self\":\"<reference cycle>\"}|{\"x\":\"<boom>\"}|{\"x\":\"<custom encoder failed>\"}"],
  ["an exception handler gets reason, value, state and message; its string is inserted", "return json.encode({ a = coroutine.create(print) }, { exception = function(r, v, s, m) return json.quotestring(r .. \"|\" .. type(v) .. \"|\" .. type(s.buffer) .. \"|\" .. m) end })", "{\"a\":\"unsupported type|thread|table|type 'thread' is not supported by JSON.\"}"],
  ["an exception handler may write into state.buffer and return true", "return json.encode({ print }, { exception = function(reason, value, state) state.bufferlen = state.bufferlen + 1 state.buffer[state.bufferlen] = '\"fn\"' return true end }) .. \"|\" ..\n  json.encode({ print, 1 }, { exception = function() return 42 end })", "[\"fn\"]|[,1]"],
  ["an exception handler returning nothing keeps the error, with its message if it gives one", "local a = select(2, pcall(json.encode, { f = print }, { exception = function() return nil end }))\nlocal b = select(2, pcall(json.encode, { f = print }, { exception = function(reason) return nil, \"mine: \" .. reason end }))\nlocal c = select(2, pcall(json.encode, { [print] = 1 }, { exception = json.encodeexception }))\nlocal d = select(2, pcall(json.encode, { x = setmetatable({}, { __tojson = function() return nil, \"boom\" end }) }))\nlocal e = select(2, pcall(json.encode, { x = setmetatable({}, { __tojson = function() return false end }) }))\nreturn table.concat({ a, b, c, d, e }, \"|\"):gsub(\"[^|]*:%d+: \", \"\")", "type 'function' is not supported by JSON.|mine: unsupported type|type 'function' is not supported as a key by JSON.|boom|custom encoder failed"],
  ["__tojson may write into state.buffer and return true", "local Money = { __tojson = function(self, state)\n  state.bufferlen = state.bufferlen + 1\n  state.buffer[state.bufferlen] = string.format('\"%d.%02d\"', self.cents // 100, self.cents % 100)\n  return true\nend }\nreturn json.encode({ amount = setmetatable({ cents = 4999 }, Money) })", "{\"amount\":\"49.99\"}"],
  ["__tojson may call json.encode with its state (it appends to the buffer)", "local Wrapped = { __tojson = function(self, state) return json.encode(self.inner, state) end }\nreturn json.encode({ 1, setmetatable({ inner = { a = { 1, 2 } } }, Wrapped), 3 }) .. \"|\" .. json.encode({ 1, setmetatable({ inner = { a = { 1, 2 } } }, Wrapped), 3 }, { indent = true })", "[1,{\"a\":[1,2]},3]|[1,{\n  \"a\":[1,2]\n},3]"],
  ["json.addnewline adds a newline and state.level's indentation when indenting", "local NL = { __tojson = function(self, state) json.addnewline(state) state.bufferlen = state.bufferlen + 1 state.buffer[state.bufferlen] = '\"x\"' return true end }\nreturn json.encode({ a = setmetatable({}, NL) }, { indent = true }) .. \"|\" .. json.encode({ a = setmetatable({}, NL) }, { indent = true, level = 3 }) .. \"|\" .. json.encode({ a = setmetatable({}, NL) })", "{\n  \"a\":\n\"x\"\n}|{\n        \"a\":\n      \"x\"\n      }|{\"a\":\"x\"}"],
  ["a caller's buffer: encode appends after state.bufferlen and returns true", "local buf = { \"prefix:\" }\nlocal st = { buffer = buf }\nlocal r1 = json.encode({ 1, 2 }, st)\nlocal first = table.concat(buf) .. \" \" .. st.bufferlen\nlocal st2 = { buffer = { \"[\", \"1\" }, bufferlen = 2 }\njson.encode(\",\", st2)\nlocal st3 = {}\nlocal r3 = json.encode({ 1 }, st3)\nreturn tostring(r1) .. \" \" .. first .. \" \" .. table.concat(st2.buffer, \"\", 1, st2.bufferlen) .. \" \" .. r3 .. \" \" .. tostring(st3.buffer) .. \" \" .. tostring(st3.bufferlen)", "true [1,2] 5 [1\",\" [1] nil nil"],
  ["a __tojson returning a non-string true value adds nothing", "return json.encode({ setmetatable({}, { __tojson = function() return 5 end }), 2 })", "[,2]"],
  ["arrays, sparse tables, n fields and number keys", "return table.concat({ json.encode({ [1.5] = \"a\", [2] = \"b\" }), json.encode({ [1] = 1, [2.0] = 2 }), json.encode({ n = 3 }), json.encode({ n = 3, 1 }), json.encode({ [20] = 1 }), json.encode({ [11] = 1, [1] = 1, [2] = 1, [3] = 1, [4] = 1, [5] = 1 }), json.encode(setmetatable({ 1, 2 }, { __jsontype = \"object\" })) }, \"|\")", "{\"1.5\":\"a\",\"2\":\"b\"}|[1,2]|[null,null,null]|[1,null,null]|{\"20\":1}|[1,1,1,1,1,null,null,null,null,null,1]|[1,2]"],
  ["numbers as Lua writes them; NaN and infinities as null", "return json.encode({ -0.0, 0.1, 1 / 3, 2 ^ 53, 1e15, 123456789012.5, math.mininteger, 1e100, 5e-324, 3.0, 0 / 0, math.huge, -math.huge })", "[-0.0,0.1,0.33333333333333,9.007199254741e+15,1e+15,123456789012.5,-9223372036854775808,1e+100,4.9406564584125e-324,3.0,null,null,null]"],
  ["__jsonorder, and __tojson behind a __metatable field", "return json.encode(setmetatable({ a = 1, b = 2, c = 3 }, { __jsonorder = { \"c\", \"zz\", \"a\" } })) .. \"|\" .. json.encode(setmetatable({}, { __tojson = function() return '\"hidden\"' end, __metatable = \"locked\" }))", "{\"c\":3,\"a\":1,\"b\":2}|\"hidden\""],
  ["quotestring and encodeexception", "return json.quotestring(12) .. \"|\" .. json.quotestring(\"a\\\"b\\n\\127\") .. \"|\" .. json.encodeexception(\"reference cycle\", {}, {}, \"reference cycle\")", "\"12\"|\"a\\\"b\\n\\u007f\"|\"<reference cycle>\""],
];

describe("json.decode returns dkjson's nil, position, message", () => {
  test("a plugin that rejects with the third value gets a rejection (401), not a script error (500)", async () => {
    const source = `local obj, pos, err = json.decode(request.body)
if not obj then reject("bad json: " .. err .. " (byte " .. pos .. ")") end
return { status = "ignore" }`;
    expectError(await run(sandbox, source, { request: { body: Buffer.from('{"id":"evt_1","data":') } }), "rejected", /^bad json: unterminated object at line 1, column 1 \(byte 22\)$/);
  });

  test("position and message match dkjson's for every input both refuse", async () => {
    const source = `local inputs, out = { ${DKJSON_REFUSALS.map(([text]) => luaBytes(text)).join(", ")} }, {}
for i, text in ipairs(inputs) do
  local n, value, pos, message = select("#", json.decode(text)), json.decode(text)
  out[i] = n .. "|" .. tostring(value) .. "|" .. pos .. "|" .. message
end
return table.concat(out, "\\0")`;
    const got = (await chunk(source)).split("\0");
    DKJSON_REFUSALS.forEach(([text, pos, message], i) => assert.equal(got[i], `3|nil|${pos}|${message}`, JSON.stringify(text)));
  });

  test("json.decode(123) reads the number's text, as dkjson does", async () => {
    assert.equal(await chunk(`local a, b = json.decode(123) local c, d = json.decode(12.5) return table.concat({ math.type(a), a, b, c, d }, " ")`), "integer 123 4 12.5 5");
  });

  test("the second value is the position right after the value; start positions work as in dkjson", async () => {
    assert.equal(await chunk(`return select(2, json.decode(" 42 ")) .. " " .. select(2, json.decode("[1] [2]", 4)) .. " " .. json.decode("[1] [2]", 4)[1]`), "4 8 2");
    assert.equal(await chunk(`local v, p, m = json.decode("[1]", 10) return tostring(v) .. " " .. p .. " " .. m`), "nil 4 no valid JSON value (reached the end)");
    assert.equal(await chunk(`return json.decode("[1]", 0)[1] .. " " .. json.decode("[1]", -3)[1] .. " " .. json.decode("[1]", "2")`), "1 1 1");
  });
});

// Input dkjson's reader accepts beyond strict JSON, and its use of objectmeta (issue 31, item 14). Each
// expected value is what stock Lua 5.4.4 with dkjson 2.6 (Debian's lua5.4 and lua-dkjson) printed for
// the same script: save it as x.lua and run `lua5.4 -e 'print((loadfile("x.lua"))())'`.
describe("input dkjson accepts and objectmeta's __newindex", () => {
  test("// and /* */ comments are skipped wherever whitespace may be", async () => {
    const script = String.raw`local json = require("dkjson")
local r = {}
local function put(v, pos, err) r[#r + 1] = json.encode(v, { keyorder = { "ok", "ids", "a", "b" } }) .. " " .. tostring(pos) .. (err and " " .. err or "") end
put(json.decode('// sent by the provider\n{"ok": /* always */ true, "ids": [1, 2 /* two */, 3] // the rest\n}'))
put(json.decode("/* a */ /* b */ [1] // no newline at the end"))
put(json.decode('{"a": 1, //x\r"b" /**/ : /***/ 2}'))
put(json.decode("[1, /* never closed"))
put(json.decode("[1, // never ends"))
put(json.decode("[1, / 2]"))
put(json.decode("/*/ 5 */ 6"))
return table.concat(r, "\n")`;
    // What stock Lua 5.4.4 + dkjson 2.6 print.
    const stock = [
      '{"ok":true,"ids":[1,2,3]} 91',
      "[1] 20",
      '{"a":1,"b":2} 33',
      "null 20 unterminated array at line 1, column 1",
      "null 18 unterminated array at line 1, column 1",
      "null 5 no valid JSON value at line 1, column 5",
      "6 11",
    ].join("\n");
    assert.equal(await chunk(script), stock);
  });

  test("\\f and \\v are whitespace, and a byte-order mark is skipped with a start position too", async () => {
    const script = String.raw`local json = require("dkjson")
local r = {}
local function put(v, pos, err) r[#r + 1] = json.encode(v, { keyorder = { "ok", "ids", "a", "b" } }) .. " " .. tostring(pos) .. (err and " " .. err or "") end
put(json.decode("\f[\v1,\f2\v]\v"))
put(json.decode('{\f"a"\v:\f"b"\v}'))
put(json.decode("\239\187\191{\"a\":1}", 1))
put(json.decode("\239\187\191[7]"))
put(json.decode("[1,\239\187\191 2]"))
put(json.decode("xx\239\187\191[3]", 3))
put(json.decode("\239\187\191"))
return table.concat(r, "\n")`;
    // What stock Lua 5.4.4 + dkjson 2.6 print.
    const stock = ["[1,2] 10", '{"a":"b"} 14', '{"a":1} 11', "[7] 7", "[1,2] 10", "[3] 9", "null 4 no valid JSON value (reached the end)"].join("\n");
    assert.equal(await chunk(script), stock);
  });

  test("objectmeta's and arraymeta's __newindex is called for each new key, in document order", async () => {
    const script = String.raw`local json = require("dkjson")
local seen = {}
local Ordered = { __newindex = function(t, k, v)
  seen[#seen + 1] = tostring(k) .. "=" .. (type(v) == "table" and "{}" or tostring(v))
  rawset(t, k, v)
end }
local obj = json.decode('{"z": 1, "a": {"y": null, "b": 2}, "m": [3, null, 4], "z": 5}', 1, nil, Ordered, Ordered)
local r = { table.concat(seen, ","), tostring(obj.z), tostring(obj.a.b), tostring(obj.m[1]) .. tostring(obj.m[2]) .. tostring(obj.m[3]) }
local lower = { __newindex = function(t, k, v) rawset(t, type(k) == "string" and k:lower() or k, v) end }
local h = json.decode('{"Content-Type": "x", "X-Id": 7}', 1, nil, lower)
r[#r + 1] = tostring(h["content-type"]) .. " " .. tostring(h["x-id"]) .. " " .. tostring(rawget(h, "X-Id"))
local ok, err = pcall(json.decode, '{"a": 1}', 1, nil, { __newindex = function() error("no new keys", 0) end })
r[#r + 1] = tostring(ok) .. " " .. tostring(err)
local sink = {}
local t = json.decode('{"a": 1, "b": 2}', 1, nil, { __newindex = sink })
r[#r + 1] = tostring(rawget(t, "a")) .. " " .. tostring(sink.a) .. " " .. tostring(sink.b)
return table.concat(r, " | ")`;
    // What stock Lua 5.4.4 + dkjson 2.6 print.
    const stock = "z=1,y=nil,b=2,a={},1=3,2=nil,3=4,m={} | 5 | 2 | 3nil4 | x 7 nil | false no new keys | nil 1 2";
    assert.equal(await chunk(script), stock);
  });

  test("a __newindex that calls json.decode itself (the reader re-entered) gets dkjson's tables", async () => {
    const script = String.raw`local json = require("dkjson")
local Nested = {}
Nested.__newindex = function(t, k, v)
  if type(v) == "string" and v:sub(1, 1) == "{" then v = json.decode(v, 1, nil, Nested, nil) end
  rawset(t, k, v)
end
local text = '{"id": "evt\\u00e9_1", "payload": "{\\"amount\\": 4999, \\"note\\": \\"caf\\\\u00e9\\", \\"deep\\": \\"{\\\\\\"n\\\\\\": 1.5e3}\\"}", "after": "tab\\there", "n": 12}'
local v = json.decode(text, 1, nil, Nested, nil)
return table.concat({ v.id, tostring(v.payload.amount), v.payload.note, tostring(v.payload.deep.n), v.after, tostring(v.n) }, "|")`;
    // What stock Lua 5.4.4 + dkjson 2.6 print.
    assert.equal(await chunk(script), "evt\u00e9_1|4999|caf\u00e9|1500.0|tab\there|12");
  });

  test("an error raised in __newindex reaches json.decode's caller as it was raised, and decoding goes on working", async () => {
    const script = String.raw`local json = require("dkjson")
local bad = select(2, pcall(json.decode, '[1]', 1, nil, nil, { __newindex = function() error({ code = 7 }) end }))
local ok, err = pcall(function()
  local v = json.decode('{"a": [1, 2]}', 1, nil, nil, { __newindex = function(t, k) if k == 2 then error("no second element") end end })
  return v
end)
return type(bad) .. " " .. tostring(bad.code) .. " | " .. tostring(ok) .. " " .. (err:gsub("^[^:]*:(%d+):", "line %1:")) .. " | " .. json.encode((json.decode('{"after":[true]}')))`;
    // What stock Lua 5.4.4 + dkjson 2.6 print.
    assert.equal(await chunk(script), 'table 7 | false line 4: no second element | {"after":[true]}');
  });
});

describe("numbers of any length", () => {
  test("a provider payload with a 70-digit amount decodes (request.json is not nil)", async () => {
    const seventy = "1".repeat(70);
    const tiny = `0.${"0".repeat(68)}1`;
    const body = Buffer.from(`{"id":"evt_1","data":{"invoiceId":"inv_1","amount":${seventy},"fee":${tiny},"big":1${"0".repeat(400)}}}`);
    const outcome = await run(sandbox, `local d = request.json.data
return { status = "pushInvoice", invoiceId = d.invoiceId .. "|" .. d.amount .. "|" .. math.type(d.amount) .. "|" .. d.fee .. "|" .. tostring(d.big == math.huge) }`, { request: { body } });
    assert.deepEqual(outcome.ok && outcome.result, { status: "pushInvoice", invoiceId: "inv_1|1.1111111111111e+69|float|1e-69|true" });
  });

  test("integers stay integers up to 2^63 - 1 and become floats past it, as Lua's tonumber does", async () => {
    assert.equal(await lua(`math.type(json.decode("9223372036854775807")) .. " " .. json.decode("9223372036854775808") .. " " .. json.decode("-9223372036854775808")`), "integer 9.2233720368548e+18 -9223372036854775808");
  });
});

describe("json.encode writes dkjson's bytes", () => {
  test("exactly the characters dkjson escapes are escaped (every code point of the BMP)", async () => {
    // quotestring is what encode writes strings with (a sample through encode follows the sweep).
    const got = await chunk(`local out = {}
assert(json.encode({ "\\u{80}\\u{2028}\\u{FEFF}\\u{A0}" }) == '["\\\\u0080\\\\u2028\\\\ufeff\\u{A0}"]')
for cp = 0, 0xFFFF do
  if cp < 0xD800 or cp > 0xDFFF then
    local s = utf8.char(cp)
    local e = json.quotestring(s)
    if e ~= '"' .. s .. '"' then out[#out + 1] = string.format("%X:%s", cp, e) end
  end
end
return table.concat(out, " ")`);
    const named: Record<number, string> = { 0x08: "\\b", 0x09: "\\t", 0x0a: "\\n", 0x0c: "\\f", 0x0d: "\\r", 0x22: '\\"', 0x5c: "\\\\" };
    const ranges = [[0x00, 0x1f], [0x22, 0x22], [0x5c, 0x5c], [0x7f, 0x9f], [0xad, 0xad], [0x600, 0x604], [0x70f, 0x70f], [0x17b4, 0x17b5], [0x200c, 0x200f], [0x2028, 0x202f], [0x2060, 0x206f], [0xfeff, 0xfeff], [0xfff0, 0xffff]];
    const expected = ranges.flatMap(([from, to]) =>
      Array.from({ length: to! - from! + 1 }, (_, k) => from! + k).map((cp) => `${cp.toString(16).toUpperCase()}:"${named[cp] ?? `\\u${cp.toString(16).padStart(4, "0")}`}"`),
    );
    assert.equal(expected.length, 121); // dkjson's count
    assert.equal(got, expected.join(" "));
  });

  test("bytes that are not UTF-8 pass through raw, as in dkjson", async () => {
    assert.equal(await lua(`json.encode("\\128\\255 \\237\\160\\128 \\194 \\226\\194\\173") == '"\\128\\255 \\237\\160\\128 \\194 \\226\\\\u00ad"'`), "true");
  });

  for (const [what, source, expected] of DKJSON_ENCODINGS) {
    test(what, async () => {
      assert.equal(await chunk(source), expected);
    });
  }

  test("encode(decode(s)) still works (dkjson fails on decode's position as a state)", async () => {
    assert.equal(await lua(`json.encode(json.decode('{"a":[1,{}]}'))`), `{"a":[1,{}]}`);
  });
});

describe("the rest of dkjson's module", () => {
  test("require('dkjson').use_lpeg() returns the module (dkjson's readme line works), so does pcall(json.use_lpeg)", async () => {
    assert.equal(await chunk(`local json2 = require("dkjson").use_lpeg()
local ok, m = pcall(json.use_lpeg)
return tostring(json2 == json) .. " " .. tostring(ok and m == json) .. " " .. json2.decode("[7]")[1] .. " " .. json2.encode({ 1 })`), "true true 7 [1]");
  });

  test("json.null's metatable is the run's own: changing it does not reach the next run", async () => {
    assert.equal(await lua(`(function() getmetatable(json.null).__tojson = function() return '"changed"' end return json.encode(json.null) end)()`), `"changed"`);
    assert.equal(await lua(`json.encode(json.null)`), "null");
  });
});
