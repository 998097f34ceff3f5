// Webhook benchmark (issues 4, 11 and 27): the real app of a checkout in its own process per database, the
// Stripe-style Lua plugin in the sandbox, every delivery signed; autocannon here. With --baseline DIR
// (another checkout, with its node_modules) the same cases run on that version side by side: rounds
// interleave the two sides (their order swapped each round) so that the machine's moods hit both, and
// every figure is a median of rounds. The cases (cases.ts, layout.ts):
//   ignore            deliveries the plugin answers `ignore` (verified, recorded, nothing applied)
//   push              pushInvoice on distinct pending invoices of one store, customers with 5 invoices each
//   push-stores       the same spread round-robin over --stores stores, each with its own plugin installation
//   push-history      pushInvoice for customers with --history-invoices invoices each
//   reads-alone       list reads (invoices and customers pages, API key) at a fixed rate
//   reads-burst       the same reads while a pushInvoice burst runs on the same store, at full rate or at
//                     --burst-rate payments per second
//   reads-webhooks    the same reads while deliveries the plugin ignores go to that store at the burst's rate:
//                     what any webhook stream does to the reads, beside what the payments' own work adds
//   ignore-ts         (--plain-ts) `ignore` with the plugin in plain TypeScript instead of the sandbox
// Beside each: server CPU and PostgreSQL CPU per request, and after payments the read model's catch-up
// (new code's storefront_readmodel_backlog gauge; "n/a" without it). The disk's own commit rate (disk.ts)
// is measured first. Results: results/latest.json and a markdown table on stdout; progress on stderr.
//   node bench/webhook/run.ts [--rounds 5] [--duration 5] [--read-duration 10] [--baseline DIR] [--dialects sqlite,postgres] …
//   The read cases' rounds last --read-duration: their target is a p99, which 250 reads a round (5 s at
//   50/s) left to the dozen slowest of a run.
//   A database whose servers fail (one that does not settle within --settle-timeout s, say) is reported as
//   not measured beside the others, and the run exits 1.
import { type ChildProcess, execFileSync, fork } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import pg from "pg";
import { PG } from "../lib/bench-database.ts";
import { CASES, type CaseId, isReadCase, planRound, ROUND_ORDER, type PlanSettings } from "./cases.ts";
import { type DiskRates, measureDisk } from "./disk.ts";
import { percentile } from "./load.ts";
import { serverCpu } from "./probes.ts";
import type { ServerMessage } from "./protocol.ts";
import { markdown, ratios, type Samples, type Side, summarizeAll } from "./report.ts";
import { type RoundSample, runRound, type Server } from "./round.ts";

const HERE = import.meta.dirname;
const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "5" },
    duration: { type: "string", default: "5" },
    "read-duration": { type: "string", default: "10" },
    connections: { type: "string", default: "32" },
    dialects: { type: "string", default: "sqlite,postgres" },
    root: { type: "string", default: path.resolve(HERE, "..", "..") },
    baseline: { type: "string" },
    cases: { type: "string" },
    invoices: { type: "string", default: "100000" },
    stores: { type: "string", default: "32" },
    "history-customers": { type: "string", default: "32" },
    "history-invoices": { type: "string", default: "5000" },
    "reads-customers": { type: "string", default: "1000" },
    "read-rate": { type: "string", default: "50" },
    "burst-rate": { type: "string", default: "0" },
    "read-connections": { type: "string", default: "8" },
    "plain-ts": { type: "boolean", default: false },
    "disk-seconds": { type: "string", default: "3" },
    "catchup-timeout": { type: "string", default: "30" },
    "settle-timeout": { type: "string", default: "600" },
  },
});
const rounds = Number(args.rounds);
const duration = Number(args.duration);
const readDuration = Number(args["read-duration"]);
const dialects = args.dialects.split(",").filter(Boolean);
const roots: Partial<Record<Side, string>> = { this: path.resolve(args.root), ...(args.baseline ? { baseline: path.resolve(args.baseline) } : {}) };
const sides = Object.keys(roots) as Side[];
const wanted = new Set<CaseId>(args.cases ? (args.cases.split(",") as CaseId[]) : ROUND_ORDER.filter((id) => id !== "ignore-ts" || args["plain-ts"]));
for (const id of wanted) if (!(id in CASES)) throw new Error(`unknown case ${id}; one of ${ROUND_ORDER.join(", ")}`);
const settings: PlanSettings = { rounds, connections: Number(args.connections), readRate: Number(args["read-rate"]), readConnections: Number(args["read-connections"]), burstRate: Number(args["burst-rate"]) };

mkdirSync(path.join(HERE, "results"), { recursive: true });
const logFile = path.join(HERE, "results", "log.txt");
writeFileSync(logFile, "");
const log = (line: string) => {
  const text = `${new Date().toISOString().slice(11, 19)} ${line}\n`;
  process.stderr.write(text);
  writeFileSync(logFile, text, { flag: "a" });
};

const started = new Date();
const machine = describeMachine();
log(`${machine.cpu}, ${machine.cores} cores, node ${machine.node}, load ${machine.loadAverage.join(" ")}; sides: ${sides.map((s) => `${s} ${roots[s]} (${revision(roots[s]!)})`).join(", ")}`);
let disk: DiskRates | null = null;
if (Number(args["disk-seconds"]) > 0) {
  disk = await measureDisk(Number(args["disk-seconds"]), dialects);
  log(`disk: SQLite FULL ${disk.sqliteFull ?? "-"} commits/s; PostgreSQL ${disk.postgres1 ?? "-"}/s from 1 client, ${disk.postgres32 ?? "-"}/s from 32`);
}

const samples: Samples = {};
// The runner's own connection, to find each server's backends in pg_stat_activity.
const postgres = dialects.includes("postgres") ? new pg.Client({ connectionString: PG }) : null;
await postgres?.connect();
const live = new Set<ChildProcess>();
process.on("SIGINT", () => {
  for (const child of live) child.disconnect(); // each server drops its database on the way out
  setTimeout(() => process.exit(130), 2_000);
});
const setup: Record<string, Partial<Record<Side, Record<string, number>>>> = {};
/** Databases whose run failed, with why: the others' figures are still reported. */
const failed: Record<string, string> = {};
for (const dialect of dialects) {
  log(`${dialect}: starting ${sides.join(" and ")} (building the data)`);
  const starting = await Promise.allSettled(sides.map(async (side) => [side, await startServer(side, dialect)] as const));
  const up = starting.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  const servers = Object.fromEntries(up) as Record<Side, Server>;
  try {
    const refused = starting.find((r) => r.status === "rejected");
    if (refused !== undefined) throw (refused as PromiseRejectedResult).reason;
    setup[dialect] = Object.fromEntries(sides.map((side) => [side, servers[side].layout.setupSeconds]));
    for (const side of sides) log(`${dialect} ${side}: ready, set up in ${JSON.stringify(servers[side].layout.setupSeconds)} s; read model gauges: ${servers[side].layout.readModelGauges ? "yes" : "no"}`);
    samples[dialect] = await measureDialect(dialect, servers);
    if (wanted.has("ignore-ts")) await checkPlainTs(dialect, servers);
  } catch (err) {
    // Reported at the end beside the databases that finished, whose figures are not lost with it.
    failed[dialect] = err instanceof Error ? err.message : String(err);
    log(`${dialect}: FAILED: ${failed[dialect]}`);
  } finally {
    await Promise.all(up.map(([, server]) => stopServer(server.child)));
  }
}

await postgres?.end();
const summaries = summarizeAll(samples);
const rs = ratios(summaries, disk);
const report = {
  date: started.toISOString(),
  finished: new Date().toISOString(),
  machine: { ...machine, loadAverageAtEnd: os.loadavg().map((x) => Math.round(x * 100) / 100) },
  sides: Object.fromEntries(sides.map((side) => [side, { root: roots[side], revision: revision(roots[side]!) }])),
  settings: { ...settings, duration, readDuration, dialects, cases: [...wanted], invoices: Number(args.invoices), stores: Number(args.stores), historyCustomers: Number(args["history-customers"]), historyInvoices: Number(args["history-invoices"]), readsCustomers: Number(args["reads-customers"]) },
  setupSeconds: setup,
  failed,
  disk,
  summaries,
  ratios: rs,
  samples,
};
// Each answer's latency stays out: the summaries hold what the report computed from them.
writeFileSync(path.join(HERE, "results", "latest.json"), JSON.stringify(report, (key, value: unknown) => (key === "latenciesMs" || key === "serverLatenciesMs" ? undefined : value), 2) + "\n");
console.log(markdown(summaries, rs, disk, sides));
for (const [dialect, why] of Object.entries(failed)) console.log(`\n**${dialect}: not measured**: ${why}`);
if (Object.keys(failed).length > 0) process.exitCode = 1;

/** A warm-up round (not counted), then the counted rounds: each case on every side before the next case. */
async function measureDialect(dialect: string, servers: Record<Side, Server>): Promise<Samples[string]> {
  const out: Samples[string] = {};
  const record = (id: CaseId, side: Side, sample: RoundSample) => {
    ((out[id] ??= {})[side] ??= []).push(sample);
  };
  for (let round = 0; round <= rounds; round++) {
    const order = round % 2 === 0 ? sides : [...sides].reverse();
    for (const id of ROUND_ORDER.filter((c) => wanted.has(c))) {
      const full = isReadCase(id) ? readDuration : duration;
      const seconds = round === 0 ? Math.min(2, full) : full;
      for (const side of order) {
        const plan = planRound(id, servers[side].layout, round, settings);
        if (plan === null) continue;
        const result = await runRound(servers[side], plan, { seconds, postgres: dialect === "postgres" ? postgres : null, catchUpTimeoutMs: Number(args["catchup-timeout"]) * 1000 });
        const label = round === 0 ? "warm-up" : `round ${round}`;
        const main = isReadCase(id) ? result.reads : result.payments;
        if (main) log(`${dialect} ${side} ${id} ${label}: ${main.rps}/s p50 ${main.p50} p99 ${main.p99} ms, cpu ${main.serverCpuUs} (main thread ${main.mainThreadCpuUs}, busy ${Math.round(main.mainThreadBusy * 100)} %${main.mainThreadWaiting === null ? "" : ` + waiting ${Math.round(main.mainThreadWaiting * 100)} %`}; machine ${main.machineBusyCores ?? "n/a"} cores)${main.postgresCpuUs === null ? "" : ` + pg ${main.postgresOwnCpuUs} (all ${main.postgresCpuUs})`} µs/req${(main.postgresWalBytes ?? main.sqliteWalBytes ?? null) === null ? "" : `, WAL ${main.postgresWalBytes ?? main.sqliteWalBytes} B/req`}, non2xx ${main.non2xx + main.errors}${main.serverLatenciesMs ? `, as the server timed them p50 ${percentile(main.serverLatenciesMs, 0.5)} p99 ${percentile(main.serverLatenciesMs, 0.99)} ms` : ""}${main.pageStagesP99Ms ? `, page stages p99 ${Object.entries(main.pageStagesP99Ms).map(([stage, ms]) => `${stage} ${ms}`).join(" ")} ms` : ""}${main.serverLoopLateMs ? `, server loop late p99 ${main.serverLoopLateMs.p99} max ${main.serverLoopLateMs.max} ms` : ""}${main.clientDelayMs ? `, client loop late p99 ${main.clientDelayMs.p99} max ${main.clientDelayMs.max} ms` : ""}${main.cutShort ? " (ran out of invoices: cut short)" : ""}${main.catchUpMs !== undefined ? `, catch-up ${main.catchUpMs ?? "n/a"} ms` : ""}; by thread µs/req: ${topThreads(main.threadCpuUs)}`);
        if (id === "reads-burst" && result.payments) log(`${dialect} ${side} burst ${label}: ${result.payments.rps}/s p99 ${result.payments.p99} ms, catch-up ${result.payments.catchUpMs ?? "n/a"} ms`);
        if (id === "reads-webhooks" && result.payments) log(`${dialect} ${side} ignore burst ${label}: ${result.payments.rps}/s p99 ${result.payments.p99} ms, non2xx ${result.payments.non2xx + result.payments.errors}`);
        if (round === 0) continue;
        if (main) record(id, side, main);
        if (id === "reads-burst" && result.payments) record("burst", side, result.payments);
      }
    }
  }
  return out;
}

/** The threads that cost the most a request, "name µs" each. */
function topThreads(threads: Record<string, number>): string {
  return Object.entries(threads)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 6)
    .map(([name, us]) => `${name} ${us}`)
    .join(", ");
}

function startServer(side: Side, dialect: string): Promise<Server> {
  const child = fork(
    path.join(HERE, "server.ts"),
    [
      ...["--root", roots[side]!, "--dialect", dialect, "--label", side === "this" ? "wh" : "whb"],
      ...["--invoices", args.invoices, "--stores", args.stores, "--history-customers", args["history-customers"], "--history-invoices", args["history-invoices"]],
      ...["--reads-customers", args["reads-customers"], "--settle-timeout", args["settle-timeout"], ...(wanted.has("ignore-ts") ? ["--plain-ts"] : [])],
    ],
    { stdio: ["ignore", "inherit", "inherit", "ipc"] },
  );
  live.add(child);
  return new Promise((resolve, reject) => {
    child.once("message", (message: ServerMessage) => {
      if (message.type === "ready") resolve({ child, layout: message.layout });
      else reject(new Error(`${side} ${dialect} server: ${message.type === "failed" ? message.error : message.type}`));
    });
    child.once("exit", (code) => reject(new Error(`${side} ${dialect} server exited (${code}) before it was ready`)));
  });
}

async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || !child.connected) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.disconnect();
  await exited;
  live.delete(child);
}

/** The plain-TypeScript case only means something if its runs were diverted from the sandbox. */
async function checkPlainTs(dialect: string, servers: Record<Side, Server>): Promise<void> {
  for (const side of sides) {
    const { plainTsRuns } = await serverCpu(servers[side].child);
    if (plainTsRuns > 0) continue;
    log(`WARNING ${dialect} ${side}: no run went to the plain-TypeScript plugin (this version calls its sandbox otherwise): ignore-ts is n/a`);
    delete samples[dialect]?.["ignore-ts"]?.[side];
  }
}

function describeMachine() {
  const cpuinfo = (() => {
    try {
      return readFileSync("/proc/cpuinfo", "utf8");
    } catch {
      return "";
    }
  })();
  const model = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1] ?? os.cpus()[0]?.model ?? "unknown CPU";
  return {
    cpu: model.trim(),
    cores: os.availableParallelism(),
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    kernel: os.release(),
    node: process.version,
    loadAverage: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
}

function revision(root: string): string {
  try {
    const head = execFileSync("git", ["-C", root, "rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
    // The results this script writes (its log, latest.json) are not changes to the code measured.
    const dirty = execFileSync("git", ["-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench/*/results/*"], { encoding: "utf8" }).trim() !== "";
    return dirty ? `${head}+changes` : head;
  } catch {
    return "unknown";
  }
}
