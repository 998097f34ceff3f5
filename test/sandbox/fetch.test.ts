// fetch: the normal use (methods, headers, bodies, statuses), the allow list of PLUGIN_FETCH_ALLOW
// (host names, addresses, CIDR ranges), the address policy itself, and the check on the connected
// socket that no host spelling or DNS answer can dodge. Refusals use real servers on 127.0.0.1.
import assert from "node:assert/strict";
import net, { type AddressInfo, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { buildConnector } from "undici";
import { guardConnector } from "../../src/platform/outbound/guarded-connect.ts";
import { loadConfig } from "../../src/config.ts";
import { createAddressPolicy, normalizeAddress } from "../../src/platform/outbound/address-policy.ts";
import { createSandbox, type Sandbox } from "../../src/sandbox/index.ts";
import { expectError, run, startServer, type TestServer } from "./helpers.ts";

let server: TestServer;
let allowed: Sandbox;
let strict: Sandbox;

before(async () => {
  server = await startServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://x");
      const status = Number(url.searchParams.get("status") ?? 200);
      res.writeHead(status, { "content-type": "application/json", "X-Custom": "Yes", "set-cookie": ["a=1", "b=2"] });
      res.end(JSON.stringify({ method: req.method, path: url.pathname, auth: req.headers.authorization ?? null, custom: req.headers["x-plugin"] ?? null, body: Buffer.concat(chunks).toString("latin1") }));
    });
  });
  allowed = createSandbox({ poolSize: 1, fetchAllow: ["127.0.0.1"] });
  strict = createSandbox({ poolSize: 1, fetchTimeoutMs: 1000 });
});

after(async () => {
  await allowed.close();
  await strict.close();
  await server.close();
});

describe("fetch, normal use", () => {
  test("GET returns status, ok, lower-case headers and the body; the run records the fetch", async () => {
    const outcome = await run(
      allowed,
      `local r = fetch("${server.url}/hello")
       local d = json.decode(r.body)
       return {status="ignore", invoiceId=table.concat({r.status, tostring(r.ok), r.headers["content-type"], r.headers["x-custom"], r.headers["set-cookie"], d.method, d.path}, "|")}`,
    );
    assert.ok(outcome.ok, JSON.stringify(outcome));
    assert.equal(outcome.result.invoiceId, "200|true|application/json|Yes|a=1, b=2|GET|/hello");
    assert.equal(outcome.fetches.length, 1);
    const record = outcome.fetches[0]!;
    assert.equal(record.url, `${server.url}/hello`);
    assert.equal(record.method, "GET");
    assert.equal(record.status, 200);
    assert.equal(record.error, null);
    assert.ok(record.responseBytes > 0);
    // The fetch is timed, within the run that made it.
    assert.ok(record.durationMs > 0 && record.durationMs <= outcome.durationMs, `fetch ${record.durationMs} ms in a run of ${outcome.durationMs} ms`);
  });

  test("POST sends the method, headers and a binary body byte for byte", async () => {
    const outcome = await run(
      allowed,
      `local r = fetch("${server.url}/post", { method = "post", headers = { Authorization = "Bearer k", ["X-Plugin"] = 7 }, body = "a\\0b\\255" })
       local d = json.decode(r.body)
       return {status="ignore", invoiceId=table.concat({d.method, d.auth, d.custom, tostring(d.body == "a\\0b\\195\\191")}, "|")}`,
    );
    assert.ok(outcome.ok, JSON.stringify(outcome));
    assert.equal(outcome.result.invoiceId, "POST|Bearer k|7|true");
    assert.equal(outcome.fetches[0]!.requestBytes, 4);
  });

  test("a non-2xx status is a response with ok = false, not an error", async () => {
    const outcome = await run(allowed, `local r, e = fetch("${server.url}/?status=503") return {status="ignore", invoiceId=r.status .. tostring(r.ok) .. tostring(e)}`);
    assert.deepEqual(outcome.ok && outcome.result, { status: "ignore", invoiceId: "503falsenil" });
  });

  test("a connection failure or a bad URL returns nil and a message", async () => {
    const closed = await startServer(() => {});
    const port = closed.port;
    await closed.close();
    const outcome = await run(allowed, `local r, e = fetch("http://127.0.0.1:${port}/") local r2, e2 = fetch("not a url") return {status="ignore", invoiceId=tostring(r) .. "|" .. e .. "|" .. e2}`);
    assert.ok(outcome.ok);
    const [r, e, e2] = (outcome.result.invoiceId ?? "").split("|");
    assert.equal(r, "nil");
    assert.match(e!, /^fetch failed: .*ECONNREFUSED/);
    assert.match(e2!, /^invalid URL/);
  });

  test("bad arguments are script errors at the caller's line", async () => {
    expectError(await run(allowed, `fetch(42)`), "script_error", /^\[plugin\]:1: fetch: url must be a string, got number$/);
    expectError(await run(allowed, `fetch("${server.url}", { body = {} })`), "script_error", /options.body must be a string/);
    expectError(await run(allowed, `fetch("${server.url}", { headers = { 1, 2 } })`), "script_error", /header names and values must be strings/);
    const method = await run(allowed, `local r, e = fetch("${server.url}", { method = "CONNECT" }) return {status="ignore", invoiceId=e}`);
    assert.deepEqual(method.ok && method.result, { status: "ignore", invoiceId: "unsupported method CONNECT" });
  });

  test("options.timeout bounds one fetch", async () => {
    const slow = await startServer((_req, res) => setTimeout(() => res.end("late"), 2000).unref());
    const outcome = await run(allowed, `local r, e = fetch("${slow.url}/", { timeout = 100 }) return {status="ignore", invoiceId=e}`);
    await slow.close();
    assert.deepEqual(outcome.ok && outcome.result, { status: "ignore", invoiceId: "fetch timed out after 100 ms" });
  });
});

describe("fetch, redirects", () => {
  /** A server that answers /go?status=&to= with a redirect and echoes everything else it was sent. */
  async function hopServer() {
    const seen: { path: string; method: string; auth: string | null; cookie: string | null; proxyAuth: string | null; apiKey: string | null; contentType: string | null; body: string }[] = [];
    const hop = await startServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const url = new URL(req.url ?? "/", "http://x");
        const h = req.headers;
        seen.push({ path: url.pathname, method: req.method ?? "", auth: h.authorization ?? null, cookie: h.cookie ?? null, proxyAuth: h["proxy-authorization"] ?? null, apiKey: (h["x-api-key"] as string | undefined) ?? null, contentType: h["content-type"] ?? null, body: Buffer.concat(chunks).toString() });
        const to = url.searchParams.get("to");
        if (url.pathname === "/go" && to) res.writeHead(Number(url.searchParams.get("status") ?? 302), { location: to }).end();
        else res.end("done");
      });
    });
    return { hop, seen };
  }
  const CREDENTIALS = `headers = { Authorization = "Bearer sk_live", Cookie = "session=1", ["Proxy-Authorization"] = "Basic x", ["X-Api-Key"] = "k", ["Content-Type"] = "application/json" }`;

  test("a redirect to another origin drops Authorization, Cookie and Proxy-Authorization; the same origin keeps them", async () => {
    const a = await hopServer();
    const b = await hopServer();
    try {
      const toOther = `${a.hop.url}/go?status=307&to=${encodeURIComponent(`${b.hop.url}/landing`)}`;
      const toSame = `${a.hop.url}/go?status=307&to=/landing`;
      const outcome = await run(
        allowed,
        `local r1 = fetch("${toOther}", { method = "POST", body = "{}", ${CREDENTIALS} })
         local r2 = fetch("${toSame}", { method = "POST", body = "{}", ${CREDENTIALS} })
         return {status="ignore", invoiceId=r1.status .. "|" .. r2.status}`,
      );
      assert.deepEqual(outcome.ok && outcome.result, { status: "ignore", invoiceId: "200|200" });
      const [other] = b.seen;
      // 307 keeps the method and body; only the credentials stay behind. A custom header is the plugin's own choice.
      assert.deepEqual(other, { path: "/landing", method: "POST", auth: null, cookie: null, proxyAuth: null, apiKey: "k", contentType: "application/json", body: "{}" });
      const same = a.seen.find((r) => r.path === "/landing");
      assert.deepEqual(same, { path: "/landing", method: "POST", auth: "Bearer sk_live", cookie: "session=1", proxyAuth: "Basic x", apiKey: "k", contentType: "application/json", body: "{}" });
    } finally {
      await a.hop.close();
      await b.hop.close();
    }
  });

  test("303, and 301/302 after a POST, continue as a GET without the body or its content headers", async () => {
    const a = await hopServer();
    try {
      const outcome = await run(
        allowed,
        `local out = {}
         for _, status in ipairs({ 303, 302, 301 }) do
           local r = fetch("${a.hop.url}/go?status=" .. status .. "&to=/landing", { method = "POST", body = "{}", ${CREDENTIALS} })
           out[#out + 1] = r.status
         end
         return {status="ignore", invoiceId=table.concat(out, "|")}`,
      );
      assert.deepEqual(outcome.ok && outcome.result, { status: "ignore", invoiceId: "200|200|200" });
      const landings = a.seen.filter((r) => r.path === "/landing");
      assert.equal(landings.length, 3);
      for (const landing of landings) assert.deepEqual(landing, { path: "/landing", method: "GET", auth: "Bearer sk_live", cookie: "session=1", proxyAuth: "Basic x", apiKey: "k", contentType: null, body: "" });
    } finally {
      await a.hop.close();
    }
  });
});

describe("PLUGIN_FETCH_ALLOW", () => {
  test("127.0.0.1 is refused by default and reachable when the allow list names it", async () => {
    const source = `local r, e = fetch("${server.url}/") return {status="ignore", invoiceId=tostring(r and r.status) .. "|" .. tostring(e)}`;
    const refused = await run(strict, source);
    assert.deepEqual(refused.ok && refused.result.invoiceId, "nil|fetch refused: 127.0.0.1 is a private or reserved address");
    const reached = await run(allowed, source);
    assert.deepEqual(reached.ok && reached.result.invoiceId, "200|nil");
  });

  test("a CIDR range and a host name can be allowed", async () => {
    const byRange = createSandbox({ poolSize: 1, fetchAllow: ["127.0.0.0/8"] });
    const byName = createSandbox({ poolSize: 1, fetchAllow: ["localhost"] });
    try {
      const source = (host: string) => `local r, e = fetch("http://${host}:${server.port}/") return {status="ignore", invoiceId=tostring(r and r.status) .. "|" .. tostring(e)}`;
      const viaRange = await run(byRange, source("127.0.0.1"));
      assert.equal(viaRange.ok && viaRange.result.invoiceId, "200|nil");
      const viaName = await run(byName, source("localhost"));
      assert.equal(viaName.ok && viaName.result.invoiceId, "200|nil");
      // Allowing the name does not allow the address it resolves to under another spelling.
      const literal = await run(byName, source("127.0.0.1"));
      assert.equal(literal.ok && literal.result.invoiceId, "nil|fetch refused: 127.0.0.1 is a private or reserved address");
    } finally {
      await byRange.close();
      await byName.close();
    }
  });

  test("an invalid CIDR in the allow list is a configuration error", () => {
    assert.throws(() => createAddressPolicy(["10.0.0.0/abc"]), /not a valid CIDR range/);
  });

  test("an entry with a port allows that port only: host:port, v4:port, [v6]:port, cidr:port, [v6 cidr]:port", () => {
    const policy = createAddressPolicy(["payments.internal:8443", "10.1.2.3:8080", "[fd00::5]:9000", "192.168.0.0/16:5432", "[fd12::/16]:443", "fe80::1", "172.16.0.9"]);
    assert.equal(policy.hostAllowed("payments.internal", 8443), true);
    assert.equal(policy.hostAllowed("PAYMENTS.internal.", 8443), true);
    assert.equal(policy.hostAllowed("payments.internal", 22), false);
    assert.equal(policy.hostAllowed("payments.internal"), false, "a port-bound entry never matches an unknown port");
    assert.equal(policy.refusal("10.1.2.3", 8080), null);
    assert.match(String(policy.refusal("10.1.2.3", 22)), /10\.1\.2\.3 is a private or reserved address/);
    assert.notEqual(policy.refusal("10.1.2.3"), null);
    assert.equal(policy.refusal("fd00::5", 9000), null);
    assert.notEqual(policy.refusal("fd00::5", 9001), null);
    assert.equal(policy.refusal("192.168.44.1", 5432), null);
    assert.notEqual(policy.refusal("192.168.44.1", 6379), null);
    assert.equal(policy.refusal("fd12:3::1", 443), null);
    assert.notEqual(policy.refusal("fd12:3::1", 80), null);
    // Entries without a port still allow every port (a bare IPv6 address has no port).
    assert.equal(policy.refusal("fe80::1", 1), null);
    assert.equal(policy.refusal("172.16.0.9", 65535), null);
    assert.equal(policy.refusal("172.16.0.9"), null);
  });

  test("a malformed port in the allow list is a configuration error, reported at start-up", () => {
    for (const entry of ["10.0.0.1:0", "10.0.0.1:65536", "host:", "[fd00::1]:x", "[fd00::1", "[payments.internal]:443"]) {
      assert.throws(() => createAddressPolicy([entry]), /PLUGIN_FETCH_ALLOW/, entry);
    }
    assert.throws(() => loadConfig({ PLUGIN_FETCH_ALLOW: "payments.internal:8443, 10.0.0.1:99999" }), /PLUGIN_FETCH_ALLOW: "10\.0\.0\.1:99999" has an invalid port/);
  });

  test("allowing a host on one port does not reach its other ports, through DNS or literal, and never connects there", async () => {
    // The port that is not allowed: a bare TCP server that counts every connection made to it.
    let connections = 0;
    const other = net.createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    const otherPort = (other.address() as AddressInfo).port;
    const internal = (hostname: string, _o: unknown, cb: (e: Error | null, a: { address: string; family: number }[]) => void) =>
      hostname === "internal.test" ? cb(null, [{ address: "127.0.0.1", family: 4 }]) : cb(Object.assign(new Error("ENOTFOUND"), { code: "ENOTFOUND" }), []);
    const byName = createSandbox({ poolSize: 1, fetchAllow: [`internal.test:${server.port}`] }, { lookup: internal });
    const byAddress = createSandbox({ poolSize: 1, fetchAllow: [`127.0.0.1:${server.port}`] }, { lookup: internal });
    try {
      const source = (url: string) => `local r, e = fetch("${url}") return {status="ignore", invoiceId=tostring(r and r.status) .. "|" .. tostring(e)}`;
      for (const sandbox of [byName, byAddress]) {
        const reached = await run(sandbox, source(`http://internal.test:${server.port}/`));
        assert.equal(reached.ok && reached.result.invoiceId, "200|nil");
        const refused = await run(sandbox, source(`http://internal.test:${otherPort}/`));
        assert.match(String(refused.ok && refused.result.invoiceId), /^nil\|fetch refused: /);
      }
      const literal = await run(byAddress, source(`http://127.0.0.1:${otherPort}/`));
      assert.equal(literal.ok && literal.result.invoiceId, "nil|fetch refused: 127.0.0.1 is a private or reserved address");
      const allowedLiteral = await run(byAddress, source(`http://127.0.0.1:${server.port}/`));
      assert.equal(allowedLiteral.ok && allowedLiteral.result.invoiceId, "200|nil");
      assert.equal(connections, 0, "the other port was never connected to");
    } finally {
      await byName.close();
      await byAddress.close();
      await new Promise((resolve) => other.close(resolve));
    }
  });
});

describe("address policy", () => {
  const policy = createAddressPolicy([]);

  test("refuses loopback, private, link-local, CGNAT, multicast, reserved and IPv6 unique-local addresses", () => {
    for (const a of ["127.0.0.1", "127.255.255.254", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254", "100.64.0.1", "100.127.255.255", "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255", "0.0.0.0", "198.18.0.1", "::1", "::", "fd00::1", "fc00::1", "fe80::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:a9fe:a9fe", "64:ff9b::a00:1", "2002:7f00:1::"]) {
      assert.notEqual(policy.refusal(a), null, a);
    }
  });

  test("refuses IPv4-translated (::ffff:0:0/96), documentation (3fff::/20) and SRv6 (5f00::/16) addresses", () => {
    // Judged in-process only: nothing here ever connects to these ranges.
    for (const a of ["::ffff:0:a00:1", "::ffff:0:7f00:1", "::ffff:0:8.8.8.8", "0:0:0:0:ffff:0:ffff:ffff", "3fff::", "3fff:fff:ffff:ffff::1", "5f00::", "5f00:ffff::1"]) {
      assert.notEqual(policy.refusal(a), null, a);
      assert.notEqual(policy.refusal(a, 443), null, `${a} on 443`);
    }
    // The neighbours of those ranges stay public.
    for (const a of ["3fff:1000::1", "5f01::1", "2606:4700:4700::1111"]) assert.equal(policy.refusal(a, 443), null, a);
  });

  test("allows public addresses", () => {
    for (const a of ["8.8.8.8", "1.1.1.1", "93.184.216.34", "172.32.0.1", "100.128.0.1", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "64:ff9b::808:808"]) {
      assert.equal(policy.refusal(a), null, a);
    }
  });

  test("an IPv4-mapped IPv6 address is judged as its IPv4 address", () => {
    assert.equal(normalizeAddress("::ffff:7f00:1"), "127.0.0.1");
    assert.equal(normalizeAddress("[::FFFF:127.0.0.1]"), "127.0.0.1");
    assert.equal(normalizeAddress("0:0:0:0:0:ffff:0808:0808"), "8.8.8.8");
    assert.equal(createAddressPolicy(["127.0.0.1"]).refusal("::ffff:127.0.0.1"), null);
  });

  test("the connected socket is checked even when DNS said the name was public", async () => {
    // A resolver that lies (or rebinds) behind the resolution-time check: public.example lands on
    // 127.0.0.1, and only the check of the connected socket sees it.
    const lying = (_h: string, o: { all?: boolean }, cb: (e: null, a: unknown, f?: number) => void) =>
      o.all ? cb(null, [{ address: "127.0.0.1", family: 4 }]) : cb(null, "127.0.0.1", 4);
    const connect = guardConnector(buildConnector({ lookup: lying as never }), policy);
    const err = await new Promise<Error | null>((resolve) => {
      connect({ hostname: "public.example", protocol: "http:", port: String(server.port) }, (...args) => resolve(args[0]));
    });
    assert.match(String(err?.message), /connection to public\.example refused: 127\.0\.0\.1 is a private or reserved address/);
    const ok = await new Promise<Socket | null>((resolve) => {
      guardConnector(buildConnector({}), createAddressPolicy(["127.0.0.1"]))({ hostname: "127.0.0.1", protocol: "http:", port: String(server.port) }, (...args) => resolve(args[1]));
    });
    assert.ok(ok);
    ok.destroy();
  });
});
