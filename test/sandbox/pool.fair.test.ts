// Fair scheduling between stores in the sandbox pool: per-store queues served in turn, a per-store cap
// on the workers one store's runs occupy, and a per-store queue bound past which the flooding store's
// runs are refused at once (`busy`). Orderings are asserted, never timings.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { createSandbox, type RunOutcome, type Sandbox } from "../../src/sandbox/index.ts";
import { resolveLimits } from "../../src/sandbox/sandbox.limits.ts";
import { expectError, input } from "./helpers.ts";

const open: Sandbox[] = [];
function sandboxWith(...args: Parameters<typeof createSandbox>): Sandbox {
  const sandbox = createSandbox(...args);
  open.push(sandbox);
  return sandbox;
}
after(() => Promise.all(open.map((s) => s.close())));

const ENDLESS = `while true do end`;
const TRIVIAL = `return { status = "ignore", invoiceId = store.id }`;
const forStore = (source: string, storeId: string) => input(source, { store: { id: storeId } });
const noInvoices = { getInvoice: () => Promise.resolve(null) };

/**
 * Returns once every worker of the pool is running (so that start-up time decides no order below): one
 * run per worker, each held in a host call until all of them are, which only distinct workers can be.
 */
async function warm(sandbox: Sandbox, workers: number): Promise<void> {
  let arrived = 0;
  let release = () => {};
  const all = new Promise<void>((resolve) => (release = resolve));
  const barrier = {
    getInvoice: async () => {
      if (++arrived === workers) release();
      await all;
      return null;
    },
  };
  const outcomes = await Promise.all(Array.from({ length: workers }, (_, i) => sandbox.run(forStore(`getInvoice("x") return { status = "ignore" }`, `st_warm${i}`), barrier)));
  for (const o of outcomes) assert.ok(o.ok, JSON.stringify(o));
}

describe("fair sandbox: per-store queues, a per-store cap, a per-store queue bound", () => {
  test("the default cap leaves one worker to other stores, and follows the pool size", () => {
    assert.equal(resolveLimits({ poolSize: 2 }).maxConcurrentPerStore, 1);
    assert.equal(resolveLimits({ poolSize: 8 }).maxConcurrentPerStore, 7);
    assert.equal(resolveLimits({ poolSize: 1 }).maxConcurrentPerStore, 1);
    assert.equal(resolveLimits({ poolSize: 4, maxConcurrentPerStore: 4 }).maxConcurrentPerStore, 4);
    assert.throws(() => resolveLimits({ maxConcurrentPerStore: 0 }), /maxConcurrentPerStore/);
    assert.throws(() => resolveLimits({ maxQueuedPerStore: -1 }), /maxQueuedPerStore/);
  });

  test("one store floods 60 endless loops: another store's trivial run finishes before all but a few of them", async () => {
    // A long wall time: none of the queued flood may time out (all at once) while the assertions run.
    const sandbox = sandboxWith({ poolSize: 2, cpuMs: 100, wallMs: 20_000, maxQueuedPerStore: 100 });
    await warm(sandbox, 2);
    let floodDone = 0;
    const flood = Array.from({ length: 60 }, () =>
      sandbox.run(forStore(ENDLESS, "st_flood"), noInvoices).then((o) => {
        floodDone++;
        return o;
      }),
    );
    const other = await sandbox.run(forStore(TRIVIAL, "st_other"), noInvoices);
    const doneBefore = floodDone;
    assert.deepEqual(other.ok && other.result, { status: "ignore", invoiceId: "st_other" }, JSON.stringify(other));
    // First come, first served, it would have waited for the whole flood (or timed out behind it).
    assert.ok(doneBefore <= 2, `${doneBefore} of the flood's runs finished before the other store's trivial run`);
    // And again, in the middle of the flood.
    while (floodDone < 3) await new Promise((r) => setTimeout(r, 20));
    const mark = floodDone;
    const again = await sandbox.run(forStore(TRIVIAL, "st_other"), noInvoices);
    assert.ok(again.ok, JSON.stringify(again));
    assert.ok(floodDone - mark <= 2, `${floodDone - mark} flood runs finished while the other store's second run waited`);
    await sandbox.close();
    const outcomes = await Promise.all(flood);
    for (const o of outcomes) assert.equal(o.ok, false, "every endless loop ended in an error");
  });

  for (const [what, source] of [
    ["trivial runs", TRIVIAL],
    // A run that calls the host has the jobs queued behind it taken back: they must keep their turn.
    ["runs that call getInvoice", `getInvoice("inv_1") return { status = "ignore", invoiceId = store.id }`],
  ] as const) {
    test(`stores are served in turn: with three stores' ${what} queued at once, completions interleave`, async () => {
      const sandbox = sandboxWith({ poolSize: 1, maxQueuedPerStore: 100 });
      await warm(sandbox, 1);
      const order: string[] = [];
      const stores = ["st_a", "st_b", "st_c"];
      const runs: Promise<RunOutcome>[] = [];
      // All of st_a's runs are queued first, then st_b's, then st_c's.
      for (const store of stores) {
        for (let i = 0; i < 12; i++) {
          runs.push(
            sandbox.run(forStore(source, store), noInvoices).then((o) => {
              order.push(store);
              return o;
            }),
          );
        }
      }
      for (const o of await Promise.all(runs)) assert.ok(o.ok, JSON.stringify(o));
      const first = order.slice(0, 12);
      for (const store of stores) {
        // Round robin gives each store 4 of the first 12; the worker's short pipeline (3 jobs) may add a few to the first.
        const n = first.filter((s) => s === store).length;
        assert.ok(n >= 3, `${store} had ${n} of the first 12 completions: ${order.join(" ")}`);
      }
    });
  }

  test("a store at its cap waits for its own runs while another store uses the free worker", async () => {
    const sandbox = sandboxWith({ poolSize: 2, maxConcurrentPerStore: 1, cpuMs: 5_000, wallMs: 10_000 });
    await warm(sandbox, 2);
    const slow = (ms: number) => `local t = os.clock() while os.clock() - t < ${ms / 1000} do end return { status = "ignore", invoiceId = store.id }`;
    const order: string[] = [];
    const track = (p: Promise<RunOutcome>, label: string) => p.then((o) => (order.push(label), o));
    const a1 = track(sandbox.run(forStore(slow(1_500), "st_a"), noInvoices), "a1");
    const a2 = track(sandbox.run(forStore(slow(100), "st_a"), noInvoices), "a2");
    await new Promise((r) => setTimeout(r, 50));
    const b1 = track(sandbox.run(forStore(TRIVIAL, "st_b"), noInvoices), "b1");
    for (const o of await Promise.all([a1, a2, b1])) assert.ok(o.ok, JSON.stringify(o));
    // With a cap of 1, st_a's second run waits for its first; st_b's run takes the other worker at once.
    assert.deepEqual(order, ["b1", "a1", "a2"]);
  });

  test("past the queue bound the flooding store's runs are refused at once as busy; other stores are not", async () => {
    const sandbox = sandboxWith({ poolSize: 1, maxConcurrentPerStore: 1, cpuMs: 100, wallMs: 5_000, maxQueuedPerStore: 5 });
    await warm(sandbox, 1);
    const flood = Array.from({ length: 10 }, () => sandbox.run(forStore(ENDLESS, "st_flood"), noInvoices));
    // Settled before any of the runs it competes with finished: refusals do not wait.
    const first = await Promise.race([...flood.map((p, i) => p.then((o) => ({ i, o })))]);
    expectError(first.o, "busy", /this store already has 5 plugin runs waiting/);
    const other = await sandbox.run(forStore(TRIVIAL, "st_other"), noInvoices);
    assert.ok(other.ok, `another store is not refused: ${JSON.stringify(other)}`);
    const outcomes = await Promise.all(flood);
    const busy = outcomes.filter((o) => !o.ok && o.error.kind === "busy").length;
    // One running (with up to two pipelined behind it at first) and five waiting; the rest refused.
    assert.ok(busy >= 2 && busy <= 4, `${busy} refused`);
    for (const o of outcomes) assert.ok(!o.ok && (o.error.kind === "busy" || o.error.kind === "timeout"), JSON.stringify(o));
  });

  test("compile checks have their own lane and are not held up by a store's flood", async () => {
    const sandbox = sandboxWith({ poolSize: 2, cpuMs: 200, maxQueuedPerStore: 100 });
    await warm(sandbox, 2);
    let floodDone = 0;
    const flood = Array.from({ length: 20 }, () => sandbox.run(forStore(ENDLESS, "st_flood"), noInvoices).then((o) => (floodDone++, o)));
    const check = await sandbox.check(`return { status = "ignore" }`);
    assert.deepEqual(check, { ok: true });
    assert.ok(floodDone <= 2, `${floodDone} flood runs finished before the compile check`);
    await sandbox.close();
    await Promise.all(flood);
  });
});
