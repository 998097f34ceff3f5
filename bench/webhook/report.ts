// From rounds to what the issue asks for: each case's medians per side, the ratios with their targets for
// this version and the baseline side by side, and the payments against the disk's own commit rate.
import type { CaseId } from "./cases.ts";
import { CASES } from "./cases.ts";
import type { DiskRates } from "./disk.ts";
import { percentile } from "./load.ts";
import type { RoundSample } from "./round.ts";

export type Side = "this" | "baseline";
/** samples[dialect][case][side]: one per counted round. */
export type Samples = Record<string, Partial<Record<CaseId, Partial<Record<Side, RoundSample[]>>>>>;

export interface Summary {
  rps: number;
  p50: number;
  p99: number;
  /**
   * The 99th percentile of every round's answers together (paced loads: the reads), or null. A round of
   * reads is 250 answers, whose p99 is its third slowest: the median of five such is noisier than one
   * percentile of all 1,250.
   */
  pooledP99: number | null;
  /** The same of the reads' answers as the server timed them (server.ts's hook), or null. */
  pooledServerP99: number | null;
  serverCpuUs: number;
  mainThreadCpuUs: number;
  mainThreadBusy: number;
  mainThreadWaiting: number | null;
  machineBusyCores: number | null;
  postgresCpuUs: number | null;
  postgresOwnCpuUs: number | null;
  /** Median over rounds of the server's write-ahead log bytes per request; null on SQLite (and in rounds recorded before it was measured). */
  postgresWalBytes: number | null;
  /** The same on SQLite, from the log's index (probes.ts, watchSqliteWal); null on PostgreSQL and in rounds recorded before it was measured. */
  sqliteWalBytes: number | null;
  /** Median over rounds; null when the server has no read model gauge ("n/a"). */
  catchUpMs: number | null;
  maxBacklog: number | null;
  maxLagSeconds: number | null;
  rounds: number[];
  non2xx: number;
  errors: number;
  cutShort: number;
}

export function median(xs: number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** A percentile of every round's latencies together, when every round kept them. */
function pooledPercentile(samples: RoundSample[], q: number, key: "latenciesMs" | "serverLatenciesMs" = "latenciesMs"): number | null {
  if (samples.length === 0 || samples.some((s) => s[key] === undefined)) return null;
  const all = samples.flatMap((s) => s[key]!).sort((a, b) => a - b);
  return all.length === 0 ? null : percentile(all, q);
}

const nonNull = (xs: (number | null | undefined)[]) => xs.filter((x): x is number => typeof x === "number");

export function summarize(samples: RoundSample[]): Summary {
  const catchUps = nonNull(samples.map((s) => s.catchUpMs));
  const backlogs = nonNull(samples.map((s) => s.maxBacklog));
  const lags = nonNull(samples.map((s) => s.maxLagSeconds));
  const pg = nonNull(samples.map((s) => s.postgresCpuUs));
  const pgOwn = nonNull(samples.map((s) => s.postgresOwnCpuUs));
  const wal = nonNull(samples.map((s) => s.postgresWalBytes));
  const sqliteWal = nonNull(samples.map((s) => s.sqliteWalBytes));
  return {
    rps: Math.round(median(samples.map((s) => s.rps))),
    // Latencies are kept to 0.1 ms; the median of an even number of rounds is a mean of two, rounded again.
    p50: round2(median(samples.map((s) => s.p50))),
    p99: round2(median(samples.map((s) => s.p99))),
    pooledP99: pooledPercentile(samples, 0.99),
    pooledServerP99: pooledPercentile(samples, 0.99, "serverLatenciesMs"),
    serverCpuUs: Math.round(median(samples.map((s) => s.serverCpuUs))),
    // Rounds recorded before these were measured have none: 0 and NaN, shown as n/a.
    mainThreadCpuUs: Math.round(median(nonNull(samples.map((s) => s.mainThreadCpuUs)))),
    mainThreadBusy: median(nonNull(samples.map((s) => s.mainThreadBusy))),
    mainThreadWaiting: nonNull(samples.map((s) => s.mainThreadWaiting)).length === 0 ? null : median(nonNull(samples.map((s) => s.mainThreadWaiting))),
    machineBusyCores: nonNull(samples.map((s) => s.machineBusyCores)).length === 0 ? null : round2(median(nonNull(samples.map((s) => s.machineBusyCores)))),
    postgresCpuUs: pg.length === 0 ? null : Math.round(median(pg)),
    postgresOwnCpuUs: pgOwn.length === 0 ? null : Math.round(median(pgOwn)),
    postgresWalBytes: wal.length === 0 ? null : Math.round(median(wal)),
    sqliteWalBytes: sqliteWal.length === 0 ? null : Math.round(median(sqliteWal)),
    catchUpMs: catchUps.length === 0 ? null : Math.round(median(catchUps)),
    maxBacklog: backlogs.length === 0 ? null : Math.max(...backlogs),
    maxLagSeconds: lags.length === 0 ? null : Math.max(...lags),
    rounds: samples.map((s) => s.rps),
    non2xx: samples.reduce((a, s) => a + s.non2xx, 0),
    errors: samples.reduce((a, s) => a + s.errors, 0),
    cutShort: samples.filter((s) => s.cutShort).length,
  };
}

export type Summaries = Record<string, Partial<Record<CaseId, Partial<Record<Side, Summary>>>>>;

export function summarizeAll(samples: Samples): Summaries {
  const out: Summaries = {};
  for (const [dialect, cases] of Object.entries(samples)) {
    out[dialect] = {};
    for (const [id, sides] of Object.entries(cases) as [CaseId, Partial<Record<Side, RoundSample[]>>][]) {
      out[dialect]![id] = {};
      for (const [side, list] of Object.entries(sides) as [Side, RoundSample[]][]) if (list.length > 0) out[dialect]![id]![side] = summarize(list);
    }
  }
  return out;
}

export interface Ratio {
  dialect: string;
  name: string;
  target: string;
  /** Per side: the ratio, or null when a side lacks what it needs ("n/a"). */
  values: Partial<Record<Side, number | null>>;
  /** How the ratio was formed, both sides' inputs. */
  detail: Partial<Record<Side, string>>;
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/** Every ratio the issue names, per database, for each side. */
export function ratios(summaries: Summaries, disk: DiskRates | null): Ratio[] {
  const out: Ratio[] = [];
  for (const [dialect, cases] of Object.entries(summaries)) {
    const add = (name: string, target: string, f: (side: Side) => [number, number, string] | null) => {
      const r: Ratio = { dialect, name, target, values: {}, detail: {} };
      for (const side of ["this", "baseline"] as Side[]) {
        if (!Object.values(cases).some((bySide) => bySide?.[side])) continue;
        const parts = f(side);
        r.values[side] = parts === null || !(parts[1] > 0) ? null : round2(parts[0] / parts[1]);
        r.detail[side] = parts === null ? "n/a" : parts[2];
      }
      out.push(r);
    };
    const s = (id: CaseId, side: Side) => cases[id]?.[side];
    type Get = (x: Summary) => number;
    const pair = (a: Summary | undefined, b: Summary | undefined, get: Get, unit: string): [number, number, string] | null =>
      a && b && Number.isFinite(get(a)) && Number.isFinite(get(b)) ? [get(a), get(b), `${get(a)} / ${get(b)}${unit}`] : null;
    const rps: Get = (x) => x.rps;
    // CPU per payment: the server's, and on PostgreSQL its own backends' beside it (steadier than every
    // postgres process, which counts other engineers' databases too).
    const cpu: Get = (x) => x.serverCpuUs + (x.postgresOwnCpuUs ?? 0);
    const cpuName = dialect === "postgres" ? "CPU per payment (server + its PostgreSQL backends)" : "server CPU per payment";
    add("pushInvoice / ignore, deliveries/s", "≥ 0.5", (side) => pair(s("push", side), s("ignore", side), rps, "/s"));
    add("pushInvoice p99 / ignore p99", "≤ 2", (side) => pair(s("push", side), s("ignore", side), (x) => x.p99, " ms"));
    add("one store / spread over the stores, deliveries/s", "≥ 0.8", (side) => pair(s("push", side), s("push-stores", side), rps, "/s"));
    add("long-history customers / 5-invoice customers, deliveries/s", "≥ 0.67", (side) => pair(s("push-history", side), s("push", side), rps, "/s"));
    add(`long-history / 5-invoice customers, ${cpuName}`, "≤ 1.5", (side) => pair(s("push-history", side), s("push", side), cpu, " µs"));
    add("reads p50 during the burst / alone", "≤ 1.5", (side) => pair(s("reads-burst", side), s("reads-alone", side), (x) => x.p50, " ms"));
    // The target on every round's reads pooled (steadier); the median of the rounds' p99s beside it, as before.
    const pooledP99: Get = (x) => x.pooledP99 ?? NaN;
    add("reads p99 during the burst / alone, every round's reads pooled", "≤ 1.5", (side) => pair(s("reads-burst", side), s("reads-alone", side), pooledP99, " ms"));
    add("reads p99 during the burst / alone, median of the rounds' p99s", "info", (side) => pair(s("reads-burst", side), s("reads-alone", side), (x) => x.p99, " ms"));
    add("reads/s during the burst / alone", "≈ 1 (fixed rate)", (side) => pair(s("reads-burst", side), s("reads-alone", side), rps, "/s"));
    // Where the burst's effect on the reads comes from: any webhook stream at that rate (ignored deliveries: HTTP,
    // the sandbox's run, the delivery's record), and what the payments' own work adds to it.
    add("reads p99 during an ignore burst / alone, pooled", "info", (side) => pair(s("reads-webhooks", side), s("reads-alone", side), pooledP99, " ms"));
    add("reads p99 during the pushInvoice burst / during an ignore burst, pooled", "info", (side) => pair(s("reads-burst", side), s("reads-webhooks", side), pooledP99, " ms"));
    // The same reads as the server timed them: what of the burst's effect is this process's (its threads'
    // work and their waits for a core), and what the connection and the client's thread add.
    const serverP99: Get = (x) => x.pooledServerP99 ?? NaN;
    add("reads p99 as the server timed them, during the burst / alone, pooled", "info", (side) => pair(s("reads-burst", side), s("reads-alone", side), serverP99, " ms"));
    add("ignore, sandboxed Lua / plain TypeScript, deliveries/s", "≥ 0.5", (side) => pair(s("ignore", side), s("ignore-ts", side), rps, "/s"));
    const limit = dialect === "sqlite" ? disk?.sqliteFull : disk?.postgres32;
    add(`pushInvoice / the disk's commits (${dialect === "sqlite" ? "SQLite FULL" : "PostgreSQL, 32 clients"})`, "info", (side) => {
      const push = s("push", side);
      return push && limit ? [push.rps, limit, `${push.rps} / ${limit}/s`] : null;
    });
  }
  return out.filter((r) => Object.values(r.detail).some((d) => d !== "n/a"));
}

const cell = (x: number | null | undefined, unit = "") => (x === null || x === undefined || Number.isNaN(x) ? "n/a" : `${x}${unit}`);

export function markdown(summaries: Summaries, rs: Ratio[], disk: DiskRates | null, sides: Side[]): string {
  const lines: string[] = [];
  lines.push("| database | case | side | deliveries/s | p50 ms | p99 ms | server CPU µs/req (main thread's, busy + waiting for a core) | machine cores busy | PostgreSQL CPU µs/req: own backends (all) | WAL bytes/req (PostgreSQL: the server's; SQLite: from the log's index) | catch-up ms (max backlog) | rounds (/s) | non-2xx |");
  lines.push("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|");
  for (const [dialect, cases] of Object.entries(summaries)) {
    for (const [id, bySide] of Object.entries(cases) as [CaseId, Partial<Record<Side, Summary>>][]) {
      for (const side of sides) {
        const r = bySide[side];
        if (!r) continue;
        const pays = id.startsWith("push") || id === "burst";
        const catchUp = pays ? `${cell(r.catchUpMs)}${r.maxBacklog === null ? "" : ` (${r.maxBacklog})`}` : "";
        const flags = r.cutShort > 0 ? ` (${r.cutShort} cut short)` : "";
        const waiting = r.mainThreadWaiting === null ? "" : ` + ${Math.round(r.mainThreadWaiting * 100)} % waiting`;
        const main = Number.isNaN(r.mainThreadBusy) ? "" : ` (${r.mainThreadCpuUs}, ${Math.round(r.mainThreadBusy * 100)} %${waiting})`;
        lines.push(`| ${dialect} | ${CASES[id]} | ${side} | ${r.rps} | ${r.p50} | ${r.p99} | ${r.serverCpuUs}${main} | ${cell(r.machineBusyCores)} | ${r.postgresCpuUs === null ? "n/a" : `${cell(r.postgresOwnCpuUs)} (${r.postgresCpuUs})`} | ${cell(r.postgresWalBytes ?? r.sqliteWalBytes)} | ${catchUp} | ${r.rounds.join(", ")}${flags} | ${r.non2xx + r.errors} |`);
      }
    }
  }
  lines.push("", `| database | ratio | target | ${sides.join(" | ")} |`, `|---|---|---|${sides.map(() => "---|").join("")}`);
  for (const r of rs) lines.push(`| ${r.dialect} | ${r.name} | ${r.target} | ${sides.map((side) => (r.values[side] === undefined ? "" : `**${cell(r.values[side], "×")}** (${r.detail[side]})`)).join(" | ")} |`);
  for (const [dialect, cases] of Object.entries(summaries)) {
    lines.push("", `Read model catch-up after the burst's last payment (${dialect}, target < 1,000 ms): ${sides.map((side) => `${side} ${cell(cases.burst?.[side]?.catchUpMs ?? null, " ms")}`).join(", ")}`);
  }
  if (disk) lines.push("", `The disk (${disk.seconds} s each): SQLite synchronous = FULL ${cell(disk.sqliteFull, " commits/s")}; PostgreSQL synchronous_commit = on ${cell(disk.postgres1, "/s")} from 1 client, ${cell(disk.postgres32, "/s")} from 32.`);
  return lines.join("\n");
}
