// What `storefront serve` writes to its log, read from a real process: JSON lines with ISO times when the
// output is not a terminal, one line per request, the probes quiet below debug, the start-up line naming
// the database (never its password) and the admin API, and a warning with ids (never bodies or secrets)
// for a crashed or timed-out plugin, a burst of rejected deliveries, and a failed webhook attempt.
// LOG_FORMAT=pretty gives pino's pretty printer instead.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { chooseLogFormat } from "../../../src/platform/ops/logger.ts";
import { REJECTIONS_LOGGED_AT } from "../../../src/payments/webhook.routes.ts";
import { ADMIN_TOKEN, DIALECTS, freshDatabase } from "../../helpers/harness.ts";
import { startReceiver, type Receiver } from "../../helpers/receiver.ts";
import { startServer, type ServerProcess } from "../../helpers/server.ts";
import { SIGNED_PLUGIN, TEST_SECRET } from "../../helpers/webhook.ts";

type Line = Record<string, unknown> & { level: number; time: string; msg: string };

const BODY_MARKER = "body-marker-5e1f";
const PASSWORD = "pw-never-logged-7c2d";
const WARN = 40;

/** Every line of the output, each parsed as JSON (a line that is not is a failure). */
function jsonLines(output: string): Line[] {
  return output
    .split("\n")
    .filter((l) => l.trim() !== "" && !l.startsWith("(node:") && !l.startsWith("(Use `node"))
    .map((l) => {
      try {
        return JSON.parse(l) as Line;
      } catch {
        assert.fail(`not a JSON line: ${l}`);
      }
    });
}

/** Waits until the server has written a line that `match` accepts (the failure is the deadline). */
async function lineWritten(server: ServerProcess, match: (l: Line) => boolean, what: string): Promise<Line> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const found = jsonLines(server.output()).find(match);
    if (found) return found;
    if (Date.now() > deadline) assert.fail(`no log line ${what} in:\n${server.output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A PostgreSQL URL with a password in it (local trust authentication ignores it). */
function withPassword(url: string): string {
  const u = new URL(url);
  u.password = PASSWORD;
  return u.toString();
}

for (const { name: dialect, skip } of DIALECTS) {
  describe(`serve's log on ${dialect}`, { skip }, () => {
    let server: ServerProcess;
    let receiver: Receiver;
    let drop: () => Promise<void>;
    const admin = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
      fetch(`${server.url}/api/admin${path}`, {
        method,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    const hook = (storeId: string, plugin: string, body: string, headers: Record<string, string> = {}) =>
      fetch(`${server.url}/api/paymentPlugins?pluginName=${plugin}&storeId=${storeId}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });

    before(async () => {
      const db = await freshDatabase(dialect);
      drop = db.drop;
      receiver = await startReceiver();
      receiver.mode = { kind: "status", status: 500 };
      server = await startServer({
        DATABASE_URL: dialect === "postgres" ? withPassword(db.url) : db.url,
        SECRETS_KEY: randomBytes(32).toString("hex"),
        ADMIN_TOKEN,
        LOG_LEVEL: "info",
        LOG_FORMAT: "",
        ENDPOINT_ALLOW: `127.0.0.1:${receiver.port}`,
        PLUGIN_POOL_SIZE: "1",
        PLUGIN_CPU_MS: "50",
        PLUGIN_WALL_MS: "2000",
      });
    });
    after(async () => {
      await server?.stop();
      await receiver?.close();
      await drop?.();
    });

    test("JSON lines with ISO times; the start-up line names the database without its password, and the admin API", () => {
      const lines = jsonLines(server.output());
      for (const l of lines) assert.match(l.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, "an ISO 8601 time in UTC");
      const start = lines.find((l) => l.msg.startsWith("storefront serving on"));
      assert.ok(start, server.output());
      assert.match(start.msg, dialect === "sqlite" ? /\(SQLite \S+test\.db\)/ : /\(PostgreSQL 127\.0\.0\.1:5432\/test\)/);
      assert.match(start.msg, /admin API on/);
      assert.equal(server.output().includes(PASSWORD), false, "the password is never written");
    });

    test("one line per request; health and metrics probes are not written at info", async () => {
      for (let i = 0; i < 3; i++) for (const probe of ["/healthz", "/readyz", "/metrics"]) assert.equal((await fetch(`${server.url}${probe}`)).status, 200);
      const r = await admin("POST", "/stores", { name: "Logged" }, { "x-request-id": "one-line-per-request" });
      assert.equal(r.status, 201);
      await lineWritten(server, (l) => l.reqId === "one-line-per-request", "for the request");
      const lines = jsonLines(server.output());
      assert.equal(lines.filter((l) => l.reqId === "one-line-per-request").length, 1);
      assert.deepEqual(lines.filter((l) => /^\/(healthz|readyz|metrics)/.test(String(l.url ?? ""))), [], "no probe at info");
    });

    test("a crashed or timed-out plugin is a warning with the store, plugin and delivery ids, never the body", async () => {
      const store = (await (await admin("POST", "/stores", { name: "Plugins" })).json()) as { id: string };
      for (const [name, source] of [["crash", 'error("boom: " .. request.body)'], ["spin", "while true do end"]]) {
        assert.ok((await admin("PUT", `/stores/${store.id}/plugins/${name}`, { source })).ok);
      }
      const crashed = await hook(store.id, "crash", `{"note":"${BODY_MARKER}"}`);
      assert.equal(crashed.status, 500);
      const spun = await hook(store.id, "spin", `{"note":"${BODY_MARKER}"}`);
      assert.equal(spun.status, 504);
      for (const [plugin, response, code] of [["crash", crashed, "plugin_error"], ["spin", spun, "plugin_timeout"]] as const) {
        const line = await lineWritten(server, (l) => l.level === WARN && l.plugin === plugin, `warning of ${plugin}`);
        assert.deepEqual({ storeId: line.storeId, deliveryId: line.deliveryId, code: line.code }, { storeId: store.id, deliveryId: response.headers.get("x-delivery-id"), code });
      }
      assert.equal(server.output().includes(BODY_MARKER), false, "no body in the log");
    });

    test("rejected deliveries are a warning past a threshold, not one per rejection", async () => {
      const store = (await (await admin("POST", "/stores", { name: "Strangers" })).json()) as { id: string };
      assert.ok((await admin("PUT", `/stores/${store.id}/plugins/pay`, { source: SIGNED_PLUGIN, secrets: { key: TEST_SECRET } })).ok);
      const rejected = 2 * REJECTIONS_LOGGED_AT + 5;
      for (let i = 0; i < rejected; i++) assert.equal((await hook(store.id, "pay", `{"n":${i}}`, { "x-signature": "forged" })).status, 401);
      await lineWritten(server, (l) => l.level === WARN && l.storeId === store.id, "about the rejections");
      const warnings = jsonLines(server.output()).filter((l) => l.level === WARN && l.storeId === store.id);
      // One per minute and store: two at most even if the burst straddled a minute's end.
      assert.ok(warnings.length >= 1 && warnings.length <= Math.floor(rejected / REJECTIONS_LOGGED_AT), `${warnings.length} warnings for ${rejected} rejections`);
      assert.equal(warnings[0]!.plugin, "pay");
      assert.equal(warnings[0]!.rejected, REJECTIONS_LOGGED_AT);
      assert.equal(server.output().includes(TEST_SECRET), false, "no secret in the log");
    });

    test("a failed webhook attempt is a warning with the store, endpoint, delivery and event ids", async () => {
      const store = (await (await admin("POST", "/stores", { name: "Outbound" })).json()) as { id: string };
      const added = await admin("POST", `/stores/${store.id}/endpoints`, { url: receiver.url });
      assert.equal(added.status, 201, "ENDPOINT_ALLOW=127.0.0.1:<port> allows the receiver at save");
      const ep = (await added.json()) as { id: string };
      const customer = (await (await admin("POST", `/stores/${store.id}/customers`, { email: "log@example.com" })).json()) as { id: string };
      assert.equal((await admin("POST", `/stores/${store.id}/invoices`, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] })).status, 201);
      const line = await lineWritten(server, (l) => l.level === WARN && l.endpointId === ep.id, "about the failed attempt");
      const events = (await (await admin("GET", `/stores/${store.id}/events`)).json()) as { data: { id: string }[] };
      assert.deepEqual({ storeId: line.storeId, eventId: line.eventId, attempt: line.attempt, status: line.status }, { storeId: store.id, eventId: events.data[0]!.id, attempt: 1, status: 500 });
      assert.match(String(line.deliveryId), /^edl_/);
      assert.match(line.msg, /answered 500; will be retried/);
      assert.equal(server.output().includes("status 500 from the test receiver"), false, "not the receiver's answer");
    });
  });
}

describe("LOG_FORMAT", () => {
  let server: ServerProcess;
  let drop: () => Promise<void>;
  before(async () => {
    const db = await freshDatabase("sqlite");
    drop = db.drop;
    server = await startServer({ DATABASE_URL: db.url, SECRETS_KEY: randomBytes(32).toString("hex"), LOG_LEVEL: "debug", LOG_FORMAT: "pretty" });
  });
  after(async () => {
    await server?.stop();
    await drop?.();
  });

  test("pretty prints lines for people (pino-pretty), and at debug the probes are written", async () => {
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
    const deadline = Date.now() + 30_000;
    while (!server.output().includes("GET /healthz 200") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    const out = server.output();
    assert.match(out, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: storefront serving on http:\/\/127\.0\.0\.1:\d+ \(SQLite .*\); admin API off/m);
    assert.match(out, /DEBUG: GET \/healthz 200/);
    assert.equal(out.includes('{"level":'), false, "no JSON line");
  });

  test("unset: pretty on a terminal outside production, JSON otherwise", () => {
    assert.equal(chooseLogFormat({ format: null, isTTY: true, nodeEnv: undefined }), "pretty");
    assert.equal(chooseLogFormat({ format: null, isTTY: true, nodeEnv: "production" }), "json");
    assert.equal(chooseLogFormat({ format: null, isTTY: false, nodeEnv: "development" }), "json");
    assert.equal(chooseLogFormat({ format: "json", isTTY: true, nodeEnv: undefined }), "json");
    assert.equal(chooseLogFormat({ format: "pretty", isTTY: false, nodeEnv: "production" }), "pretty");
  });
});
