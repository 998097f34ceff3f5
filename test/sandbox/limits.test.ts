// The pool's side of the limits: wall time, a CPU budget that is re-armed for every run and does not
// count waiting, crashes that become `killed`, the pool refilling itself, parallel runs, the event
// loop staying free, each limit taken from SandboxLimits, and close().
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { createSandbox, type Sandbox, type SandboxHost } from "../../src/sandbox/index.ts";
import { assertHealthy, expectError, host, input, run } from "./helpers.ts";

const crashingWorker = new URL("./fixtures/crashing.worker.ts", import.meta.url);
const silentWorker = new URL("./fixtures/silent.worker.ts", import.meta.url);

const open: Sandbox[] = [];
function sandboxWith(...args: Parameters<typeof createSandbox>): Sandbox {
  const sandbox = createSandbox(...args);
  open.push(sandbox);
  return sandbox;
}
after(() => Promise.all(open.map((s) => s.close())));

const never: SandboxHost = { getInvoice: () => new Promise(() => {}) };
const busy = (ms: number) => `local t = os.clock() while os.clock() - t < ${ms / 1000} do end return {status="ignore"}`;

describe("time limits", () => {
  test("a host call that never answers ends at the wall time, the logs so far kept, and the pool goes on", async () => {
    const sandbox = sandboxWith({ poolSize: 1, wallMs: 300 });
    const outcome = await sandbox.run(input(`log("asking") getInvoice("inv_1") return {status="ignore"}`), never);
    expectError(outcome, "timeout", /wall time of 300 ms/);
    // Not before the wall time: a lower bound only (an upper one would be the machine's load, not the limit).
    assert.ok(outcome.durationMs >= 290, String(outcome.durationMs));
    assert.deepEqual(outcome.logs.map((l) => l.description), ["asking"]);
    await assertHealthy(sandbox);
  });

  test("the CPU budget is re-armed for every run: each runaway run stops near the budget, quick runs in between succeed", async () => {
    const sandbox = sandboxWith({ poolSize: 1, cpuMs: 150 });
    for (let i = 0; i < 3; i++) {
      await assertHealthy(sandbox);
      const outcome = await run(sandbox, `while true do end`);
      expectError(outcome, "timeout", /CPU budget of 150 ms/);
      // The budget was spent, not cut short: a lower bound only.
      assert.ok(outcome.durationMs >= 140, `run ${i}: ${outcome.durationMs} ms`);
    }
    const fine = await run(sandbox, busy(60));
    assert.ok(fine.ok, JSON.stringify(fine));
    assert.ok((fine.cpuMs ?? 0) > 10, `cpuMs ${fine.cpuMs}`); // os.clock is wall time here; the thread may share a core
  });

  test("time spent waiting for the host does not count against the CPU budget", async () => {
    const slow: SandboxHost = { getInvoice: (id) => new Promise((resolve) => setTimeout(() => resolve(id === "inv_1" ? { id } : null), 250)) };
    const sandbox = sandboxWith({ poolSize: 1, cpuMs: 100, wallMs: 2000 });
    const outcome = await sandbox.run(input(`getInvoice("inv_1") getInvoice("inv_1") return {status="pushInvoice", invoiceId=getInvoice("inv_1").id}`), slow);
    assert.deepEqual(outcome.ok && outcome.result, { status: "pushInvoice", invoiceId: "inv_1" });
    assert.ok(outcome.durationMs >= 700, String(outcome.durationMs));
  });

  test("a script never blocks the event loop of the service: timers fire while two runaway scripts run", async () => {
    const sandbox = sandboxWith({ poolSize: 2, cpuMs: 400 });
    await assertHealthy(sandbox);
    // Counted, not timed: the event loop turns (a timer re-armed each time) while both workers loop.
    let turns = 0;
    let looping = true;
    const tick = () => {
      turns++;
      if (looping) setTimeout(tick, 1);
    };
    setTimeout(tick, 1);
    const outcomes = await Promise.all([run(sandbox, `while true do end`), run(sandbox, `local s = string.rep("a", 600) .. "" ; return s:gsub("a*a*a*b", "")`)]);
    looping = false;
    for (const outcome of outcomes) expectError(outcome, "timeout");
    // 400 ms of CPU each: a blocked loop would have turned once or not at all.
    assert.ok(turns >= 10, `the event loop turned ${turns} times while the scripts ran`);
  });

  test("runs use the workers in parallel", async () => {
    // One store may use both workers only when its cap allows it (the default keeps one for other stores).
    const sandbox = sandboxWith({ poolSize: 2, cpuMs: 1000, wallMs: 3000, maxConcurrentPerStore: 2 });
    for (let i = 0; i < 3; i++) await Promise.all([run(sandbox, busy(30)), run(sandbox, busy(30))]); // both workers started
    // A rendezvous, not a stopwatch: each run asks the host, and the host answers only once both runs have
    // asked. Run one after the other, the first would wait for the second until its wall time ran out.
    const asked = new Set<string>();
    let bothAsked = () => {};
    const met = new Promise<void>((resolve) => (bothAsked = resolve));
    const rendezvous: SandboxHost = {
      getInvoice: async (id) => {
        asked.add(id);
        if (asked.size === 2) bothAsked();
        await met;
        return null;
      },
    };
    const meet = (id: string) => sandbox.run(input(`local t = os.clock() while os.clock() - t < 0.05 do end getInvoice("${id}") return {status="ignore"}`), rendezvous);
    const outcomes = await Promise.all([meet("a"), meet("b")]);
    for (const outcome of outcomes) assert.ok(outcome.ok, JSON.stringify(outcome));
  });

  test("a run that cannot get a worker within its wall time (plus 2 s for a worker to start) fails with timeout", async () => {
    const sandbox = sandboxWith({ poolSize: 1, wallMs: 100 }, { workerUrl: silentWorker });
    const outcome = await run(sandbox, `return {status="ignore"}`);
    expectError(outcome, "timeout", /no sandbox worker became free within 2100 ms/);
  });
});

// These runs all come from one store: its cap is raised to the pool size, as a single-store deployment would.
describe("jobs queued behind a running one", () => {
  test("a run waiting on the host does not hold up the runs queued behind it", async () => {
    const sandbox = sandboxWith({ poolSize: 2, wallMs: 5000, cpuMs: 1000, maxConcurrentPerStore: 2 });
    for (let i = 0; i < 3; i++) await Promise.all([run(sandbox, busy(20)), run(sandbox, busy(20))]);
    const slowHost: SandboxHost = { getInvoice: () => new Promise((resolve) => setTimeout(() => resolve(null), 1500)) };
    let slowDone = false;
    const slow = sandbox.run(input(`getInvoice("x") return {status="ignore"}`), slowHost).then((o) => ((slowDone = true), o));
    const quick = await Promise.all(Array.from({ length: 8 }, () => run(sandbox, `return {status="ignore"}`)));
    for (const outcome of quick) assert.ok(outcome.ok, JSON.stringify(outcome));
    assert.equal(slowDone, false, "the quick runs were answered while the host call still waited");
    assert.ok((await slow).ok);
  });

  test("runs queued behind a runaway script move to another worker, and each runs exactly once", async () => {
    const sandbox = sandboxWith({ poolSize: 2, cpuMs: 1500, maxConcurrentPerStore: 2 });
    for (let i = 0; i < 3; i++) await Promise.all([run(sandbox, busy(20)), run(sandbox, busy(20))]);
    const seen: string[] = [];
    const counting: SandboxHost = { getInvoice: (id) => (seen.push(id), Promise.resolve(null)) };
    let runawayDone = false;
    const runaway = run(sandbox, `while true do end`).then((o) => ((runawayDone = true), o));
    const quick = await Promise.all(Array.from({ length: 12 }, (_, n) => sandbox.run(input(`getInvoice("job-${n}") return {status="ignore"}`), counting)));
    for (const outcome of quick) assert.ok(outcome.ok, JSON.stringify(outcome));
    assert.equal(runawayDone, false, "the quick runs were answered while the runaway one still ran");
    assert.deepEqual([...seen].sort(), Array.from({ length: 12 }, (_, n) => `job-${n}`).sort());
    expectError(await runaway, "timeout");
  });

  test("with a single worker, a run queued behind a runaway one runs after it is stopped", async () => {
    const sandbox = sandboxWith({ poolSize: 1, cpuMs: 150 });
    await assertHealthy(sandbox);
    const [runaway, next] = await Promise.all([run(sandbox, `while true do end`), run(sandbox, `return {status="ignore", invoiceId="after"}`)]);
    expectError(runaway, "timeout");
    assert.deepEqual(next.ok && next.result, { status: "ignore", invoiceId: "after" });
  });
});

describe("crashes", () => {
  const sandbox = () => sandboxWith({ poolSize: 1, wallMs: 10_000, cpuMs: 5_000 }, { workerUrl: crashingWorker });
  const whoami = async (box: Sandbox): Promise<string> => {
    const outcome = await run(box, `--probe:thread`);
    assert.ok(outcome.ok && outcome.result.invoiceId, JSON.stringify(outcome));
    return outcome.result.invoiceId;
  };

  test("a worker thread that exits mid-run gives killed, and the pool replaces it", async () => {
    const box = sandbox();
    await assertHealthy(box);
    expectError(await run(box, `--crash:exit`), "killed", /exited \(code 7\)/);
    await assertHealthy(box);
  });

  test("an exception outside Lua gives killed, and the pool replaces the worker", async () => {
    const box = sandbox();
    expectError(await run(box, `--crash:throw`), "killed", /worker bug/);
    await assertHealthy(box);
  });

  test("a Lua panic (an error outside any protected call) gives killed, not an abort, and the state is retired", async () => {
    const box = sandbox();
    const before = await whoami(box);
    expectError(await run(box, `--crash:panic`), "killed", /the Lua runtime failed: unprotected error in the Lua runtime/);
    assert.notEqual(await whoami(box), before, "the worker whose state panicked was not replaced");
    await assertHealthy(box);
  });

  test("a fault inside the WebAssembly stack mid-run gives killed, and the pool replaces the worker", async () => {
    const box = sandbox();
    const before = await whoami(box);
    expectError(await run(box, `local t = {} for i = 1, 1000 do t[i] = {} end --crash:trap`), "killed", /the Lua runtime failed: unreachable/);
    // The next runs get a fresh worker: its state carries nothing of the faulted one.
    assert.notEqual(await whoami(box), before, "the worker whose state faulted was not replaced");
    await assertHealthy(box);
    const after = await run(box, `return {status="ignore", invoiceId=tostring(rawget(_ENV, "t"))}`);
    assert.deepEqual(after.ok && after.result, { status: "ignore", invoiceId: "nil" });
  });

  test("a worker that exhausts its JavaScript heap (resourceLimits) gives killed", async () => {
    const box = sandbox();
    expectError(await run(box, `--crash:heap`), "killed", /out of memory|exited/i);
    await assertHealthy(box);
  });
});

describe("each limit comes from SandboxLimits", () => {
  const sandbox = () =>
    sandboxWith({ poolSize: 1, memoryBytes: 1024 * 1024, maxResultBytes: 100, maxFetches: 0, maxLogLines: 2, maxLogBytes: 8 });

  test("memoryBytes, maxResultBytes, maxFetches, maxLogLines and maxLogBytes", async () => {
    const box = sandbox();
    expectError(await run(box, `local s = string.rep("x", 2 * 1024 * 1024)`), "memory_limit", /memory limit of 1048576 bytes/);
    expectError(await run(box, `return {status="ignore", invoiceId=string.rep("x", 101)}`), "invalid_result", /larger than 100 bytes/);
    const fetched = await run(box, `local r, e = fetch("http://example.com/") return {status="ignore", invoiceId=e}`);
    assert.deepEqual(fetched.ok && fetched.result, { status: "ignore", invoiceId: "fetch refused: the limit of 0 fetches per run is reached" });
    const logged = await run(box, `log("abcdefghijkl") log("b") log("c") return {status="ignore"}`);
    assert.deepEqual(logged.logs.map((l) => l.description), ["abcde…", "log limit of 2 lines reached; further lines were dropped"]);
  });

  test("invalid limits are refused when the sandbox is created", () => {
    assert.throws(() => createSandbox({ cpuMs: 0 }), /cpuMs must be a positive number/);
    assert.throws(() => createSandbox({ maxFetches: -1 }), /maxFetches must be a non-negative integer/);
  });
});

describe("close", () => {
  test("close ends runs in flight as killed, later runs are killed at once, and closing twice is fine", async () => {
    const box = sandboxWith({ poolSize: 1 });
    await assertHealthy(box);
    const inFlight = box.run(input(`getInvoice("inv_1") return {status="ignore"}`), never);
    await new Promise((resolve) => setTimeout(resolve, 50));
    await box.close();
    expectError(await inFlight, "killed", /closed/);
    expectError(await box.run(input(`return {status="ignore"}`), host), "killed", /closed/);
    await box.close();
  });
});
