// One webhook benchmark server: a fresh database with the layout of layout.ts, serving the real app of the
// checkout at --root (this one, or the baseline's). Only the service's stable entry points are imported,
// from that checkout: createServices (src/services.ts), buildApp (src/app.ts), loadConfig (src/config.ts);
// the data goes in through the admin API, the source tables and `storefront seed`. So the same script
// measures two versions whose insides differ. It runs what `serve` runs beside the HTTP server (the event
// dispatcher); a version whose read model is brought up to date by a loop that `serve` starts must have
// that loop started here too (startBackgroundWork), or the settle step below fails and says so.
//   (forked by run.ts) node bench/webhook/server.ts --root DIR --dialect sqlite|postgres [--invoices N] …
import { randomBytes } from "node:crypto";
import path from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
// Types only, from this checkout (erased at run time): the modules themselves come from --root.
import type * as AppModule from "../../src/app.ts";
import type * as ConfigModule from "../../src/config.ts";
import type { Histogram } from "prom-client";
import type * as ServicesModule from "../../src/services.ts";
import { benchDatabase } from "../lib/bench-database.ts";
import { ADMIN_TOKEN, buildLayout, type Injector } from "./layout.ts";
import { plainTypeScriptRun, type RunInputLike } from "./plugin.ts";
import { threadsCpu, threadWaitMicros } from "./probes.ts";
import { loopLateness, type PageStageBuckets, parseReadModelGauges, type Layout, type RunnerMessage, type ServerMessage } from "./protocol.ts";

const { values: args } = parseArgs({
  options: {
    root: { type: "string", default: path.resolve(import.meta.dirname, "..", "..") },
    dialect: { type: "string", default: "sqlite" },
    label: { type: "string", default: "wh" },
    invoices: { type: "string", default: "100000" },
    stores: { type: "string", default: "32" },
    "history-customers": { type: "string", default: "32" },
    "history-invoices": { type: "string", default: "5000" },
    "reads-customers": { type: "string", default: "1000" },
    "plain-ts": { type: "boolean", default: false },
    "settle-timeout": { type: "string", default: "600" },
  },
});
const root = path.resolve(args.root);
const fromRoot = (file: string) => pathToFileURL(path.join(root, "src", file)).href;
/** The followers' loops, stopped before the database closes (else each pass fails on a closed driver). */
const followerLoops: { stop?: () => Promise<void> }[] = [];
const send = (message: ServerMessage) => process.send!(message);

const { createServices } = (await import(fromRoot("services.ts"))) as typeof ServicesModule;
const { buildApp } = (await import(fromRoot("app.ts"))) as typeof AppModule;
const { loadConfig } = (await import(fromRoot("config.ts"))) as typeof ConfigModule;

const database = await benchDatabase(args.dialect, args.label);
const env: Record<string, string> = {
  DATABASE_URL: database.url,
  SECRETS_KEY: randomBytes(32).toString("hex"),
  ADMIN_TOKEN,
  LOG_LEVEL: "silent",
  WEBHOOK_RATE_LIMIT_MAX: "1000000000",
  RATE_LIMIT_MAX: "1000000000",
  // Pending invoices stay pending for the whole run, whatever loops a version runs.
  INVOICE_PAYMENT_WINDOW_MINUTES: "0",
};
const services = await createServices(loadConfig(env), { warmSandbox: true });
const plainTs = { storeId: null as string | null, runs: 0 };
substitutePlainTypeScript(services as unknown as { sandbox?: { run?: unknown } });
const app = await buildApp(services, { logger: false });
// The read API's answers as the server times them (from the request's start to its last byte handed to the
// socket), handed to the runner with its CPU: the part of a read's latency spent in this process, against
// what the client measured (which adds the connection and the client thread's own waits).
const readsServerMs: number[] = [];
app.addHook("onResponse", (request, reply, done) => {
  if (request.method === "GET" && request.url.startsWith("/api/service/") && reply.statusCode < 300) readsServerMs.push(reply.elapsedTime);
  done();
});

let stopping = false;
process.on("disconnect", () => void stop(0));
// How late the main thread's event loop ran since the runner last asked (a round's start and end): a stall
// there holds every request in flight, reads' pages included. A 10 ms timer, the least the measure adds to
// the server it measures.
const LOOP_TIMER_MS = 10;
const loopDelay = monitorEventLoopDelay({ resolution: LOOP_TIMER_MS });
loopDelay.enable();
/** The service's histogram of list pages by stage (storefront_read_page_seconds), or null in a version without it. */
async function pageStages(): Promise<PageStageBuckets | null> {
  // A version may predate the histogram, or the registry.
  const metric = (services as Partial<typeof services>).metrics?.registry.getSingleMetric("storefront_read_page_seconds");
  if (metric === undefined) return null;
  const out: PageStageBuckets = {};
  for (const v of (await (metric as Histogram<string>).get()).values) {
    if (v.metricName !== "storefront_read_page_seconds_bucket") continue;
    const { stage, le } = v.labels as { stage: string; le: number | string };
    (out[stage] ??= []).push([le === "+Inf" ? Infinity : Number(le), v.value]);
  }
  return out;
}

process.on("message", async (message: RunnerMessage) => {
  if (message.type === "cpu") {
    const usage = process.cpuUsage();
    const main = process.threadCpuUsage();
    const loopLateMs = loopLateness(loopDelay, LOOP_TIMER_MS);
    loopDelay.reset();
    send({ type: "cpu", id: message.id, micros: usage.user + usage.system, mainMicros: main.user + main.system, mainWaitMicros: threadWaitMicros(), threads: threadsCpu(), plainTsRuns: plainTs.runs, loopLateMs, readsServerMs: readsServerMs.splice(0), pageStages: await pageStages() });
  }
});

try {
  const injector = app as unknown as Injector;
  const built = await buildLayout(injector, database, root, env, {
    invoices: Number(args.invoices),
    stores: Number(args.stores),
    historyCustomers: Number(args["history-customers"]),
    historyInvoices: Number(args["history-invoices"]),
    readsCustomers: Number(args["reads-customers"]),
    plainTs: args["plain-ts"],
  });
  plainTs.storeId = built.plainTs;
  // After the bulk load: its own connection writes while it runs, and a projector beside it would wait on it.
  await startBackgroundWork(services);
  const settled = await settle(injector, Number(args["settle-timeout"]) * 1000);
  const { walkPages, ...layout } = built;
  layout.reads.pages = await walkPages();
  layout.setupSeconds.settle = settled.seconds;
  await app.listen({ port: 0, host: "127.0.0.1" });
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  const ready: Layout = { ...layout, port, postgresApplicationName: database.schema, sqliteFile: database.file, readModelGauges: settled.gauges };
  send({ type: "ready", layout: ready });
} catch (err) {
  send({ type: "failed", error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  await stop(1);
}

/** What `serve` starts beside the HTTP server (src/cli/serve.command.ts), as far as a benchmark needs it. */
async function startBackgroundWork(s: Awaited<ReturnType<typeof createServices>>): Promise<void> {
  s.dispatcher.start((err) => process.stderr.write(`dispatch error: ${String(err)}\n`));
  // What `serve` runs after commits (the read model's projector, the events' sequencer), where the version has it.
  // Where the version keeps it: src/followers.ts since the house layout, src/ops/followers.ts before.
  const followers = (await import(fromRoot("followers.ts")).catch(() => import(fromRoot("ops/followers.ts"))).catch(() => null)) as { startFollowers?: (services: unknown, log: { error(obj: unknown, msg: string): void }) => unknown } | null;
  const loops = followers?.startFollowers?.(s, { error: (obj, msg) => process.stderr.write(`${msg}: ${String((obj as { err?: unknown }).err)}\n`) });
  if (Array.isArray(loops)) followerLoops.push(...(loops as { stop?: () => Promise<void> }[]));
}


/**
 * --plain-ts: the plain-TypeScript store's runs go to plugin.ts's TypeScript version of the plugin instead
 * of the sandbox, on the same sandbox object the payment path calls, so everything around the run is the
 * same. If a version calls its sandbox some other way, the runs are not diverted and the runner says n/a.
 */
function substitutePlainTypeScript(s: { sandbox?: { run?: unknown } }): void {
  const sandbox = s.sandbox;
  if (!args["plain-ts"] || !sandbox || typeof sandbox.run !== "function") return;
  const inner = (sandbox.run as (input: RunInputLike, host: unknown) => Promise<unknown>).bind(sandbox);
  sandbox.run = (input: RunInputLike, host: unknown) => {
    if (plainTs.storeId === null || input.store?.id !== plainTs.storeId) return inner(input, host);
    plainTs.runs++;
    return Promise.resolve(plainTypeScriptRun(input));
  };
}

/**
 * Waits until the read model's backlog is 0 (a version with a projector), so that no case starts with
 * documents still being built from the setup. A version without the gauge is settled at once.
 */
async function settle(injector: Injector, timeoutMs: number): Promise<{ gauges: boolean; seconds: number }> {
  const started = performance.now();
  for (;;) {
    const gauges = parseReadModelGauges((await injector.inject({ method: "GET", url: "/metrics" })).body);
    if (gauges === null || gauges.backlog === 0) return { gauges: gauges !== null, seconds: Math.round((performance.now() - started) / 100) / 10 };
    if (performance.now() - started > timeoutMs) {
      throw new Error(`the read model's backlog is still ${gauges.backlog} after ${timeoutMs / 1000} s: is its projector running? Start it in startBackgroundWork() (bench/webhook/server.ts) as serve does`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function stop(code: number): Promise<void> {
  if (stopping) return;
  stopping = true;
  const force = setTimeout(() => process.exit(code), 15_000);
  force.unref();
  try {
    await app.close();
    await Promise.all(followerLoops.map((loop) => loop.stop?.()));
    await services.close();
  } finally {
    await database.drop().catch(() => {});
    process.exit(code);
  }
}
