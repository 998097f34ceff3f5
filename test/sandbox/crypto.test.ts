// hmacShaSign against the RFC 2202 and RFC 4231 vectors, sha against FIPS 180-4 examples, base64
// against RFC 4648, hex and base64 both ways (Lua-side hex decoding of the keys, hex and base64
// digests), with binary keys and data that are not valid UTF-8.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createSandbox, type Sandbox } from "../../src/sandbox/index.ts";
import { evaluate, expectError, run } from "./helpers.ts";
import { base64Vectors, hmacVectors, shaVectors } from "./vectors.ts";

let sandbox: Sandbox;
before(() => {
  sandbox = createSandbox({ poolSize: 1 });
});
after(() => sandbox.close());

const FROMHEX = `local function fromhex(h) return (h:gsub("..", function(b) return string.char(tonumber(b, 16)) end)) end`;

/** Runs the vectors (sent as the JSON body) through one script; returns what Lua computed for each. */
async function computeAll(body: unknown, perVector: string): Promise<string[]> {
  const outcome = await run(
    sandbox,
    `${FROMHEX}
local out = {}
for i, v in ipairs(request.json) do out[i] = ${perVector} end
return { status = "ignore", invoiceId = json.encode(out) }`,
    { request: { body: Buffer.from(JSON.stringify(body)) } },
  );
  assert.ok(outcome.ok, JSON.stringify(outcome));
  return JSON.parse(outcome.result.invoiceId ?? "[]") as string[];
}

describe("hmacShaSign", () => {
  test("matches every RFC 2202 (HMAC-SHA1) and RFC 4231 (HMAC-SHA-256/384/512) test vector, in hex", async () => {
    const got = await computeAll(hmacVectors, `hmacShaSign(fromhex(v.key), fromhex(v.data), v.hash)`);
    hmacVectors.forEach((v, i) => assert.equal(got[i]!.slice(0, v.digest.length), v.digest, v.name));
  });

  test("gives the same digests in base64 with encoding = \"base64\"", async () => {
    const got = await computeAll(hmacVectors, `hmacShaSign(fromhex(v.key), fromhex(v.data), v.hash, "base64")`);
    hmacVectors.forEach((v, i) => {
      const hex = Buffer.from(got[i]!, "base64").toString("hex");
      assert.equal(hex.slice(0, v.digest.length), v.digest, v.name);
      assert.match(got[i]!, /^[A-Za-z0-9+/]+=*$/);
    });
  });

  test("accepts the hash name in any case, with a dash or underscore", async () => {
    const expected = "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8";
    for (const name of ["sha256", "SHA256", "SHA-256", "sha-256", "Sha_256"]) {
      assert.equal(await evaluate(sandbox, `hmacShaSign("key", "The quick brown fox jumps over the lazy dog", "${name}")`), expected, name);
    }
    assert.equal(await evaluate(sandbox, `hmacShaSign("key", "The quick brown fox jumps over the lazy dog", "SHA-1", "hex")`), "de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9");
  });

  test("the output is lower-case hex", async () => {
    assert.match(await evaluate(sandbox, `hmacShaSign("k", "d", "sha512")`), /^[0-9a-f]{128}$/);
  });

  test("an unknown hash, a missing argument or an unknown encoding is a script error at the caller's line", async () => {
    expectError(await run(sandbox, `\nhmacShaSign("k", "d", "md5")`), "script_error", /^\[plugin\]:2: hmacShaSign: unsupported hash "md5" \(use sha1, sha256, sha384 or sha512\)$/);
    expectError(await run(sandbox, `hmacShaSign("k", "d")`), "script_error", /bad argument #3 to 'hmacShaSign' \(hash name expected, got no value\)/);
    expectError(await run(sandbox, `hmacShaSign(nil, "d", "sha1")`), "script_error", /bad argument #1 to 'hmacShaSign' \(string expected, got nil\)/);
    expectError(await run(sandbox, `hmacShaSign({}, "d", "sha1")`), "script_error", /string expected, got table/);
    expectError(await run(sandbox, `hmacShaSign("k", "d", "sha1", "base32")`), "script_error", /unsupported encoding "base32"/);
  });

  test("numbers are accepted as strings, as in Lua's string functions", async () => {
    assert.equal(await evaluate(sandbox, `hmacShaSign(123, 456, "sha1") == hmacShaSign("123", "456", "sha1")`), "true");
  });
});

describe("sha", () => {
  test("matches the FIPS 180-4 example digests", async () => {
    for (const v of shaVectors) {
      assert.equal(await evaluate(sandbox, `sha("${v.data}", "${v.hash}")`), v.digest, `${v.hash}("${v.data}")`);
    }
  });

  test("hex digests decode back to the base64 digest of the same bytes", async () => {
    const out = await evaluate(sandbox, `${"(function() " + FROMHEX} return base64.encode(fromhex(sha("abc", "sha256"))) == sha("abc", "sha256", "base64") end)()`);
    assert.equal(out, "true");
  });
});

describe("base64", () => {
  test("encodes and decodes the RFC 4648 vectors", async () => {
    const got = await computeAll(base64Vectors.map(([plain]) => plain), `base64.encode(v) .. "|" .. base64.decode(base64.encode(v))`);
    base64Vectors.forEach(([plain, encoded], i) => assert.equal(got[i], `${encoded}|${plain}`));
  });

  test("round-trips all 256 byte values, hex-encoded in Lua both ways", async () => {
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const out = await evaluate(
      sandbox,
      `(function() ${FROMHEX}
        local all = fromhex(request.headers["x-bytes"])
        local hex = all:gsub(".", function(c) return string.format("%02x", c:byte()) end)
        return #all .. ":" .. base64.encode(all) .. ":" .. tostring(base64.decode(base64.encode(all)) == all) .. ":" .. hex
      end)()`,
      { request: { headers: { "x-bytes": bytes.toString("hex") } } },
    );
    assert.equal(out, `256:${bytes.toString("base64")}:true:${bytes.toString("hex")}`);
  });

  test("decoding ignores whitespace, accepts the URL-safe alphabet and missing padding, refuses the rest", async () => {
    assert.equal(await evaluate(sandbox, `base64.decode(" Zm9v\\nYmFy ")`), "foobar");
    assert.equal(await evaluate(sandbox, `base64.decode("Zm9vYg")`), "foob");
    for (const bad of ["Z", "Zm9v!", "Zm=9v", "Zg===", "Zg=" ]) {
      assert.equal(await evaluate(sandbox, `select(2, base64.decode("${bad}"))`), "invalid base64", bad);
    }
  });
});
