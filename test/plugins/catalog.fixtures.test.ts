// The catalogue as shipped: every reference plugin compiles and passes its own fixtures through
// `storefront plugins test` (real sandbox, no database, no server); every fixture signature is what the
// provider's own library produces or accepts; and the test runner's fixture format behaves as
// documented (the fixture's clock, defaults, environment secrets, local HTTP answers, failures and exit code).
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Command } from "commander";
import Stripe from "stripe";
import { Webhook } from "standardwebhooks";
import { registerPluginTestCommand } from "../../src/cli/plugins-test.command.ts";
import { listCatalog, readCatalogPlugin } from "../../src/plugins/catalog.ts";
import { loadFixtures } from "../../src/plugins/fixtures.ts";
import { formatTestRun } from "../../tools/plugin-test/report.ts";
import { runFixtures, testPlugin } from "../../tools/plugin-test/runner.ts";
import { createSandbox, type Sandbox } from "../../src/sandbox/index.ts";
import { CATALOG } from "../helpers/catalog.ts";

const REFERENCE = ["stripe", "standard-webhooks", "coinbase-commerce", "nowpayments", "paypal"];
const fixturesOf = (plugin: string) => path.join(CATALOG, "fixtures", plugin);
const pluginFile = (plugin: string) => path.join(CATALOG, `${plugin}.lua`);

type Fixture = { name: string; now: number | null; secrets: Record<string, string>; request: { headers: Record<string, string>; body: Buffer }; expect: { kind: string } };
function fixtures(plugin: string): Fixture[] {
  return loadFixtures(fixturesOf(plugin), { pluginName: plugin }).map((l) => {
    if (!l.ok) throw new Error(`${l.file}: ${l.message}`);
    return l.fixture;
  });
}
const genuine = (f: Fixture) => f.expect.kind === "result";

describe("the catalogue", () => {
  let sandbox: Sandbox;
  before(() => {
    sandbox = createSandbox({ poolSize: 1 });
  });
  after(async () => {
    await sandbox?.close();
  });

  test("lists the five reference plugins, each compiling and documenting its secrets in its header", async () => {
    const names = listCatalog().map((e) => e.name);
    for (const name of REFERENCE) {
      assert.ok(names.includes(name), `${name} is in the catalogue`);
      const source = readCatalogPlugin(name)!;
      assert.deepEqual(await sandbox.check(source), { ok: true }, `${name} compiles`);
      assert.match(source, /^-- [\w-]+: /, "first line is the summary");
      assert.match(source.slice(0, 2000), /required/, "the header names its required secrets");
    }
    assert.ok(!names.includes("types") && !names.some((n) => n.includes(".")), "the LuaLS definitions are not a plugin");
  });

  for (const plugin of [...REFERENCE, "generic-hmac"]) {
    test(`${plugin}: every payment decision carries the provider's event id, so a re-sent event applies once`, async () => {
      const run = await testPlugin(pluginFile(plugin), fixturesOf(plugin));
      const decisions = run.reports.filter((r) => r.outcome?.ok && r.outcome.result.status !== "ignore");
      assert.ok(decisions.length > 0, "some fixture pays or disputes");
      for (const r of decisions) {
        const result = r.outcome!.ok ? r.outcome!.result : null;
        if (plugin === "generic-hmac" && !/"id"\s*:/.test(fixtures(plugin).find((f) => f.name === r.name)!.request.body.toString())) continue; // no id in the body: known by its hash
        assert.equal(typeof result?.eventId, "string", `${r.name}: eventId in ${JSON.stringify(result)}`);
        assert.notEqual(result?.eventId, "");
      }
    });

    test(`plugins test ${plugin}.lua --fixtures fixtures/${plugin}: every fixture passes`, async () => {
      const run = await testPlugin(pluginFile(plugin), fixturesOf(plugin));
      assert.ok(run.reports.length >= 7, `${plugin} has its fixtures (${run.reports.length})`);
      assert.equal(run.failed, 0, formatTestRun(run));
      const kinds = new Set(run.reports.map((r) => r.actual.split(" ")[0]));
      assert.ok(kinds.has("pushInvoice") && kinds.has("ignore") && kinds.has("rejected"), `paid, ignored and rejected cases: ${[...kinds].join(", ")}`);
    });
  }
});

describe("the catalogue's fixtures are signed as the providers sign", () => {
  const stripe = new Stripe("sk_test_catalog");

  test("stripe: the stripe package accepts the genuine fixtures and refuses the others, at the fixture's time", () => {
    for (const f of fixtures("stripe")) {
      const header = f.request.headers["stripe-signature"];
      const check = () => stripe.webhooks.constructEvent(f.request.body, header ?? "", f.secrets.signingSecret!, 300, undefined, f.now! * 1000);
      if (genuine(f)) assert.doesNotThrow(check, f.name);
      else assert.throws(check, f.name);
    }
  });

  test("standard-webhooks: the standardwebhooks package verifies the genuine fixtures and refuses the others", (t) => {
    for (const f of fixtures("standard-webhooks")) {
      const clock = t.mock.method(Date, "now", () => f.now! * 1000);
      const h = f.request.headers;
      const headers = {
        "webhook-id": h["webhook-id"] ?? h["svix-id"] ?? "",
        "webhook-timestamp": h["webhook-timestamp"] ?? h["svix-timestamp"] ?? "",
        "webhook-signature": h["webhook-signature"] ?? h["svix-signature"] ?? "",
      };
      const check = () => new Webhook(f.secrets.signingSecret!).verify(f.request.body.toString("utf8"), headers);
      try {
        if (genuine(f)) assert.doesNotThrow(check, f.name);
        else assert.throws(check, f.name);
      } finally {
        clock.mock.restore();
      }
    }
  });

  test("coinbase-commerce: X-CC-Webhook-Signature is the HMAC-SHA256 hex of the raw body", () => {
    for (const f of fixtures("coinbase-commerce")) {
      const expected = createHmac("sha256", f.secrets.signingSecret!).update(f.request.body).digest("hex");
      assert.equal(f.request.headers["x-cc-webhook-signature"] === expected, genuine(f), f.name);
    }
  });

  test("nowpayments: x-nowpayments-sig is NOWPayments' documented HMAC-SHA512 of the sorted JSON", () => {
    const sortObject = (obj: Record<string, unknown>): Record<string, unknown> =>
      Object.keys(obj)
        .sort()
        .reduce<Record<string, unknown>>((r, k) => {
          const v = obj[k];
          r[k] = v && typeof v === "object" ? sortObject(v as Record<string, unknown>) : v;
          return r;
        }, {});
    for (const f of fixtures("nowpayments")) {
      const body = JSON.parse(f.request.body.toString("utf8")) as Record<string, unknown>;
      const expected = createHmac("sha512", f.secrets.signingSecret!).update(JSON.stringify(sortObject(body))).digest("hex");
      assert.equal(f.request.headers["x-nowpayments-sig"] === expected, genuine(f), f.name);
    }
  });
});

describe("storefront plugins test", () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), "plugin-fixtures-"));
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  async function cli(args: string[]): Promise<{ out: string; exitCode: number }> {
    const program = new Command().name("storefront").exitOverride();
    program.command("plugins").description("install and manage a store's payment plugins");
    let out = "";
    let exitCode = 0;
    registerPluginTestCommand(program, { write: (text) => (out += text), setExitCode: (code) => (exitCode = code) });
    await program.parseAsync(["node", "storefront", "plugins", "test", ...args]);
    return { out, exitCode };
  }

  test("runs a catalogue plugin's fixtures and prints a pass/fail table, exit code 0", async () => {
    const { out, exitCode } = await cli([pluginFile("stripe"), "--fixtures", fixturesOf("stripe")]);
    assert.equal(exitCode, 0, out);
    assert.match(out, /^PASS {2}checkout-session-completed +pushInvoice inv_catalog_0001 +pushInvoice inv_catalog_0001/m);
    assert.match(out, /^PASS {2}tampered-body +rejected +rejected/m);
    assert.match(out, new RegExp(`^${readdirSync(fixturesOf("stripe")).filter((f) => !f.startsWith("_")).length} passed, 0 failed$`, "m"));
  });

  test("a failing fixture: FAIL row, the reason, the plugin's logs, exit code 1", async () => {
    const sub = path.join(dir, "failing");
    mkdirp(sub);
    writeFileSync(path.join(dir, "plugin.lua"), 'log("looked at " .. request.body, "warning")\nreturn { status = "ignore", invoiceId = "inv_1" }\n');
    writeFileSync(path.join(sub, "a.json"), JSON.stringify({ name: "expects-the-wrong-thing", request: { body: "hello" }, expect: { result: { status: "pushInvoice", invoiceId: "inv_1" } } }));
    writeFileSync(path.join(sub, "b.json"), JSON.stringify({ name: "passes", request: { body: "x" }, expect: { result: { status: "ignore", invoiceId: "inv_1" }, logs: [{ type: "warning", contains: "looked at x" }] } }));
    writeFileSync(path.join(sub, "c.json"), "{ not json");
    const { out, exitCode } = await cli([path.join(dir, "plugin.lua"), "--fixtures", sub]);
    assert.equal(exitCode, 1);
    assert.match(out, /^FAIL {2}expects-the-wrong-thing +pushInvoice inv_1 +ignore inv_1/m);
    assert.match(out, /^PASS {2}passes/m);
    assert.match(out, /^FAIL {2}c\.json +- +unreadable/m);
    assert.match(out, /status: expected pushInvoice, got ignore/);
    assert.match(out, /log warning: looked at hello/);
    assert.match(out, /^1 passed, 2 failed$/m);
  });

  test("an empty fixtures directory is a failure too", async () => {
    const empty = path.join(dir, "empty");
    mkdirp(empty);
    const { out, exitCode } = await cli([pluginFile("stripe"), "--fixtures", empty]);
    assert.equal(exitCode, 1);
    assert.match(out, /no fixtures found/);
  });

  test("now is the sandbox's clock: os.time() and os.date() answer it, also through _G.os; the real clock otherwise", async () => {
    // The plugin's source is run as written (no line added): the error on line 2 is reported at line 2.
    const source = 'log(tostring(os.time()) .. " " .. os.date("!%Y-%m-%d") .. " " .. tostring(_G.os.time()))\nif request.body == "boom" then error("boom") end\nreturn { status = "ignore" }\n';
    const base = { file: "x", description: null, request: { method: "POST", headers: {}, query: {}, body: Buffer.from("ok") }, secrets: {}, store: { id: "st_1" }, plugin: { name: "p", version: 1 }, invoices: {}, http: [] };
    const [at, boom, real] = await runFixtures(source, [
      { ...base, name: "at", now: 1735689630, expect: { kind: "result", status: "ignore", invoiceId: null, logs: [{ type: "info", contains: "1735689630 2025-01-01 1735689630" }] } },
      { ...base, name: "boom", now: 1735689630, request: { ...base.request, body: Buffer.from("boom") }, expect: { kind: "error", error: "script_error", message: "boom", logs: [] } },
      { ...base, name: "real", now: null, expect: { kind: "result", status: "ignore", invoiceId: null, logs: [{ type: null, contains: String(Math.floor(Date.now() / 1000)).slice(0, 6) }] } },
    ]);
    assert.equal(at!.passed, true, at!.problems.join("; "));
    assert.equal(boom!.passed, true, boom!.problems.join("; "));
    assert.ok(boom!.outcome && !boom!.outcome.ok && boom!.outcome.error.line === 2, "the error points at line 2 of the file");
    assert.equal(real!.passed, true, real!.problems.join("; "));
  });

  test("_defaults.json, {{env:NAME}} secrets and {{mock}} HTTP answers", async () => {
    const sub = path.join(dir, "defaults");
    mkdirp(sub);
    writeFileSync(
      path.join(dir, "api.lua"),
      [
        "local res = fetch(secrets.apiBase .. '/v1/things/' .. request.body, { headers = { authorization = 'Bearer ' .. secrets.token } })",
        "local inv = getInvoice('inv_d')",
        "log(res.status .. ' ' .. res.body .. ' ' .. tostring(inv and inv.totalInUsd))",
        "return { status = res.ok and 'pushInvoice' or 'ignore', invoiceId = 'inv_d' }",
      ].join("\n"),
    );
    writeFileSync(path.join(sub, "_defaults.json"), JSON.stringify({ secrets: { apiBase: "{{mock}}", token: "{{env:PLUGIN_TEST_TOKEN}}" }, invoices: { inv_d: { totalInUsd: 12.5 } }, http: [{ method: "GET", path: "/v1/things/1", json: { thing: 1 } }] }));
    writeFileSync(path.join(sub, "found.json"), JSON.stringify({ request: { body: "1" }, expect: { result: { status: "pushInvoice", invoiceId: "inv_d" }, logs: ['200 {"thing":1} 12.5'] } }));
    writeFileSync(path.join(sub, "missing.json"), JSON.stringify({ request: { body: "2" }, expect: { result: { status: "ignore", invoiceId: "inv_d" }, logs: ["404"] } }));
    const run = await testPlugin(path.join(dir, "api.lua"), sub, { env: { PLUGIN_TEST_TOKEN: "t0k3n" } });
    assert.equal(run.failed, 0, formatTestRun(run, { verbose: true }));
    const unset = await testPlugin(path.join(dir, "api.lua"), sub, { env: {} });
    assert.equal(unset.failed, 2);
    assert.match(unset.reports[0]!.problems[0]!, /PLUGIN_TEST_TOKEN/);
  });
});

function mkdirp(p: string) {
  rmSync(p, { recursive: true, force: true });
  mkdirSync(p, { recursive: true });
}
