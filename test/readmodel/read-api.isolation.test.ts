// The money path first (issue 12.1): a payment webhook is answered while long reads are in progress. Reads
// are built on reader threads with their own database connections, so the thread that answers webhooks
// only passes pages along. Measured as an order of events (the webhook's answer comes before any of the
// reads'), never as a timing bound: on a thread shared with the reads, the webhook waits for them.
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";
import { deliverSigned, installPlugin, SIGNED_PLUGIN } from "../helpers/webhook.ts";

const CUSTOMERS = 500;
const SESSIONS = 60;
const INVOICES = 12;
const T0 = Date.parse("2024-01-01T00:00:00.000Z");

for (const dialect of DIALECTS) {
  describe(`isolation of reads from webhooks on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let store: { id: string; key: string };
    before(async () => {
      h = await createHarness(dialect.name, { RATE_LIMIT_MAX: "100000", WEBHOOK_RATE_LIMIT_MAX: "100000", READ_THREADS: "2" });
      store = await h.store("busy");
      await installPlugin(h, store.id, "pay", SIGNED_PLUGIN);
      // Customers with many sessions and invoices, written raw as a bulk import would: their read-model
      // documents are missing, so every page assembles them from the source tables (the slow path).
      await h.services.db.kysely.transaction().execute(async (tx) => {
        for (let c = 0; c < CUSTOMERS; c++) {
          const id = `cus_iso_${String(c).padStart(4, "0")}`;
          await tx.insertInto("customers").values({ id, store_id: store.id, email: `${id}@example.com`, created_at: T0 + c }).execute();
          await tx
            .insertInto("customer_sessions")
            .values(
              Array.from({ length: SESSIONS }, (_, s) => ({
                id: `ses_iso_${c}_${s}`,
                store_id: store.id,
                customer_id: id,
                ip: "203.0.113.9",
                user_agent: "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
                country: "DE",
                last_used_at: T0 + s,
                created_at: T0 + s,
              })),
            )
            .execute();
          await tx
            .insertInto("invoices")
            .values(
              Array.from({ length: INVOICES }, (_, i) => ({
                id: `inv_iso_${c}_${i}`,
                store_id: store.id,
                customer_id: id,
                total_cents: 4999,
                payment_method: "stripe",
                displayed_payment_info: "visa •••• 4242",
                created_on_session_id: `ses_iso_${c}_0`,
                left_feedback: 0,
                status: i % 3 === 0 ? "pending" : "completed",
                discord_id: null,
                discord_email: null,
                created_at: T0 + i,
                updated_at: T0 + i,
              })),
            )
            .execute();
        }
      });
    });
    after(async () => {
      await h?.close();
    });

    test("the webhook is answered while a long read is in progress", async () => {
      const order: string[] = [];
      const reads = Array.from({ length: 4 }, (_, i) =>
        h.get(`/api/service/customers?limit=500`, store.key).then((r) => {
          order.push(`read ${i}`);
          return r;
        }),
      );
      const webhook = await deliverSigned(h, store.id, { type: "something.else" });
      order.push("webhook");
      expectStatus(webhook, 200);
      assert.deepEqual(webhook.json(), { status: "ignore" });
      const pages = await Promise.all(reads);
      assert.equal(order[0], "webhook", `order of answers: ${order.join(", ")}`);
      for (const page of pages) {
        expectStatus(page, 200);
        const body = page.json<{ data: { customers: { customerSessions: unknown[]; invoices: unknown[] }[] } }>();
        assert.equal(body.data.customers.length, CUSTOMERS);
        assert.equal(body.data.customers[0]!.customerSessions.length, SESSIONS);
        assert.equal(body.data.customers[0]!.invoices.length, INVOICES);
      }
    });

    test("pages from the reader threads are the pages the main thread builds", async () => {
      assert.ok(h.services.reads.threads > 0, "reader threads are on in this suite");
      const fromThreads = await h.get(`/api/service/customers?limit=7&status=pending`, store.key);
      expectStatus(fromThreads, 200);
      const q = { id: null, from: null, to: null, limit: 7, after: null, statuses: ["pending"], email: null };
      const direct = await h.services.customers.list(store.id, q);
      assert.deepStrictEqual(fromThreads.json<{ data: { customers: unknown[] } }>().data.customers, direct.customers);
      assert.equal(fromThreads.headers["content-type"], "application/json; charset=utf-8");
    });

    test("reader threads run at a lower priority (READ_THREADS_NICE, 5 nice steps by default, at most 19) than the thread that answers webhooks", { skip: process.platform !== "linux" }, () => {
      const niceOf = (tid: string) => Number(readFileSync(`/proc/self/task/${tid}/stat`, "utf8").split(") ")[1]!.split(" ")[16]);
      const nices = readdirSync("/proc/self/task").map(niceOf);
      // Relative to the main thread's own nice: the suite may itself run under `nice -n 10`.
      const main = niceOf(String(process.pid));
      const readers = Math.min(19, main + h.config.readThreadsNice);
      assert.equal(h.config.readThreadsNice, 5, "the default");
      assert.ok(readers > main || main === 19, `the readers' nice (${readers}) is above the main thread's (${main})`);
      assert.ok(nices.filter((n) => n === readers).length >= h.services.reads.threads, `main ${main}, threads' nice values: ${nices.join(" ")}`);
    });

    test("a bad query answered by a reader thread is the same 400 as on the main thread", async () => {
      const r = await h.get(`/api/service/invoices?status=paid`, store.key);
      expectStatus(r, 400);
      const err = r.json<{ error: { code: string; param: string } }>().error;
      assert.equal(err.code, "invalid_request");
      assert.equal(err.param, "status");
    });
  });
}
