// What the runner reads beside the load: a server's CPU (asked over IPC: process.cpuUsage of the server
// process, its worker threads included, and its main thread's alone), PostgreSQL's CPU (/proc: every
// process named `postgres`, and the server's own backends), the machine's busy CPU (/proc/stat), and the
// read model's gauges from the server's /metrics.
import type { ChildProcess } from "node:child_process";
import { closeSync, openSync, readdirSync, readFileSync, readSync } from "node:fs";
import { endianness } from "node:os";
import type pg from "pg";
import { parseReadModelGauges, type ReadModelGauges, type ServerMessage } from "./protocol.ts";

let nextId = 0;

/** The server's CPU time so far (µs; its main thread's alone too), and how many runs went to the plain-TypeScript plugin. */
export function serverCpu(child: ChildProcess): Promise<Extract<ServerMessage, { type: "cpu" }>> {
  const id = ++nextId;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.off("message", onMessage);
      reject(new Error("the server did not report its CPU within 10 s"));
    }, 10_000);
    const onMessage = (message: ServerMessage) => {
      if (message.type !== "cpu" || message.id !== id) return;
      clearTimeout(timer);
      child.off("message", onMessage);
      resolve(message);
    };
    child.on("message", onMessage);
    child.send({ type: "cpu", id });
  });
}

/** Clock ticks per second of /proc's utime and stime (USER_HZ: 100 on Linux, whatever the kernel's HZ). */
const USER_HZ = 100;

/**
 * A /proc …/stat line's name and CPU time (utime + stime, fields 14 and 15, µs). "pid (comm) state ...":
 * comm may hold spaces, so fields are counted after its closing parenthesis.
 */
function parseStat(stat: string): { name: string; cpuMicros: number } {
  const close = stat.lastIndexOf(")");
  const fields = stat.slice(close + 2).split(" ");
  return { name: stat.slice(stat.indexOf("(") + 1, close), cpuMicros: ((Number(fields[11]) + Number(fields[12])) / USER_HZ) * 1e6 };
}

/**
 * The calling thread's time so far runnable but not running, waiting for a core (µs): schedstat's second
 * field (Linux with scheduler statistics); null elsewhere. Busy plus waiting near 100 % of a round: the
 * thread always had work, it is the limit.
 */
export function threadWaitMicros(): number | null {
  try {
    const waitNs = Number(readFileSync("/proc/thread-self/schedstat", "latin1").split(" ")[1]);
    return Number.isFinite(waitNs) ? waitNs / 1000 : null;
  } catch {
    return null;
  }
}

/**
 * This process's CPU time so far (µs) by thread name (threads of one name summed: the sandbox's, the
 * readers', V8's helpers), from /proc/self/task; empty where /proc is not there. Names are the kernel's,
 * cut to 15 characters ("storefront-sand" is the sandbox's workers).
 */
export function threadsCpu(): Record<string, number> {
  const out: Record<string, number> = {};
  let tasks: string[];
  try {
    tasks = readdirSync("/proc/self/task");
  } catch {
    return out;
  }
  for (const task of tasks) {
    try {
      const stat = readFileSync(`/proc/self/task/${task}/stat`, "latin1");
      const { name, cpuMicros } = parseStat(stat);
      out[name] = (out[name] ?? 0) + cpuMicros;
    } catch {
      // the thread ended while we looked
    }
  }
  return out;
}

/**
 * The machine's CPU time so far (µs), busy (every process: the load, the servers, PostgreSQL, the rest) and
 * in all, from /proc/stat's first line (user nice system idle iowait irq softirq steal …); null without it.
 */
export function machineCpu(): { busy: number; all: number } | null {
  let line: string;
  try {
    line = readFileSync("/proc/stat", "latin1").split("\n", 1)[0]!;
  } catch {
    return null;
  }
  const ticks = line.trim().split(/\s+/).slice(1, 9).map(Number);
  if (ticks.length < 8 || ticks.some((t) => !Number.isFinite(t))) return null;
  const all = ticks.reduce((a, t) => a + t, 0);
  const idle = ticks[3]! + ticks[4]!;
  return { busy: ((all - idle) / USER_HZ) * 1e6, all: (all / USER_HZ) * 1e6 };
}

/** utime + stime (µs) of every process named `postgres`, by pid; null where /proc is not there. */
function postgresProcesses(): Map<number, number> | null {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return null;
  }
  const out = new Map<number, number>();
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "latin1");
    } catch {
      continue; // ended while we looked
    }
    const { name, cpuMicros } = parseStat(stat);
    if (name === "postgres") out.set(Number(entry), cpuMicros);
  }
  return out;
}

export interface PostgresCpu {
  /** Every `postgres` process, by pid. */
  all: Map<number, number>;
  /** This server's backends (its application_name), by pid. */
  own: Map<number, number>;
}

/**
 * PostgreSQL's CPU so far. Every `postgres` process is what the issue asks for, but it also counts other
 * engineers' databases on this machine; the server's own backends (found by the application_name its
 * connections carry, bench/lib/bench-database.ts) are steadier, though they leave out the WAL writer.
 */
export async function postgresCpu(client: pg.Client, applicationName: string): Promise<PostgresCpu | null> {
  const { rows } = await client.query<{ pid: number }>("select pid from pg_stat_activity where application_name = $1", [applicationName]);
  const processes = postgresProcesses();
  if (processes === null) return null;
  return { all: processes, own: new Map(rows.filter((r) => processes.has(r.pid)).map((r) => [r.pid, processes.get(r.pid)!])) };
}

/**
 * CPU between two readings, process by process: one that started since counts whole, one that ended
 * since is left out (its last share unknown), so that a backend exiting never makes the sum go back.
 */
export function postgresCpuSpent(before: PostgresCpu, after: PostgresCpu): { all: number; own: number } {
  const spent = (b: Map<number, number>, a: Map<number, number>) => {
    let sum = 0;
    for (const [pid, micros] of a) sum += micros - (b.get(pid) ?? 0);
    return sum;
  };
  return { all: spent(before.all, after.all), own: spent(before.own, after.own) };
}

/** The read model's gauges, or null when the server has none. */
export async function readModelGauges(port: number): Promise<ReadModelGauges | null> {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`);
  return parseReadModelGauges(await response.text());
}

/** Samples the gauges every `everyMs` until stopped; keeps the largest backlog and lag seen. */
export function watchReadModel(port: number, everyMs = 500): { stop(): Promise<{ maxBacklog: number; maxLagSeconds: number | null } | null> } {
  let max: { maxBacklog: number; maxLagSeconds: number | null } | null = null;
  let running = true;
  // Stopping wakes the loop from its wait: the catch-up, timed after the stop, must not wait out a sample's
  // interval (up to 500 ms were counted into it, depending on where the round's end fell in the interval).
  let wake = () => {};
  const loop = (async () => {
    while (running) {
      const gauges = await readModelGauges(port).catch(() => null);
      if (gauges !== null) {
        max ??= { maxBacklog: 0, maxLagSeconds: null };
        max.maxBacklog = Math.max(max.maxBacklog, gauges.backlog);
        if (gauges.lagSeconds !== null) max.maxLagSeconds = Math.max(max.maxLagSeconds ?? 0, gauges.lagSeconds);
      }
      if (!running) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, everyMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  })();
  return {
    async stop() {
      running = false;
      wake();
      await loop;
      return max;
    },
  };
}

/**
 * Milliseconds from the last payment's answer until the backlog is first seen at 0, or null when the server
 * has no such gauge. Gives up after `timeoutMs` (returns the time waited). Polled every 10 ms at first, a
 * quarter longer each time up to 250 ms: a scrape of the metrics costs the server about a millisecond, and
 * the round's CPU is read after the catch-up, so a catch-up of seconds polled every 10 ms was charged to
 * its payments (~400 µs each in `push-history`) for the probe's own scrapes.
 */
export async function catchUp(port: number, lastAnswerAt: number, timeoutMs: number): Promise<number | null> {
  for (let every = 10; ; every = Math.min(250, every * 1.25)) {
    const gauges = await readModelGauges(port);
    if (gauges === null) return null;
    const waited = performance.now() - lastAnswerAt;
    if (gauges.backlog === 0 || waited > timeoutMs) return Math.round(waited);
    await new Promise((resolve) => setTimeout(resolve, every));
  }
}

/**
 * SQLite: the bytes of write-ahead log a server wrote while watched, counted from the log's index (the
 * `-shm` file beside the database, read by the runner, nothing asked of the server). The index's header
 * holds the frames in the log (mxFrame, offset 16), the page size (offset 14) and the log's salt (offset
 * 32), which changes when a writer starts the log again from its beginning; the header is kept twice
 * (offsets 0 and 48) and a read where the copies differ is a torn one, skipped. In the machine's byte order. Sampled every `everyMs`: the
 * frames a generation gained after its last sample and before a restart are not seen (a few hundred of the
 * tens of thousands a second a payment load writes), so the figure is a slight undercount. A frame is a
 * page and its 24-byte header. Null when the index cannot be read (no log: not in WAL mode, or closed).
 */
const LE = endianness() === "LE";

export function watchSqliteWal(file: string, everyMs = 5): { stop(): number | null } {
  let fd: number | null = null;
  try {
    fd = openSync(`${file}-shm`, "r");
  } catch {
    return { stop: () => null };
  }
  const header = Buffer.alloc(96);
  let last: { salt: bigint; frames: number } | null = null;
  let bytes = 0;
  let pageBytes = 0;
  const sample = () => {
    if (readSync(fd!, header, 0, 96, 0) < 96 || !header.subarray(0, 48).equals(header.subarray(48, 96))) return;
    const size = LE ? header.readUInt16LE(14) : header.readUInt16BE(14);
    pageBytes = (size === 1 ? 65_536 : size) + 24;
    const now = { salt: header.readBigUInt64LE(32), frames: LE ? header.readUInt32LE(16) : header.readUInt32BE(16) };
    if (last !== null) bytes += (now.salt === last.salt ? now.frames - last.frames : now.frames) * pageBytes;
    last = now;
  };
  sample();
  const timer = setInterval(sample, everyMs);
  return {
    stop() {
      clearInterval(timer);
      sample();
      closeSync(fd!);
      return last === null ? null : bytes;
    },
  };
}
