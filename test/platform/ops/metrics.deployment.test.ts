// Metrics for a deployment of several processes: the outbound backlog by state (read from the database at
// each scrape), the build (release and schema version), each background loop's last success in a real
// serve process, and /metrics on its own port or behind METRICS_TOKEN.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { sql } from "kysely";
import { RETRY_SCHEDULE_MS } from "../../../src/events/event-dispatcher.ts";
import { ADMIN_TOKEN, DIALECTS, createHarness, expectStatus, freshDatabase, type Harness } from "../../helpers/harness.ts";
import { startReceiver, type Receiver } from "../../helpers/receiver.ts";
import { freePort, startServer, type ServerProcess } from "../../helpers/server.ts";
import { paymentSetup } from "../../helpers/webhook.ts";
import { sample } from "../../helpers/metrics.ts";

const METRICS_TOKEN = "metrics-token-0123456789";

for (const dialect of DIALECTS) {
  describe(`deployment metrics on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let receiver: Receiver;
    before(async () => {
      receiver = await startReceiver();
      h = await createHarness(dialect.name, { ENDPOINT_ALLOW: "127.0.0.1", METRICS_TOKEN }, { dispatch: { timeoutMs: 400 } });
    });
    after(async () => {
      await h?.close();
      await receiver?.close();
    });
    const scrape = async () => {
      const r = await h.app.inject({ method: "GET", url: "/metrics", headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
      expectStatus(r, 200);
      return r.body;
    };
    const backlog = async () => {
      const text = await scrape();
      return { due: sample(text, 'storefront_event_backlog{state="due"}'), retrying: sample(text, 'storefront_event_backlog{state="retrying"}'), inFlight: sample(text, 'storefront_event_backlog{state="in_flight"}') };
    };

    test("the outbound backlog by state: due, then retrying after a failed attempt, due again at its retry time, empty once delivered", async () => {
      assert.deepEqual(await backlog(), { due: 0, retrying: 0, inFlight: 0 });
      const { store, invoice } = await paymentSetup(h);
      const ep = await h.admin("POST", `/api/admin/stores/${store.id}/endpoints`, { url: receiver.url });
      expectStatus(ep, 201);
      await h.admin("POST", `/api/admin/stores/${store.id}/events/${(await h.admin("GET", `/api/admin/stores/${store.id}/events`)).json<{ data: { id: string }[] }>().data[0]!.id}/resend`, {});
      assert.deepEqual(await backlog(), { due: 1, retrying: 0, inFlight: 0 }, `the resent invoice.created of ${invoice.id}`);
      h.clock.advance(90_000);
      assert.equal(sample(await scrape(), "storefront_event_backlog_oldest_seconds"), 90);
      await receiver.down();
      assert.equal(await h.services.dispatcher.runDue(), 1);
      assert.deepEqual(await backlog(), { due: 0, retrying: 1, inFlight: 0 });
      h.clock.advance(RETRY_SCHEDULE_MS[0]!);
      assert.deepEqual(await backlog(), { due: 1, retrying: 0, inFlight: 0 });
      await receiver.start();
      assert.equal(await h.services.dispatcher.runDue(), 1);
      assert.deepEqual(await backlog(), { due: 0, retrying: 0, inFlight: 0 });
      assert.equal(sample(await scrape(), "storefront_event_backlog_oldest_seconds"), 0);
    });

    test("build info names the release and the schema version the database is at", async () => {
      const { version } = JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string };
      const { rows } = await sql<{ name: string }>`select name from kysely_migration order by name desc limit 1`.execute(h.services.db.kysely);
      assert.equal(sample(await scrape(), `storefront_build_info{release="${version}",schema="${rows[0]!.name}"}`), 1);
    });

    test("METRICS_TOKEN: /metrics without it, or with another, is 401", async () => {
      expectStatus(await h.app.inject({ method: "GET", url: "/metrics" }), 401);
      expectStatus(await h.app.inject({ method: "GET", url: "/metrics", headers: { authorization: "Bearer another-token-0123456789" } }), 401);
    });
  });
}

describe("serve's metrics port", () => {
  let server: ServerProcess;
  let metricsPort: number;
  let drop: () => Promise<void>;
  before(async () => {
    const db = await freshDatabase("sqlite");
    drop = db.drop;
    metricsPort = await freePort();
    server = await startServer({ DATABASE_URL: db.url, SECRETS_KEY: randomBytes(32).toString("hex"), ADMIN_TOKEN, METRICS_PORT: String(metricsPort), METRICS_TOKEN });
  });
  after(async () => {
    await server?.stop();
    await drop?.();
  });
  const metricsUrl = () => `http://127.0.0.1:${metricsPort}/metrics`;

  test("METRICS_PORT serves /metrics there, behind METRICS_TOKEN, and no longer on the API's port", async () => {
    assert.equal((await fetch(`${server.url}/metrics`)).status, 404);
    assert.equal((await fetch(metricsUrl())).status, 401);
    const r = await fetch(metricsUrl(), { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    assert.equal(r.status, 200);
    assert.match(await r.text(), /^storefront_build_info\{/m);
    assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/other`)).status, 404);
  });

  test("each background loop reports its last successful pass", async () => {
    const loops = ["invoice_expiry", "event_dispatcher", "readmodel_projector", "event_sequencer"];
    const deadline = Date.now() + 30_000;
    let text = "";
    let values: (number | null)[];
    for (;;) {
      text = await (await fetch(metricsUrl(), { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
      values = loops.map((loop) => sample(text, `storefront_loop_last_success_timestamp_seconds{loop="${loop}"}`));
      if (values.every((v) => v !== null && v > 0) || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    for (const [i, loop] of loops.entries()) {
      const v = values[i] ?? null;
      assert.ok(v !== null && v > 0 && v <= Date.now() / 1000 + 1, `${loop}: ${String(v)}\n${text.split("\n").filter((l) => l.includes("loop_last")).join("\n")}`);
    }
  });
});
