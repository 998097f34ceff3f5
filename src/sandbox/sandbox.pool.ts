// The sandbox as the rest of the service sees it: a pool of worker threads, each with one Lua state,
// that runs plugins off the HTTP event loop. The pool owns every limit that needs an outside view:
// wall time (timer), CPU time (the worker thread's own CPU clock, read from /proc), and crashes.
// A run past a limit is answered at once and its worker is terminated and replaced; the main thread
// also performs the host calls (getInvoice, fetch) and hands the answers back to the parked worker.
import { closeSync, openSync, readSync } from "node:fs";
import { MessageChannel, Worker, type MessagePort } from "node:worker_threads";
import { createFetcher, type Fetcher } from "./fetch.client.ts";
import { resolveLimits } from "./sandbox.limits.ts";
import {
  CPU_START_BYTE,
  CTL_HOST,
  CTL_JOB,
  CTL_PARKED,
  CTL_RUN,
  readLogs,
  sharedBufferSize,
  type CheckJob,
  type FetchReply,
  type FetchRequest,
  type HostCall,
  type InvoiceReply,
  type RunJob,
  type WorkerInit,
  type WorkerMessage,
  type WorkerResult,
} from "./sandbox.protocol.ts";
import type {
  CompileCheck,
  FetchRecord,
  LogLine,
  RunErrorKind,
  RunInput,
  RunOutcome,
  Sandbox,
  SandboxDeps,
  SandboxHost,
  SandboxLimits,
} from "./sandbox.types.ts";

const WORKER_URL = new URL("./sandbox.worker.ts", import.meta.url);
const MAX_MESSAGE = 4096;
/** A run may wait this long for a worker beyond its wall time (a worker starts in tens to hundreds of ms). */
const START_ALLOWANCE_MS = 2_000;
/** Without a per-thread CPU clock the budget is judged on wall time minus host waits, with this much slack. */
const WALL_CPU_FACTOR = 2;

type RunSpec = Omit<RunJob, "runId" | "sourceId" | "source"> & { source: string };
type JobSpec = RunSpec | Omit<CheckJob, "runId">;
type Finish = (result: WorkerResult, logs: LogLine[], fetches: FetchRecord[], durationMs: number) => void;

interface Pending {
  job: JobSpec;
  host: SandboxHost | null;
  finish: Finish;
  queuedAt: number;
  queueTimer: NodeJS.Timeout | null;
}

interface Active {
  runId: number;
  pending: Pending;
  startedAt: number;
  hostSince: number | null;
  hostTotal: number;
  fetches: FetchRecord[];
  fetchCount: number;
  /** Created by the first fetch: aborting it ends that run's network traffic. */
  abort: AbortController | null;
  /** One timer per run: the next moment a limit (wall time, CPU budget) has to be looked at. */
  timer: NodeJS.Timeout | null;
  settled: boolean;
}

interface Slot {
  worker: Worker;
  shared: SharedArrayBuffer;
  ctl: Int32Array;
  cpuStart: Float64Array;
  jobPort: MessagePort;
  replyPort: MessagePort;
  ready: boolean;
  gone: boolean;
  cpuFd: number | null;
  cpuBuf: Buffer;
  /** Source ids this worker has been sent (it keeps the compiled chunks). */
  sources: Set<number>;
  active: Active | null;
}

export function createSandbox(limits?: Partial<SandboxLimits>, deps: SandboxDeps = {}): Sandbox {
  return new WorkerPool(resolveLimits(limits), deps);
}

class WorkerPool implements Sandbox {
  private readonly limits: Readonly<SandboxLimits>;
  private readonly fetcher: Fetcher;
  private readonly workerUrl: URL;
  private readonly slots = new Set<Slot>();
  private readonly queue: Pending[] = [];
  private nextRunId = 1;
  private readonly sourceIds = new Map<string, number>();
  private nextSourceId = 1;
  private closed = false;
  private startupFailures = 0;

  constructor(limits: Readonly<SandboxLimits>, deps: SandboxDeps) {
    this.limits = limits;
    this.fetcher = createFetcher(limits, deps.lookup);
    this.workerUrl = deps.workerUrl ?? WORKER_URL;
    for (let i = 0; i < limits.poolSize; i++) this.spawn();
  }

  run(input: RunInput, host: SandboxHost): Promise<RunOutcome> {
    return new Promise((resolve) => {
      const finish: Finish = (result, logs, fetches, durationMs) => resolve(toOutcome(result, logs, fetches, durationMs));
      let job: RunSpec;
      try {
        job = toRunJob(input);
      } catch (err) {
        finish({ kind: "killed", message: `invalid run input: ${err instanceof Error ? err.message : String(err)}`, line: null, cpuMs: 0 }, [], [], 0);
        return;
      }
      this.enqueue({ job, host, finish, queuedAt: performance.now(), queueTimer: null });
    });
  }

  check(source: string): Promise<CompileCheck> | CompileCheck {
    if (typeof source !== "string") return { ok: false, message: "the plugin source must be a string", line: null };
    if (source.startsWith("\x1b")) return { ok: false, message: "binary (precompiled) chunks are not allowed", line: null };
    return new Promise((resolve) => {
      const finish: Finish = (result) => {
        if (result.kind === "compiled") resolve({ ok: true });
        else if (result.kind === "compile_error") resolve({ ok: false, message: result.message, line: result.line });
        else if (result.kind === "ok") resolve({ ok: true });
        else resolve({ ok: false, message: `the compile check did not finish: ${result.message}`, line: null });
      };
      this.enqueue({ job: { type: "check", source }, host: null, finish, queuedAt: performance.now(), queueTimer: null });
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const pending of this.queue.splice(0)) {
      if (pending.queueTimer) clearTimeout(pending.queueTimer);
      pending.finish({ kind: "killed", message: "the sandbox was closed", line: null, cpuMs: 0 }, [], [], 0);
    }
    const exits: Promise<number>[] = [];
    for (const slot of [...this.slots]) {
      if (slot.active) this.settle(slot, { kind: "killed", message: "the sandbox was closed", line: null, cpuMs: 0 });
      exits.push(this.discard(slot));
    }
    await Promise.all(exits);
    await this.fetcher.close();
  }

  // ---- queue and dispatch ------------------------------------------------------------------------

  private enqueue(pending: Pending): void {
    if (this.closed) {
      pending.finish({ kind: "killed", message: "the sandbox is closed", line: null, cpuMs: 0 }, [], [], 0);
      return;
    }
    this.queue.push(pending);
    this.dispatch();
    if (this.queue.at(-1) !== pending) return; // started at once
    // A run that cannot get a worker (all busy, or none able to start) fails instead of waiting forever.
    const patience = this.limits.wallMs + START_ALLOWANCE_MS;
    pending.queueTimer = setTimeout(() => {
      const at = this.queue.indexOf(pending);
      if (at < 0) return;
      this.queue.splice(at, 1);
      pending.finish({ kind: "timeout", message: `no sandbox worker became free within ${patience} ms`, line: null, cpuMs: 0 }, [], [], performance.now() - pending.queuedAt);
    }, patience);
  }

  private dispatch(): void {
    if (this.queue.length === 0) return;
    for (const slot of this.slots) {
      if (!slot.ready || slot.active || slot.gone) continue;
      const pending = this.queue.shift();
      if (!pending) return;
      this.start(slot, pending);
    }
  }

  private sourceId(source: string): number {
    let id = this.sourceIds.get(source);
    if (id === undefined) {
      if (this.sourceIds.size >= 4096) this.sourceIds.clear(); // old ids simply fall out of the workers' caches
      id = this.nextSourceId++;
      this.sourceIds.set(source, id);
    }
    return id;
  }

  private start(slot: Slot, pending: Pending): void {
    if (pending.queueTimer) clearTimeout(pending.queueTimer);
    const runId = this.nextRunId++;
    const active: Active = { runId, pending, startedAt: performance.now(), hostSince: null, hostTotal: 0, fetches: [], fetchCount: 0, abort: null, timer: null, settled: false };
    slot.active = active;
    slot.worker.ref();
    this.post(slot, active);
    this.watch(slot, active, Math.min(this.limits.cpuMs, this.limits.wallMs));
    const { ctl } = slot;
    Atomics.store(ctl, CTL_JOB, 1);
    if (Atomics.load(ctl, CTL_PARKED) === 1) Atomics.notify(ctl, CTL_JOB);
  }

  private post(slot: Slot, active: Active): void {
    const job = active.pending.job;
    if (job.type === "check") {
      slot.jobPort.postMessage({ ...job, runId: active.runId });
      return;
    }
    const sourceId = this.sourceId(job.source);
    const send = !slot.sources.has(sourceId);
    if (send) slot.sources.add(sourceId);
    const message: RunJob = { ...job, source: send ? job.source : null, sourceId, runId: active.runId };
    // The body is a private copy (see toRunJob): hand its memory over instead of copying it again.
    slot.jobPort.postMessage(message, [job.body.buffer as ArrayBuffer]);
  }

  private watch(slot: Slot, active: Active, delay: number): void {
    active.timer = setTimeout(() => this.inspect(slot, active), Math.max(1, delay));
  }

  /** Looks at a run's wall time and CPU time; kills it past either, else looks again when it could be. */
  private inspect(slot: Slot, active: Active): void {
    if (active.settled || slot.active !== active) return;
    const { cpuMs, wallMs } = this.limits;
    const now = performance.now();
    const wallLeft = active.startedAt + wallMs - now;
    if (wallLeft <= 0) {
      this.kill(slot, active, "timeout", `the run exceeded its wall time of ${wallMs} ms`);
      return;
    }
    let cpuLeft: number;
    const nowNs = readCpuNs(slot);
    if (nowNs !== null) {
      // The worker records its CPU clock when it starts a run; until then nothing has been spent.
      cpuLeft = Atomics.load(slot.ctl, CTL_RUN) === active.runId ? cpuMs - (nowNs / 1000 - slot.cpuStart[0]!) / 1000 : cpuMs;
    } else {
      const hostNow = active.hostSince === null ? 0 : now - active.hostSince;
      cpuLeft = cpuMs * WALL_CPU_FACTOR - (now - active.startedAt - active.hostTotal - hostNow);
    }
    if (cpuLeft <= 0) {
      this.kill(slot, active, "timeout", `the script used more than its CPU budget of ${cpuMs} ms`);
      return;
    }
    this.watch(slot, active, Math.min(wallLeft, Math.max(2, cpuLeft)));
  }

  // ---- worker lifecycle --------------------------------------------------------------------------

  private spawn(): void {
    const shared = new SharedArrayBuffer(sharedBufferSize(this.limits));
    const jobs = new MessageChannel();
    const replies = new MessageChannel();
    const init: WorkerInit = { shared, jobPort: jobs.port2, replyPort: replies.port2, limits: { ...this.limits, fetchAllow: [...this.limits.fetchAllow] } };
    const worker = new Worker(this.workerUrl, {
      workerData: init,
      transferList: [jobs.port2, replies.port2],
      resourceLimits: { maxOldGenerationSizeMb: 128, maxYoungGenerationSizeMb: 32, stackSizeMb: 4 },
      name: "storefront-sandbox",
    });
    jobs.port1.unref();
    replies.port1.unref();
    const slot: Slot = {
      worker,
      shared,
      ctl: new Int32Array(shared, 0, 16),
      cpuStart: new Float64Array(shared, CPU_START_BYTE, 1),
      jobPort: jobs.port1,
      replyPort: replies.port1,
      ready: false,
      gone: false,
      cpuFd: null,
      cpuBuf: Buffer.alloc(96),
      sources: new Set(),
      active: null,
    };
    this.slots.add(slot);
    worker.on("message", (message: WorkerMessage) => this.onMessage(slot, message));
    worker.on("error", (err) => this.onExit(slot, `the sandbox worker failed: ${err.message}`));
    worker.on("exit", (code) => this.onExit(slot, `the sandbox worker exited (code ${code})`));
  }

  private onMessage(slot: Slot, message: WorkerMessage): void {
    switch (message.type) {
      case "ready":
        slot.ready = true;
        this.startupFailures = 0;
        slot.cpuFd = openCpuClock(message.tid);
        slot.worker.unref();
        this.dispatch();
        return;
      case "done": {
        const active = slot.active;
        if (!active || active.runId !== message.runId || active.settled) return;
        this.settle(slot, message.result);
        if (message.retire) {
          this.replace(slot);
        } else {
          slot.worker.unref();
          this.dispatch();
        }
        return;
      }
      case "need_source": {
        const active = slot.active;
        if (!active || active.runId !== message.job.runId || active.settled || active.pending.job.type !== "run") return;
        const job: RunJob = { ...message.job, source: active.pending.job.source };
        slot.jobPort.postMessage(job, [job.body.buffer as ArrayBuffer]);
        Atomics.store(slot.ctl, CTL_JOB, 1);
        if (Atomics.load(slot.ctl, CTL_PARKED) === 1) Atomics.notify(slot.ctl, CTL_JOB);
        return;
      }
      case "host":
        void this.onHostCall(slot, message.runId, message.call);
        return;
    }
  }

  /** Unexpected end of a worker (crash, out-of-memory, failed start). */
  private onExit(slot: Slot, why: string): void {
    if (slot.gone) return;
    if (slot.active) this.settle(slot, { kind: "killed", message: why, line: null, cpuMs: 0 });
    if (!slot.ready) this.startupFailures++;
    this.replace(slot);
  }

  private kill(slot: Slot, active: Active, kind: "timeout" | "killed", message: string): void {
    if (active.settled || slot.active !== active) return;
    this.settle(slot, { kind, message, line: null, cpuMs: cpuSpent(slot, active) }, Atomics.load(slot.ctl, CTL_RUN) === active.runId);
    this.replace(slot);
  }

  private replace(slot: Slot): void {
    void this.discard(slot);
    if (this.closed) return;
    // A worker that cannot even start (broken install) must not turn into a tight restart loop.
    const delay = this.startupFailures === 0 ? 0 : Math.min(5_000, 50 * 2 ** Math.min(this.startupFailures, 7));
    if (delay === 0) this.spawn();
    else setTimeout(() => !this.closed && this.spawn(), delay).unref();
  }

  private discard(slot: Slot): Promise<number> {
    if (slot.gone) return Promise.resolve(0);
    slot.gone = true;
    this.slots.delete(slot);
    if (slot.cpuFd !== null) closeSync(slot.cpuFd);
    slot.cpuFd = null;
    slot.jobPort.close();
    slot.replyPort.close();
    return slot.worker.terminate();
  }

  /** Ends the active run. `logsValid`: the log area holds this run's lines (false if it never started). */
  private settle(slot: Slot, result: WorkerResult, logsValid = true): void {
    const active = slot.active;
    if (!active || active.settled) return;
    active.settled = true;
    slot.active = null;
    if (active.timer) clearTimeout(active.timer);
    active.abort?.abort();
    const logs = active.pending.job.type === "run" && logsValid ? readLogs(slot.shared, this.limits) : [];
    active.pending.finish(result, logs, active.fetches, performance.now() - active.startedAt);
  }

  // ---- host calls --------------------------------------------------------------------------------

  private async onHostCall(slot: Slot, runId: number, call: HostCall): Promise<void> {
    const active = slot.active;
    if (!active || active.runId !== runId || active.settled) return;
    active.hostSince = performance.now();
    let reply: FetchReply | InvoiceReply;
    try {
      reply = call.op === "invoice" ? await this.invoice(active, call.id) : await this.fetch(active, call.request);
    } catch (err) {
      reply = { ok: false, error: `host call failed: ${err instanceof Error ? err.message : String(err)}` };
    }
    if (active.settled || slot.active !== active) return;
    active.hostTotal += performance.now() - active.hostSince;
    active.hostSince = null;
    slot.replyPort.postMessage({ runId, reply });
    Atomics.store(slot.ctl, CTL_HOST, 1);
    Atomics.notify(slot.ctl, CTL_HOST);
  }

  private async invoice(active: Active, id: string): Promise<InvoiceReply> {
    const host = active.pending.host;
    if (!host) return { ok: false, error: "no invoice lookup is available" };
    try {
      const invoice = await host.getInvoice(id);
      // Only JSON text crosses into Lua: no host object (or prototype) is ever reachable from a script.
      const json = invoice === null || invoice === undefined ? undefined : (JSON.stringify(invoice) as string | undefined);
      return { ok: true, json: typeof json === "string" && json.startsWith("{") ? json : null };
    } catch {
      return { ok: false, error: "the invoice lookup failed" };
    }
  }

  private async fetch(active: Active, request: FetchRequest): Promise<FetchReply> {
    if (active.fetchCount >= this.limits.maxFetches) {
      const error = `fetch refused: the limit of ${this.limits.maxFetches} fetches per run is reached`;
      active.fetches.push({ url: request.url.slice(0, 2048), method: request.method.toUpperCase().slice(0, 16), status: null, error, durationMs: 0, requestBytes: request.body?.byteLength ?? 0, responseBytes: 0 });
      return { ok: false, error };
    }
    active.fetchCount++;
    active.abort ??= new AbortController();
    const { reply, record } = await this.fetcher.fetch(request, { signal: active.abort.signal, deadline: active.startedAt + this.limits.wallMs });
    active.fetches.push(record);
    return reply;
  }
}


function toRunJob(input: RunInput): RunSpec {
  const { request } = input;
  if (typeof input.source !== "string") throw new TypeError("source must be a string");
  const body = request.body ?? Buffer.alloc(0);
  const pairs = (record: Record<string, string> | undefined, lower: boolean): [string, string][] =>
    Object.entries(record ?? {}).map(([k, v]) => [lower ? k.toLowerCase() : k, Array.isArray(v) ? v.join(", ") : String(v)]);
  return {
    type: "run",
    source: input.source,
    method: String(request.method ?? "POST"),
    // A private copy of exactly the body's bytes (a Buffer may be a view into a larger pooled buffer), transferred to the worker.
    body: Uint8Array.prototype.slice.call(body),
    headers: pairs(request.headers, true),
    query: pairs(request.query, false),
    storeId: String(input.store.id),
    pluginName: String(input.plugin.name),
    pluginVersion: Number(input.plugin.version) || 0,
    secrets: pairs(input.secrets, false),
  };
}

function toOutcome(result: WorkerResult, logs: LogLine[], fetches: FetchRecord[], durationMs: number): RunOutcome {
  switch (result.kind) {
    case "ok": {
      const cpuMs = Math.round(result.cpuMs * 1000) / 1000;
      const outcome =
        result.status === "ignore"
          ? result.invoiceId === null
            ? { status: "ignore" as const }
            : { status: "ignore" as const, invoiceId: result.invoiceId }
          : { status: result.status, invoiceId: result.invoiceId ?? "" };
      return { ok: true, result: outcome, logs, fetches, durationMs, cpuMs };
    }
    case "compiled":
      return { ok: false, error: { kind: "killed", message: "unexpected compile-only answer" }, logs, fetches, durationMs };
    case "compile_error":
      return { ok: false, error: errorOf("script_error", result.message, result.line), logs, fetches, durationMs };
    case "script_error":
    case "invalid_result":
    case "timeout":
    case "memory_limit":
    case "rejected":
    case "killed":
      return { ok: false, error: errorOf(result.kind, result.message, result.line), logs, fetches, durationMs };
  }
}

function errorOf(kind: RunErrorKind, message: string, line: number | null) {
  const text = message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE)}…` : message;
  return line === null ? { kind, message: text } : { kind, message: text, line };
}

/** The worker thread's CPU clock: /proc/self/task/<tid>/schedstat (nanoseconds on the CPU), Linux only. */
function openCpuClock(tid: number | null): number | null {
  if (tid === null || !Number.isInteger(tid)) return null;
  try {
    return openSync(`/proc/self/task/${tid}/schedstat`, "r");
  } catch {
    return null;
  }
}

function readCpuNs(slot: Slot): number | null {
  if (slot.cpuFd === null) return null;
  try {
    const n = readSync(slot.cpuFd, slot.cpuBuf, 0, slot.cpuBuf.length, 0);
    const text = slot.cpuBuf.toString("latin1", 0, n);
    const ns = Number(text.slice(0, text.indexOf(" ")));
    return Number.isFinite(ns) ? ns : null;
  } catch {
    return null;
  }
}

function cpuSpent(slot: Slot, active: Active): number {
  const now = readCpuNs(slot);
  return now !== null && Atomics.load(slot.ctl, CTL_RUN) === active.runId ? now / 1e6 - slot.cpuStart[0]! / 1000 : 0;
}
