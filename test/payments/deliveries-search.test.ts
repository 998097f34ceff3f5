// Searching and following the delivery log: filters by outcome, plugin, invoice and time in the admin API
// and the command line, the indexes that serve them, and `deliveries tail` following new deliveries.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import path from "node:path";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { loadConfig } from "../../src/config.ts";
import { followDeliveries } from "../../src/payments/deliveries.follow.ts";
import type { DeliveryRecord, DeliverySummary } from "../../src/payments/deliveries.repository.ts";
import { createServices } from "../../src/services.ts";
import { DIALECTS, createHarness, expectStatus, freshDatabase, type Harness } from "../helpers/harness.ts";
import { deliver, deliverSigned, installPlugin, paymentSetup } from "../helpers/webhook.ts";

type Json = Record<string, unknown>;
type Page = { data: DeliverySummary[]; pagination: { limit: number; nextCursor: string | null } };
const MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../src/main.ts");
const run = promisify(execFile);
const MINUTE = 60_000;

/** A delivery record written directly (the tail tests need arrival times in a chosen order). */
function record(storeId: string, id: string, createdAt: number, outcome: DeliveryRecord["outcome"] = "applied"): DeliveryRecord {
  return {
    id,
    storeId,
    pluginName: "pay",
    pluginVersion: 1,
    bodyBytes: 2,
    replayOf: null,
    method: "POST",
    headers: {},
    query: {},
    body: Buffer.from("{}"),
    outcome,
    result: null,
    error: null,
    logs: [],
    fetches: [],
    invoiceId: null,
    transition: null,
    durationMs: 1,
    responseStatus: 200,
    responseBody: {},
    eventId: null,
    eventType: null,
    createdAt,
  };
}

for (const dialect of DIALECTS) {
  describe(`delivery search on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let storeId: string;
    const ids: Record<string, string> = {};
    before(async () => {
      h = await createHarness(dialect.name);
      // Six deliveries ten minutes apart, of every kind the filters tell apart.
      h.clock.set("2024-05-01T10:00:00.000Z");
      const { store, invoice } = await paymentSetup(h);
      storeId = store.id;
      await installPlugin(h, store.id, "boom", 'error("boom")', {});
      const steps: [string, () => ReturnType<typeof deliver>][] = [
        ["paid", () => deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id })],
        ["rejected", () => deliver(h, store.id, "pay", "{}", { "x-signature": "bad" })],
        ["boom1", () => deliver(h, store.id, "boom", "{}")],
        ["unknownInvoice", () => deliverSigned(h, store.id, { type: "paid", invoiceId: "inv_nope" })],
        ["boom2", () => deliver(h, store.id, "boom", "{}")],
        ["dispute", () => deliverSigned(h, store.id, { type: "dispute", invoiceId: invoice.id })],
      ];
      for (const [name, send] of steps) {
        h.clock.advance(10 * MINUTE);
        const r = await send();
        ids[name] = String(r.headers["x-delivery-id"]);
      }
      ids.invoice = invoice.id;
    });
    after(async () => {
      await h?.close();
    });

    const search = async (query: string): Promise<string[]> => {
      const r = await h.admin("GET", `/api/admin/stores/${storeId}/deliveries${query}`);
      expectStatus(r, 200);
      return r.json<Page>().data.map((d) => d.id);
    };

    test("filters by outcome (one or several), plugin and invoice; every filter given must hold", async () => {
      assert.deepEqual(await search("?outcome=plugin_error"), [ids.boom2, ids.boom1]);
      assert.deepEqual(await search("?outcome=plugin_error,rejected"), [ids.boom2, ids.boom1, ids.rejected]);
      assert.deepEqual(await search("?pluginName=pay"), [ids.dispute, ids.unknownInvoice, ids.rejected, ids.paid]);
      assert.deepEqual(await search(`?invoiceId=${ids.invoice}`), [ids.dispute, ids.paid]);
      assert.deepEqual(await search(`?invoiceId=${ids.invoice}&outcome=applied&pluginName=pay`), [ids.dispute, ids.paid]);
      assert.deepEqual(await search("?pluginName=boom&outcome=applied"), []);
      assert.deepEqual(await search(""), [ids.dispute, ids.boom2, ids.unknownInvoice, ids.boom1, ids.rejected, ids.paid]);
    });

    test("filters by time: since/until as ISO 8601 (a bare date is a whole day) or as a duration back from now", async () => {
      // paid 10:10, rejected 10:20, boom1 10:30, unknownInvoice 10:40, boom2 10:50, dispute 11:00; the clock reads 11:00.
      assert.deepEqual(await search("?since=2024-05-01T10:30:00Z"), [ids.dispute, ids.boom2, ids.unknownInvoice, ids.boom1]);
      assert.deepEqual(await search("?until=2024-05-01T10:20:00.000Z"), [ids.rejected, ids.paid]);
      assert.deepEqual(await search("?since=25m"), [ids.dispute, ids.boom2, ids.unknownInvoice]);
      assert.deepEqual(await search("?since=1h&until=30m&outcome=plugin_error"), [ids.boom1]);
      assert.deepEqual(await search("?since=2024-05-01&until=2024-05-01"), [ids.dispute, ids.boom2, ids.unknownInvoice, ids.boom1, ids.rejected, ids.paid]);
      assert.deepEqual(await search("?until=2024-04-30"), []);
    });

    test("paging keeps the filters: pages of one through the failures, then the end", async () => {
      const page = async (cursor: string | null) =>
        (await h.admin("GET", `/api/admin/stores/${storeId}/deliveries?outcome=plugin_error,rejected&limit=1${cursor === null ? "" : `&cursor=${cursor}`}`)).json<Page>();
      const seen: string[] = [];
      let cursor: string | null = null;
      for (let i = 0; i < 5; i++) {
        const p: Page = await page(cursor);
        seen.push(...p.data.map((d) => d.id));
        cursor = p.pagination.nextCursor;
        if (cursor === null) break;
      }
      assert.deepEqual(seen, [ids.boom2, ids.boom1, ids.rejected]);
      assert.equal(cursor, null);
    });

    test("mistakes answer 400 naming the parameter; an unknown store 404; no admin token 401", async () => {
      const cases: [string, string][] = [
        ["?outcome=plugin_eror", "outcome"],
        ["?outcome=applied,", "outcome"],
        ["?since=yesterday", "since"],
        ["?until=2024-02-30", "until"],
        ["?since=1h&until=2h", "since"],
        ["?status=applied", "status"],
        ["?cursor=nonsense", "cursor"],
      ];
      for (const [query, param] of cases) {
        const r = await h.admin("GET", `/api/admin/stores/${storeId}/deliveries${query}`);
        expectStatus(r, 400);
        assert.equal(r.json<{ error: Json }>().error.param, param, query);
      }
      const unknown = await h.admin("GET", "/api/admin/stores/st_nope/deliveries?outcome=applied");
      expectStatus(unknown, 404);
      assert.equal(unknown.json<{ error: Json }>().error.code, "store_not_found");
      expectStatus(await h.app.inject({ method: "GET", url: `/api/admin/stores/${storeId}/deliveries` }), 401);
    });

    test("following: the backlog first, then each new delivery once, including one that arrived earlier but committed later", async () => {
      const shown: string[] = [];
      const stop = new AbortController();
      const repo = h.services.deliveries;
      let polls = 0;
      const counting = { ...repo, listForward: async (...args: Parameters<typeof repo.listForward>) => ((polls += 1), repo.listForward(...args)) };
      const waitForPolls = async (n: number) => {
        const target = polls + n;
        while (polls < target) await new Promise((r) => setTimeout(r, 5));
      };
      const following = followDeliveries(counting, storeId, { pluginName: "pay" }, {
        backlog: 2,
        intervalMs: 10,
        overlapMs: 30_000,
        signal: stop.signal,
        now: h.clock.now,
        onDelivery: (d) => shown.push(d.id),
      });
      await waitForPolls(2);
      assert.deepEqual(shown, [ids.unknownInvoice, ids.dispute], "the two latest of this plugin, oldest first");
      const now = h.clock.now();
      await repo.insert(record(storeId, "dlv_tail_new", now + 1000));
      await repo.insert(record(storeId, "dlv_tail_other", now + 1500, "plugin_error"));
      await waitForPolls(2);
      // Arrived before the newest one shown, committed after it (a slow plugin): still shown, once.
      await repo.insert(record(storeId, "dlv_tail_late", now - 5000));
      await repo.insert({ ...record(storeId, "dlv_tail_boom", now + 2000), pluginName: "boom" });
      await waitForPolls(3);
      stop.abort();
      await following;
      assert.deepEqual(shown, [ids.unknownInvoice, ids.dispute, "dlv_tail_new", "dlv_tail_other", "dlv_tail_late"]);
    });
  });
}

describe("delivery search indexes", () => {
  test("SQLite: every filter of the list is served by an index starting with the store, not a scan", async () => {
    const h = await createHarness("sqlite");
    try {
      const store = await h.store();
      const handle = h.services.db.sqlite!;
      const seen: string[] = [];
      const prepare = handle.prepare.bind(handle);
      handle.prepare = ((sql: string) => {
        if (sql.includes('from "deliveries"')) seen.push(sql);
        return prepare(sql);
      }) as typeof handle.prepare;
      for (const query of ["?outcome=plugin_error", "?pluginName=pay", "?invoiceId=inv_x", "?since=1h", "?outcome=applied,rejected&since=2024-01-01"]) {
        seen.length = 0;
        expectStatus(await h.admin("GET", `/api/admin/stores/${store.id}/deliveries${query}`), 200);
        assert.equal(seen.length, 1, query);
        const sql = seen[0]!;
        const params = Array.from(sql.matchAll(/\?/g), () => 0);
        const plan = (handle.prepare(`explain query plan ${sql}`).all(...params) as { detail: string }[]).map((r) => r.detail).join("; ");
        assert.match(plan, /SEARCH deliveries USING (COVERING )?INDEX deliveries_store\w* \(store_id=\?/, `${query}: ${plan}`);
        assert.doesNotMatch(plan, /SCAN deliveries/, `${query}: ${plan}`);
      }
    } finally {
      await h.close();
    }
  });
});

describe("deliveries from the command line", () => {
  test("`deliveries list --outcome plugin_error --since 1h` and `deliveries tail` following a new delivery", async () => {
    const database = await freshDatabase("sqlite");
    const secretsKey = randomBytes(32).toString("hex");
    const config = loadConfig({ DATABASE_URL: database.url, SECRETS_KEY: secretsKey, LOG_LEVEL: "silent" });
    const env = { ...process.env, DATABASE_URL: database.url, SECRETS_KEY: secretsKey, LOG_LEVEL: "silent" };
    const s = await createServices(config);
    try {
      const storeId = (await s.stores.createStore("cli")).id;
      const now = Date.now();
      await s.deliveries.insert(record(storeId, "dlv_cli_old_error", now - 2 * 3_600_000, "plugin_error"));
      await s.deliveries.insert(record(storeId, "dlv_cli_error", now - 10 * MINUTE, "plugin_error"));
      await s.deliveries.insert(record(storeId, "dlv_cli_ok", now - 5 * MINUTE, "applied"));

      const listed = await run(process.execPath, [MAIN, "deliveries", "list", "--store", storeId, "--outcome", "plugin_error", "--since", "1h", "--json"], { env });
      assert.deepEqual((JSON.parse(listed.stdout) as { data: DeliverySummary[] }).data.map((d) => d.id), ["dlv_cli_error"], "the admin API's page shape");
      const table = await run(process.execPath, [MAIN, "deliveries", "list", "--store", storeId, "--outcome", "plugin_error"], { env });
      assert.match(table.stdout, /^id\s+createdAt\s+pluginName/);
      assert.equal(table.stdout.trim().split("\n").length, 3, "header and two rows");
      const bad = await run(process.execPath, [MAIN, "deliveries", "list", "--store", storeId, "--since", "soon"], { env }).then(
        () => assert.fail("a bad --since must fail"),
        (err: { code: number; stderr: string }) => err,
      );
      assert.equal(bad.code, 1);
      assert.match(bad.stderr, /since must be an ISO 8601 date-time/);

      const tail = spawn(process.execPath, [MAIN, "deliveries", "tail", "--store", storeId, "--lines", "1", "--interval", "100", "--json"], { env, stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      let err = "";
      tail.stdout.on("data", (d: Buffer) => (out += d.toString()));
      tail.stderr.on("data", (d: Buffer) => (err += d.toString()));
      const waitFor = async (text: string) => {
        for (let i = 0; i < 200 && !out.includes(text); i++) await new Promise((r) => setTimeout(r, 50));
        assert.ok(out.includes(text), `tail printed ${text}: ${out} ${err}`);
      };
      await waitFor("dlv_cli_ok");
      await s.deliveries.insert(record(storeId, "dlv_cli_new", Date.now(), "rejected"));
      await waitFor("dlv_cli_new");
      tail.kill("SIGTERM");
      const [code] = (await once(tail, "exit")) as [number | null];
      assert.equal(code, 0, err);
      assert.deepEqual(
        out.trim().split("\n").map((l) => (JSON.parse(l) as DeliverySummary).id),
        ["dlv_cli_ok", "dlv_cli_new"],
      );
    } finally {
      await s.close();
      await database.drop();
    }
  });
});
