// One round of one case against one server: the load, the server's and PostgreSQL's CPU around it (and the
// server's main thread's, and the machine's), the read model's gauges while it runs, and after a payment load
// the time until the read model has caught up.
import type { ChildProcess } from "node:child_process";
import type pg from "pg";
import type { RoundPlan, Stream } from "./cases.ts";
import { drive, type LoadResult, pace } from "./load.ts";
import { performance } from "node:perf_hooks";
import { catchUp, machineCpu, postgresCpu, postgresCpuSpent, serverCpu, watchReadModel, watchSqliteWal } from "./probes.ts";
import { type Layout, stagesP99Ms } from "./protocol.ts";

export interface Server {
  child: ChildProcess;
  layout: Layout;
}

export interface RoundSample {
  rps: number;
  p50: number;
  p99: number;
  answered: number;
  non2xx: number;
  errors: number;
  seconds: number;
  cutShort: boolean;
  /** Server process CPU per answered request (both streams of a mixed round), µs. */
  serverCpuUs: number;
  /** The server's main thread's share of it, µs per answered request. */
  mainThreadCpuUs: number;
  /** How busy the main thread was over the round (its CPU / the round's time, 0–1). */
  mainThreadBusy: number;
  /** How long it waited for a core over the round (0–1; null without schedstat): busy + waiting near 1, it is the limit. */
  mainThreadWaiting: number | null;
  /** Cores the whole machine kept busy over the round (every process); null without /proc/stat. */
  machineBusyCores: number | null;
  /** The server's CPU by thread name, µs per answered request (/proc's 10 ms ticks: rough for a thread that ran little). */
  threadCpuUs: Record<string, number>;
  /** CPU of every `postgres` process per answered request, µs (PostgreSQL rounds only). */
  postgresCpuUs: number | null;
  /** CPU of the server's own PostgreSQL backends per answered request, µs. */
  postgresOwnCpuUs: number | null;
  /** Bytes of write-ahead log the PostgreSQL server wrote per answered request (the whole server's: other databases' writes count too). */
  postgresWalBytes: number | null;
  /** Bytes of write-ahead log the SQLite server wrote per answered request (frames sampled from its index: a slight undercount). */
  sqliteWalBytes?: number | null;
  /** After a payment load: ms from its last answer until the read model's backlog was 0 (null: no gauge). */
  catchUpMs?: number | null;
  maxBacklog?: number | null;
  maxLagSeconds?: number | null;
  /** Paced loads (the reads): every answer's latency, ms; kept out of latest.json. */
  latenciesMs?: number[];
  /** How late the server's main event loop ran over the round and its catch-up, ms (p99 and worst; 10 ms timer). */
  serverLoopLateMs?: { p99: number; max: number };
  /** Paced loads (the reads): every answer's time as the server measured it, ms, sorted; kept out of latest.json. */
  serverLatenciesMs?: number[];
  /** Read rounds: the p99 of each stage of the server's list pages (storefront_read_page_seconds), ms; absent in a version without it. */
  pageStagesP99Ms?: Record<string, number>;
  /** Paced loads: how late the sending thread's own event loop ran, ms (p99 and worst over the round). */
  clientDelayMs?: { p99: number; max: number };
}

export interface RoundOptions {
  seconds: number;
  /** A connection to look up the server's backends with, on PostgreSQL. */
  postgres: pg.Client | null;
  catchUpTimeoutMs: number;
}

const load = (server: Server, stream: Stream, seconds: number): Promise<LoadResult> =>
  stream.rate === undefined
    ? drive({ port: server.layout.port, connections: stream.connections, seconds, next: stream.next, ...(stream.amount === undefined ? {} : { amount: stream.amount }) })
    : pace({ port: server.layout.port, connections: stream.connections, seconds, next: stream.next, rate: stream.rate });

/** The server's write-ahead log position in bytes (PostgreSQL rounds only). */
async function walPosition(client: pg.Client | null, applicationName: string | null): Promise<bigint | null> {
  if (client === null || applicationName === null) return null;
  const { rows } = await client.query<{ at: string }>("select (pg_current_wal_lsn() - '0/0'::pg_lsn)::text as at");
  return BigInt(rows[0]!.at.split(".")[0]!);
}

/** Runs the plan; the payments' and the reads' samples (each only when the plan has that stream). */
export async function runRound(server: Server, plan: RoundPlan, options: RoundOptions): Promise<{ payments?: RoundSample; reads?: RoundSample }> {
  const cpu0 = await serverCpu(server.child);
  const machine0 = machineCpu();
  const wall0 = performance.now();
  const pgName = server.layout.postgresApplicationName;
  const pgCpu = () => (options.postgres && pgName !== null ? postgresCpu(options.postgres, pgName) : Promise.resolve(null));
  const pg0 = await pgCpu();
  const wal0 = await walPosition(options.postgres, pgName);
  // A version of this script before the field: undefined, no SQLite figure.
  const sqliteWal = server.layout.sqliteFile ? watchSqliteWal(server.layout.sqliteFile) : null;
  const pays = plan.payments?.pays === true && server.layout.readModelGauges;
  const watcher = pays ? watchReadModel(server.layout.port) : null;
  const [paid, read] = await Promise.all([
    plan.payments ? load(server, plan.payments, options.seconds) : Promise.resolve(null),
    plan.reads ? load(server, plan.reads, options.seconds) : Promise.resolve(null),
  ]);
  const gauges = watcher ? await watcher.stop() : null;
  // The read model's catch-up is part of what the payments cost: CPU is read after it.
  const caughtUpMs = paid && pays ? await catchUp(server.layout.port, paid.lastAnswerAt, options.catchUpTimeoutMs) : null;
  const sqliteWalBytes = sqliteWal?.stop() ?? null;
  const cpu1 = await serverCpu(server.child);
  const machine1 = machineCpu();
  const wallUs = (performance.now() - wall0) * 1000;
  const pg1 = await pgCpu();
  const wal1 = await walPosition(options.postgres, pgName);
  const pgSpent = pg0 && pg1 ? postgresCpuSpent(pg0, pg1) : null;
  const answered = (paid?.answered ?? 0) + (read?.answered ?? 0);
  const perRequest = (micros: number) => (answered > 0 ? Math.round(micros / answered) : 0);
  const base = (r: LoadResult): RoundSample => ({
    rps: Math.round(r.rps),
    p50: r.p50,
    p99: r.p99,
    answered: r.answered,
    non2xx: r.non2xx,
    errors: r.errors,
    seconds: r.seconds,
    cutShort: r.cutShort,
    serverCpuUs: perRequest(cpu1.micros - cpu0.micros),
    mainThreadCpuUs: perRequest(cpu1.mainMicros - cpu0.mainMicros),
    mainThreadBusy: Math.round(((cpu1.mainMicros - cpu0.mainMicros) / wallUs) * 100) / 100,
    mainThreadWaiting: cpu0.mainWaitMicros === null || cpu1.mainWaitMicros === null ? null : Math.round(((cpu1.mainWaitMicros - cpu0.mainWaitMicros) / wallUs) * 100) / 100,
    threadCpuUs: Object.fromEntries(Object.entries(cpu1.threads).map(([name, micros]) => [name, perRequest(micros - (cpu0.threads[name] ?? 0))]).filter(([, us]) => (us as number) > 0)),
    machineBusyCores: machine0 && machine1 ? Math.round(((machine1.busy - machine0.busy) / wallUs) * 100) / 100 : null,
    postgresCpuUs: pgSpent === null ? null : perRequest(pgSpent.all),
    postgresOwnCpuUs: pgSpent === null ? null : perRequest(pgSpent.own),
    postgresWalBytes: wal0 === null || wal1 === null ? null : perRequest(Number(wal1 - wal0)),
    sqliteWalBytes: sqliteWalBytes === null ? null : perRequest(sqliteWalBytes),
    ...(r.latenciesMs === undefined ? {} : { latenciesMs: r.latenciesMs }),
    ...(r.clientDelayMs === undefined ? {} : { clientDelayMs: r.clientDelayMs }),
    serverLoopLateMs: cpu1.loopLateMs,
  });
  const out: { payments?: RoundSample; reads?: RoundSample } = {};
  if (paid) out.payments = plan.payments?.pays ? { ...base(paid), catchUpMs: caughtUpMs, maxBacklog: gauges?.maxBacklog ?? null, maxLagSeconds: gauges?.maxLagSeconds ?? null } : base(paid);
  // None when the server's hook saw no read (a round without reads).
  const serverTimed = cpu1.readsServerMs.sort((a, b) => a - b);
  const stages = stagesP99Ms(cpu0.pageStages, cpu1.pageStages);
  if (read) out.reads = { ...base(read), ...(serverTimed.length === 0 ? {} : { serverLatenciesMs: serverTimed }), ...(stages === null ? {} : { pageStagesP99Ms: stages }) };
  return out;
}
