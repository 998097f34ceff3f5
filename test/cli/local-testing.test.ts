// Testing on a developer's machine (docs/events.md, "Testing on your machine"), with a real serve process
// and the command line as a developer runs them: ENDPOINT_ALLOW=127.0.0.1:<port> given to the server only,
// the command line asking the server (ADMIN_TOKEN), `endpoints test` sending a signed example, and
// `plugins trigger` posting each signable catalogue plugin's fixture signed with the store's own secret.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { SIGNABLE_CATALOG } from "../../src/plugins/fixture-signing.ts";
import { jsonOf, runCli } from "../helpers/cli.ts";
import { ADMIN_TOKEN, DIALECTS, freshDatabase } from "../helpers/harness.ts";
import { startReceiver, type Receiver } from "../helpers/receiver.ts";
import { startServer, type ServerProcess } from "../helpers/server.ts";

type Json = Record<string, unknown>;

/** A paying fixture of each signable catalogue plugin, and a secret of the shape its provider issues. */
const PAYING: Record<string, { fixture: string; secret: string }> = {
  "generic-hmac": { fixture: "paid", secret: randomBytes(16).toString("hex") },
  stripe: { fixture: "checkout-session-completed", secret: `whsec_${randomBytes(16).toString("hex")}` },
  "standard-webhooks": { fixture: "payment-succeeded", secret: `whsec_${randomBytes(24).toString("base64")}` },
  "coinbase-commerce": { fixture: "charge-confirmed", secret: randomBytes(16).toString("hex") },
  nowpayments: { fixture: "finished", secret: randomBytes(16).toString("hex") },
};

for (const { name: dialect, skip } of DIALECTS) {
  describe(`testing on a developer's machine, on ${dialect}`, { skip }, () => {
    let server: ServerProcess;
    let receiver: Receiver;
    let drop: () => Promise<void>;
    /** The command line's environment: the server's database and ADMIN_TOKEN, no ENDPOINT_ALLOW. */
    let env: Record<string, string>;
    const cli = (args: string[], extra: Record<string, string> = {}) => runCli(args, { env: { ...env, ...extra } });

    before(async () => {
      const db = await freshDatabase(dialect);
      drop = db.drop;
      receiver = await startReceiver();
      const base = { DATABASE_URL: db.url, SECRETS_KEY: randomBytes(32).toString("hex"), ADMIN_TOKEN };
      server = await startServer({ ...base, ENDPOINT_ALLOW: `127.0.0.1:${receiver.port}` });
      env = { ...base, PORT: new URL(server.url).port, ENDPOINT_ALLOW: "" };
    });
    after(async () => {
      await server?.stop();
      await receiver?.close();
      await drop?.();
    });

    test("ENDPOINT_ALLOW=127.0.0.1:PORT on the server only: the command line asks the server, and endpoints test sends a signed example", async () => {
      const store = jsonOf(await cli(["stores", "create", "Local"]));
      const endpoint = jsonOf<{ id: string; secret: string }>(await cli(["endpoints", "add", "--store", String(store.id), "--url", receiver.url]));
      receiver.received.length = 0;
      const sent = jsonOf<Json>(await cli(["endpoints", "test", endpoint.id, "--store", String(store.id), "--type", "invoice.refunded", "--json"]));
      assert.deepEqual({ ok: sent.ok, responseStatus: sent.responseStatus, type: sent.type }, { ok: true, responseStatus: 200, type: "invoice.refunded" });
      assert.deepEqual(receiver.verifiedWith(endpoint.secret), [sent.eventId], "signed with the endpoint's secret, the example's id as webhook-id");
      const body = JSON.parse(receiver.received[0]!.body) as { type: string; data: { invoice: { status: string } } };
      assert.deepEqual([body.type, body.data.invoice.status], ["invoice.refunded", "refunded"]);
      const events = jsonOf<{ data: unknown[] }>(await cli(["events", "list", "--store", String(store.id), "--json"]));
      assert.deepEqual(events.data, [], "an example is not an event of the store");
    });

    test("without ADMIN_TOKEN the command line works on the database, and a loopback URL refused there says how to allow it", async () => {
      const store = jsonOf(await cli(["stores", "create", "Alone"]));
      const run = await cli(["endpoints", "add", "--store", String(store.id), "--url", receiver.url], { ADMIN_TOKEN: "" });
      assert.equal(run.code, 1);
      assert.equal(run.stderr.trimEnd().split("\n").length, 1, run.stderr);
      assert.match(run.stderr, /the address is private or reserved .*ENDPOINT_ALLOW=<host>:<port> .*ADMIN_TOKEN .*docs\/events\.md/);
      const local = jsonOf<{ id: string; secret: string }>(await cli(["endpoints", "add", "--store", String(store.id), "--url", receiver.url], { ADMIN_TOKEN: "", ENDPOINT_ALLOW: "127.0.0.1" }));
      receiver.received.length = 0;
      const sent = jsonOf<Json>(await cli(["endpoints", "test", local.id, "--store", String(store.id), "--json"], { ADMIN_TOKEN: "", ENDPOINT_ALLOW: "127.0.0.1" }));
      assert.equal(sent.ok, true);
      assert.equal(sent.sentBy, "this command");
      assert.deepEqual(receiver.verifiedWith(local.secret), [sent.eventId]);
    });

    test("endpoints test shows a failing endpoint's answer and exits 1", async () => {
      const store = jsonOf(await cli(["stores", "create", "Failing"]));
      const endpoint = jsonOf<{ id: string }>(await cli(["endpoints", "add", "--store", String(store.id), "--url", receiver.url]));
      receiver.mode = { kind: "status", status: 503 };
      try {
        const run = await cli(["endpoints", "test", endpoint.id, "--store", String(store.id)]);
        assert.equal(run.code, 1);
        assert.match(run.stdout, /^invoice\.completed evt_\w+ → ep_\w+ answered 503 in \d+ ms \(sent by http:\/\/127\.0\.0\.1:\d+\)\nstatus 503 from the test receiver\n$/);
      } finally {
        receiver.mode = { kind: "ok" };
      }
    });

    test("plugins trigger posts each signable catalogue plugin's paying fixture signed with the store's own secret: the invoice is completed", async () => {
      assert.deepEqual(Object.keys(PAYING).sort(), [...SIGNABLE_CATALOG]);
      const store = String(jsonOf(await cli(["stores", "create", "Trigger"])).id);
      const customer = String(jsonOf(await cli(["customers", "create", "--store", store, "--email", "t@example.com"])).id);
      for (const [catalog, { fixture, secret }] of Object.entries(PAYING)) {
        jsonOf(await cli(["plugins", "install", `my-${catalog}`, "--store", store, "--catalog", catalog, "--secret", `signingSecret=${secret}`]));
        const invoice = String(jsonOf(await cli(["checkout", "--store", store, "--customer", customer, "--item", "v:1:49.99"])).id);
        const answer = jsonOf<{ status: number; deliveryId: string; body: Json }>(await cli(["plugins", "trigger", `my-${catalog}`, fixture, "--store", store, "--invoice", invoice, "--json"]));
        assert.deepEqual([answer.status, answer.body], [200, { status: "pushInvoice", invoiceId: invoice }], catalog);
        const delivery = jsonOf<{ outcome: string }>(await cli(["deliveries", "show", answer.deliveryId, "--store", store]));
        assert.equal(delivery.outcome, "applied", catalog);
      }
    });

    test("plugins trigger refuses in one line what it cannot sign or find", async () => {
      const store = String(jsonOf(await cli(["stores", "create", "Unsignable"])).id);
      jsonOf(await cli(["plugins", "install", "pp", "--store", store, "--catalog", "paypal", "--secret", "clientId=a", "--secret", "clientSecret=b", "--secret", "webhookId=c"]));
      jsonOf(await cli(["plugins", "install", "gh", "--store", store, "--catalog", "generic-hmac", "--secret", "signingSecret=s"]));
      for (const [args, message] of [
        [["pp", "capture-completed"], /cannot sign a paypal delivery: PayPal's deliveries are verified by PayPal's API/],
        [["gh", "no-such-fixture"], /no fixture no-such-fixture for generic-hmac; there are: .*paid/],
        [["gh", "paid", "--server", "http://127.0.0.1:9"], /no storefront service answers at http:\/\/127\.0\.0\.1:9/],
      ] as const) {
        const run = await cli(["plugins", "trigger", ...args, "--store", store]);
        assert.equal(run.code, 1, run.stdout);
        assert.equal(run.stderr.trimEnd().split("\n").length, 1, run.stderr);
        assert.match(run.stderr, message);
      }
    });
  });
}
