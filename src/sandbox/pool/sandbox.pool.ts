// The sandbox as the rest of the service sees it: a pool of worker threads, each with one Lua state,
// that runs plugins off the HTTP event loop. The pool owns every limit that needs an outside view:
// wall time (timer), CPU time (the worker thread's own CPU clock, read from /proc), and crashes.
// A run past a limit is answered at once and its worker is terminated and replaced; the main thread
// also performs the host calls (getInvoice, fetch) and hands the answers back to the parked worker.
//
// Jobs wait in one queue per store (a lane), served in turn (round robin), and a store's jobs occupy at
// most `maxConcurrentPerStore` workers at once: one store's flood of runaway scripts waits behind its
// own runs, not in front of another store's. A store with `maxQueuedPerStore` runs already waiting is
// refused at once (`busy`) instead of queueing runs that would time out anyway.
//
// Jobs are pipelined: a worker may hold a few queued jobs behind the one it runs, so it never waits
// for the (busy) HTTP event loop between two runs. A queued job is taken back (CTL_CLAIM) and given
// to another worker when the running one blocks on a host call or runs long, and it is never lost or
// run twice when a worker is terminated.
import { closeSync, openSync, readSync } from "node:fs";
import { MessageChannel, Worker, type MessagePort } from "node:worker_threads";
import { createFetcher, type Fetcher } from "./fetch.client.ts";
import { resolveLimits } from "../sandbox.limits.ts";
import {
  CPU_START_BYTE,
  CTL_CLAIM,
  CTL_HOST,
  CTL_JOB,
  CTL_PARKED,
  CTL_RUN,
  readLogs,
  sharedBufferSize,
  withOverflowNotice,
  type CheckJob,
  type FetchReply,
  type FetchRequest,
  type HostCall,
  type InvoiceReply,
  type RunJob,
  type WorkerInit,
  type WorkerMessage,
  type WorkerResult,
} from "../sandbox.protocol.ts";
import type {
  CompileCheck,
  FetchRecord,
  LogLine,
  PluginResult,
  RunErrorKind,
  RunInput,
  RunOutcome,
  Sandbox,
  SandboxDeps,
  SandboxHost,
  SandboxLimits,
} from "../sandbox.types.ts";

const WORKER_URL = new URL("../sandbox.worker.ts", import.meta.url);
const MAX_MESSAGE = 4096;
/** A run may wait this long for a worker beyond its wall time (a worker starts in tens to hundreds of ms). */
const START_ALLOWANCE_MS = 2_000;
/** Without a per-thread CPU clock the budget is judged on wall time minus host waits, with this much slack. */
const WALL_CPU_FACTOR = 2;
/** Jobs a worker may hold: the one it runs and the ones queued behind it. */
const PIPELINE_DEPTH = 3;
/** A run longer than this stops being a good one to queue behind: its queued jobs go elsewhere. */
const STALL_MS = 5;
/** CTL_CLAIM value that no job sequence reaches: a worker being replaced claims nothing more. */
const FROZEN = 0x3fffffff;

type RunSpec = Omit<RunJob, "runId" | "seq" | "sourceId">;
type JobSpec = RunSpec | Omit<CheckJob, "runId" | "seq">;
type Finish = (result: WorkerResult, logs: LogLine[], fetches: FetchRecord[], durationMs: number) => void;

interface Pending {
  job: JobSpec;
  host: SandboxHost | null;
  finish: Finish;
  /** Ends the job without running it: its store has too many runs waiting. */
  refuse: (message: string) => void;
  /** The lane: the store's id for a run, CHECK_LANE for compile checks. */
  key: string;
  queuedAt: number;
  queueTimer: NodeJS.Timeout | null;
}

/** One store's waiting jobs, oldest first. */
interface Lane {
  key: string;
  queue: Pending[];
}

/** Compile checks (uploads) share one lane of their own; no store id is "\0". */
const CHECK_LANE = "\0check";

/** A job handed to a worker: queued there, or running when it is the first of the slot's list. */
interface Active {
  runId: number;
  seq: number;
  pending: Pending;
  /** When it became the slot's first job (its wall time counts from there). */
  startedAt: number;
  hostSince: number | null;
  hostTotal: number;
  fetches: FetchRecord[];
  fetchCount: number;
  /** Created by the first fetch: aborting it ends that run's network traffic. */
  abort: AbortController | null;
  /** One timer per running job: the next moment a limit (wall time, CPU, stall) has to be looked at. */
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
  /** Seq of the last job posted to this worker. */
  seq: number;
  /** Jobs up to this seq were taken back: CTL_CLAIM holds it while the worker is still on its running job. */
  revoked: number;
  /** Jobs held by the worker, oldest (running) first. */
  jobs: Active[];
  /**
   * While this (replacement) worker starts: the lane whose runaway run had the old one killed. It
   * still counts against that store's cap, so the flooding store pays for its own restarts.
   */
  reservedFor: string | null;
}

export function createSandbox(limits?: Partial<SandboxLimits>, deps: SandboxDeps = {}): Sandbox {
  return new WorkerPool(resolveLimits(limits), deps);
}

class WorkerPool implements Sandbox {
  private readonly limits: Readonly<SandboxLimits>;
  private readonly fetcher: Fetcher;
  private readonly workerUrl: URL;
  private readonly slots = new Set<Slot>();
  /** Lanes with waiting jobs, by key, and the same lanes in turn order; `turn` is the next to serve. */
  private readonly lanes = new Map<string, Lane>();
  private readonly ring: Lane[] = [];
  private turn = 0;
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
      const refuse = (message: string) => resolve({ ok: false, error: { kind: "busy", message }, logs: [], fetches: [], durationMs: 0 });
      this.enqueue({ job, host, finish, refuse, key: job.storeId, queuedAt: performance.now(), queueTimer: null });
    });
  }

  check(source: string): Promise<CompileCheck> | CompileCheck {
    if (typeof source !== "string") return { ok: false, message: "the plugin source must be a string", line: null };
    if (source.startsWith("\x1b")) return { ok: false, message: "binary (precompiled) chunks are not allowed", line: null };
    return new Promise((resolve) => {
      const finish: Finish = (result) => {
        if (result.kind === "compiled") resolve({ ok: true });
        else if (result.kind === "compile_error") resolve({ ok: false, message: result.message, line: result.line });
        else resolve({ ok: false, message: `the compile check did not finish: ${"message" in result ? result.message : result.kind}`, line: null });
      };
      const refuse = (message: string) => resolve({ ok: false, message: `the compile check did not run: ${message}`, line: null });
      this.enqueue({ job: { type: "check", source }, host: null, finish, refuse, key: CHECK_LANE, queuedAt: performance.now(), queueTimer: null });
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const closedResult: WorkerResult = { kind: "killed", message: "the sandbox was closed", line: null, cpuMs: 0 };
    const waiting = this.ring.splice(0).flatMap((lane) => lane.queue.splice(0));
    this.lanes.clear();
    for (const pending of waiting) {
      if (pending.queueTimer) clearTimeout(pending.queueTimer);
      pending.finish(closedResult, [], [], 0);
    }
    const exits: Promise<number>[] = [];
    for (const slot of [...this.slots]) {
      const running = slot.jobs[0];
      for (const job of slot.jobs.splice(0)) this.finishJob(job, closedResult, job === running ? readLogs(slot.shared, this.limits) : []);
      exits.push(this.discard(slot));
    }
    await Promise.all(exits);
    await this.fetcher.close();
  }

  // ---- queue and dispatch ------------------------------------------------------------------------

  /** Queues a job in its store's lane (`front`: a job taken back from a worker, which keeps its turn). */
  private enqueue(pending: Pending, front = false): void {
    if (this.closed) {
      pending.finish({ kind: "killed", message: "the sandbox is closed", line: null, cpuMs: 0 }, [], [], 0);
      return;
    }
    if (!front && this.ring.length === 0) {
      // Nobody waits: straight to a worker, if this store may have one.
      const slot = this.slotFor(pending.key);
      if (slot !== null) {
        this.give(slot, pending);
        return;
      }
    }
    let lane = this.lanes.get(pending.key);
    if (!lane) {
      lane = { key: pending.key, queue: [] };
      this.lanes.set(pending.key, lane);
      this.ring.push(lane);
    }
    if (!front && lane.queue.length >= this.limits.maxQueuedPerStore) {
      // Refused before anything is queued: the store that floods is the one that gets turned away.
      pending.refuse(`this store already has ${lane.queue.length} plugin runs waiting for the sandbox`);
      if (lane.queue.length === 0) this.dropLane(lane);
      return;
    }
    if (front) {
      // A job taken back had its turn already: its lane is served next, so reclaims cannot skip a store.
      lane.queue.unshift(pending);
      this.turn = this.ring.indexOf(lane);
    } else {
      lane.queue.push(pending);
    }
    this.dispatch();
    if (!lane.queue.includes(pending) || pending.queueTimer) return; // started, or already waiting with its timer
    // A run that cannot get a worker (all busy, or none able to start) fails instead of waiting forever.
    const patience = this.limits.wallMs + START_ALLOWANCE_MS;
    pending.queueTimer = setTimeout(() => {
      const current = this.lanes.get(pending.key);
      const at = current ? current.queue.indexOf(pending) : -1;
      if (!current || at < 0) return;
      current.queue.splice(at, 1);
      if (current.queue.length === 0) this.dropLane(current);
      pending.finish({ kind: "timeout", message: `no sandbox worker became free within ${patience} ms`, line: null, cpuMs: 0 }, [], [], performance.now() - pending.queuedAt);
    }, patience);
  }

  private dropLane(lane: Lane): void {
    if (this.lanes.get(lane.key) === lane) this.lanes.delete(lane.key);
    const at = this.ring.indexOf(lane);
    if (at < 0) return;
    this.ring.splice(at, 1);
    if (at < this.turn) this.turn--;
  }

  /**
   * Gives waiting jobs to workers, one lane at a time in turn: each lane's oldest job goes to the best
   * worker its store may still use, then the turn passes to the next lane.
   */
  private dispatch(): void {
    let passed = 0; // lanes in a row that could not be served
    while (this.ring.length > 0 && passed < this.ring.length) {
      if (!this.anyOpenSlot()) return;
      if (this.turn >= this.ring.length) this.turn = 0;
      const lane = this.ring[this.turn]!;
      const slot = this.slotFor(lane.key);
      if (slot === null) {
        this.turn++;
        passed++;
        continue;
      }
      passed = 0;
      const pending = lane.queue.shift()!;
      if (lane.queue.length === 0) this.dropLane(lane); // the next lane moves into this turn
      else this.turn++;
      this.give(slot, pending);
    }
  }

  /** A worker that can take a job now: started, with room, and its running job neither long nor waiting on the host. */
  private isOpen(slot: Slot, now = performance.now()): boolean {
    if (!slot.ready || slot.gone || slot.jobs.length >= PIPELINE_DEPTH) return false;
    const head = slot.jobs[0];
    return !head || (head.hostSince === null && head.hostTotal === 0 && now - head.startedAt < STALL_MS);
  }

  private anyOpenSlot(): boolean {
    const now = performance.now();
    for (const slot of this.slots) if (this.isOpen(slot, now)) return true;
    return false;
  }

  /**
   * The worker for a job of lane `key`: idle workers first, then queueing behind runs that are short so
   * far. A store at its cap may only queue behind workers it already holds.
   */
  private slotFor(key: string): Slot | null {
    let held = 0;
    let anyBest: Slot | null = null; // the best worker of all
    let ownBest: Slot | null = null; // the best among those already holding this store's jobs
    const now = performance.now();
    for (const slot of this.slots) {
      let own = !slot.ready && slot.reservedFor === key;
      for (const j of slot.jobs) if (j.pending.key === key) own = true;
      if (own) held++;
      if (!this.isOpen(slot, now)) continue;
      if (!anyBest || slot.jobs.length < anyBest.jobs.length) anyBest = slot;
      if (own && (!ownBest || slot.jobs.length < ownBest.jobs.length)) ownBest = slot;
    }
    return held >= this.limits.maxConcurrentPerStore ? ownBest : anyBest;
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

  private give(slot: Slot, pending: Pending): void {
    if (pending.queueTimer) clearTimeout(pending.queueTimer);
    pending.queueTimer = null;
    const job: Active = { runId: this.nextRunId++, seq: ++slot.seq, pending, startedAt: 0, hostSince: null, hostTotal: 0, fetches: [], fetchCount: 0, abort: null, timer: null, settled: false };
    slot.jobs.push(job);
    const spec = pending.job;
    if (spec.type === "check") {
      slot.jobPort.postMessage({ ...spec, runId: job.runId, seq: job.seq } satisfies CheckJob);
    } else {
      // Each worker gets its own copy, transferred (the job may be taken back and given to another worker).
      const body = new Uint8Array(spec.body);
      const message: RunJob = { ...spec, body, sourceId: this.sourceId(spec.source), runId: job.runId, seq: job.seq };
      slot.jobPort.postMessage(message, [body.buffer as ArrayBuffer]);
    }
    if (slot.jobs.length === 1) {
      slot.worker.ref();
      this.begin(slot, job);
    } else if (slot.jobs.length === 2) {
      // Something now waits behind the running job: look at it again when it would count as stalled.
      const head = slot.jobs[0]!;
      if (head.timer) clearTimeout(head.timer);
      this.watch(slot, head, head.startedAt + STALL_MS - performance.now());
    }
    const { ctl } = slot;
    Atomics.store(ctl, CTL_JOB, 1);
    if (Atomics.load(ctl, CTL_PARKED) === 1) Atomics.notify(ctl, CTL_JOB);
  }

  /** The job is now the worker's first: its clocks start. */
  private begin(slot: Slot, job: Active): void {
    job.startedAt = performance.now();
    const first = Math.min(this.limits.cpuMs, this.limits.wallMs, slot.jobs.length > 1 ? STALL_MS : Number.POSITIVE_INFINITY);
    this.watch(slot, job, first);
  }

  private watch(slot: Slot, job: Active, delay: number): void {
    job.timer = setTimeout(() => this.inspect(slot, job), Math.max(1, delay));
  }

  /** Takes back the jobs queued behind the running one (unless the worker already claimed them) and queues them again. */
  private reclaim(slot: Slot): void {
    const head = slot.jobs[0];
    if (!head || slot.jobs.length < 2) return;
    const last = slot.jobs.at(-1)!.seq;
    const claimed = Math.max(head.seq, slot.revoked);
    if (Atomics.compareExchange(slot.ctl, CTL_CLAIM, claimed, last) !== claimed) return; // the worker moved on: let it
    slot.revoked = last;
    const taken = slot.jobs.splice(1);
    for (let i = taken.length - 1; i >= 0; i--) this.enqueue(taken[i]!.pending, true);
  }

  /** Looks at the running job: wall time, CPU time, and whether jobs queued behind it should move. */
  private inspect(slot: Slot, job: Active): void {
    job.timer = null;
    if (job.settled || slot.jobs[0] !== job) return;
    const { cpuMs, wallMs } = this.limits;
    const now = performance.now();
    const running = Atomics.load(slot.ctl, CTL_RUN) === job.runId;
    if (slot.jobs.length > 1 && now - job.startedAt >= STALL_MS) this.reclaim(slot);
    const wallLeft = job.startedAt + wallMs - now;
    if (wallLeft <= 0 && running) {
      this.kill(slot, job, "timeout", `the run exceeded its wall time of ${wallMs} ms`);
      return;
    }
    let cpuLeft = cpuMs;
    const nowNs = running ? readCpuNs(slot) : null;
    if (nowNs !== null) {
      cpuLeft = cpuMs - (nowNs / 1000 - slot.cpuStart[0]!) / 1000;
    } else if (running && slot.cpuFd === null) {
      const hostNow = job.hostSince === null ? 0 : now - job.hostSince;
      cpuLeft = cpuMs * WALL_CPU_FACTOR - (now - job.startedAt - job.hostTotal - hostNow);
    }
    if (cpuLeft <= 0) {
      this.kill(slot, job, "timeout", `the script used more than its CPU budget of ${cpuMs} ms`);
      return;
    }
    // Not running means finished (its answer is on the way) or about to start: look again shortly.
    let next = running ? Math.min(Math.max(wallLeft, 1), Math.max(2, cpuLeft)) : 2;
    // Timers may fire a little early: jobs still queued behind are looked at again when it is stalled.
    if (slot.jobs.length > 1) next = Math.min(next, Math.max(1, job.startedAt + STALL_MS - now));
    this.watch(slot, job, next);
  }

  // ---- worker lifecycle --------------------------------------------------------------------------

  private spawn(reservedFor: string | null = null): void {
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
      seq: 0,
      revoked: 0,
      jobs: [],
      reservedFor,
    };
    this.slots.add(slot);
    worker.on("message", (message: WorkerMessage) => this.onMessage(slot, message));
    worker.on("error", (err) => this.onExit(slot, `the sandbox worker failed: ${err.message}`));
    worker.on("exit", (code) => this.onExit(slot, `the sandbox worker exited (code ${code})`));
  }

  private onMessage(slot: Slot, message: WorkerMessage): void {
    if (slot.gone) return;
    switch (message.type) {
      case "ready":
        slot.ready = true;
        slot.reservedFor = null;
        this.startupFailures = 0;
        slot.cpuFd = openCpuClock(message.tid);
        slot.worker.unref();
        this.dispatch();
        return;
      case "done": {
        const job = slot.jobs[0];
        if (!job || job.runId !== message.runId || job.settled) return;
        slot.jobs.shift();
        this.finishJob(job, message.result, withOverflowNotice(message.logs, message.logOverflow, this.limits));
        if (message.retire) {
          this.replace(slot);
          return;
        }
        const next = slot.jobs[0];
        if (next) this.begin(slot, next);
        else slot.worker.unref();
        this.dispatch();
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
    if (!slot.ready) this.startupFailures++;
    this.replace(slot, { kind: "killed", message: why, line: null, cpuMs: 0 });
  }

  private kill(slot: Slot, job: Active, kind: "timeout" | "killed", message: string): void {
    if (job.settled || slot.jobs[0] !== job) return;
    // Freeze the worker's queue first; if it already moved past this job, the job ended in time.
    const claimed = Math.max(job.seq, slot.revoked);
    if (Atomics.compareExchange(slot.ctl, CTL_CLAIM, claimed, FROZEN) !== claimed) return;
    if (Atomics.load(slot.ctl, CTL_RUN) !== job.runId) {
      Atomics.store(slot.ctl, CTL_CLAIM, claimed); // finished a moment ago: its answer is on the way
      return;
    }
    this.replace(slot, { kind, message, line: null, cpuMs: cpuSpent(slot, job) }, job.seq);
  }

  /**
   * Terminates the slot's worker and starts another. The jobs it had claimed end with `result` (when
   * given); the ones it had not claimed go back to the queue, untouched.
   */
  private replace(slot: Slot, result?: WorkerResult, claimedSeq?: number): void {
    if (slot.gone) return;
    const exchanged = Atomics.exchange(slot.ctl, CTL_CLAIM, FROZEN); // the worker claims nothing more
    const claimed = claimedSeq ?? exchanged;
    const jobs = slot.jobs.splice(0);
    // The replacement starts reserved for the store whose run was stopped (or whose runs retired it).
    const reservedFor = result ? (jobs[0]?.pending.key ?? slot.reservedFor) : null;
    void this.discard(slot);
    for (let i = jobs.length - 1; i >= 0; i--) {
      const job = jobs[i]!;
      if (job.seq > claimed) {
        if (job.timer) clearTimeout(job.timer);
        this.enqueue(job.pending, true);
      } else if (result) {
        const running = Atomics.load(slot.ctl, CTL_RUN) === job.runId;
        this.finishJob(job, result, running ? readLogs(slot.shared, this.limits) : []);
      }
    }
    if (this.closed) return;
    // A worker that cannot even start (broken install) must not turn into a tight restart loop.
    const delay = this.startupFailures === 0 ? 0 : Math.min(5_000, 50 * 2 ** Math.min(this.startupFailures, 7));
    if (delay === 0) this.spawn(reservedFor);
    else setTimeout(() => !this.closed && this.spawn(reservedFor), delay).unref();
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

  private finishJob(job: Active, result: WorkerResult, logs: LogLine[]): void {
    if (job.settled) return;
    job.settled = true;
    if (job.timer) clearTimeout(job.timer);
    job.abort?.abort();
    job.pending.finish(result, job.pending.job.type === "run" ? logs : [], job.fetches, job.startedAt ? performance.now() - job.startedAt : 0);
  }

  // ---- host calls --------------------------------------------------------------------------------

  private async onHostCall(slot: Slot, runId: number, call: HostCall): Promise<void> {
    const job = slot.jobs[0];
    if (!job || job.runId !== runId || job.settled) return;
    job.hostSince = performance.now();
    this.reclaim(slot); // nothing should wait behind a run that waits on the network or the database
    let reply: FetchReply | InvoiceReply;
    try {
      reply = call.op === "invoice" ? await this.invoice(job, call.id) : await this.fetch(job, call.request);
    } catch (err) {
      reply = { ok: false, error: `host call failed: ${err instanceof Error ? err.message : String(err)}` };
    }
    if (job.settled || slot.jobs[0] !== job) return;
    job.hostTotal += performance.now() - job.hostSince;
    job.hostSince = null;
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
    // A private copy of exactly the body's bytes (a Buffer may be a view into a larger pooled buffer).
    body: new Uint8Array(body),
    headers: pairs(request.headers, true),
    query: pairs(request.query, false),
    storeId: String(input.store.id),
    pluginName: String(input.plugin.name),
    pluginVersion: Number(input.plugin.version) || 0,
    secrets: pairs(input.secrets, false),
    clockMs: input.clockMs ?? null,
  };
}

function toOutcome(result: WorkerResult, logs: LogLine[], fetches: FetchRecord[], durationMs: number): RunOutcome {
  switch (result.kind) {
    case "ok": {
      const cpuMs = Math.round(result.cpuMs * 1000) / 1000;
      const event = result.eventId == null ? {} : { eventId: result.eventId };
      const outcome: PluginResult =
        result.status === "ignore"
          ? result.invoiceId === null
            ? { status: "ignore", ...event }
            : { status: "ignore", invoiceId: result.invoiceId, ...event }
          : { status: result.status, invoiceId: result.invoiceId ?? "", ...event };
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
