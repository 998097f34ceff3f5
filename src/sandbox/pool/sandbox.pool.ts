// The sandbox as the rest of the service sees it: a pool of worker threads, each with one Lua state,
// that runs plugins off the HTTP event loop. The pool owns every limit that needs an outside view:
// wall time (timer), CPU time (the worker thread's own CPU clock, cpu-clock.ts), and crashes.
// A run past a limit is answered at once and its worker is terminated and replaced; the main thread
// also performs the host calls (host-calls.ts) and hands the answers back to the parked worker.
//
// Jobs wait in one queue per store (a lane, lanes.ts), served in turn, and a store's jobs occupy at
// most `maxConcurrentPerStore` workers at once: one store's flood of runaway scripts waits behind its
// own runs, not in front of another store's. A store with `maxQueuedPerStore` runs already waiting is
// refused at once (`busy`) instead of queueing runs that would time out anyway.
//
// Jobs are pipelined: a worker (a slot, worker-slot.ts) may hold a few queued jobs behind the one it
// runs, so it never waits for the (busy) HTTP event loop between two runs. A queued job is taken back
// (CTL_CLAIM) and given to another worker when the running one blocks on a host call or runs long, and
// it is never lost or run twice when a worker is terminated. This file composes those parts: it hands
// jobs to workers, watches the running ones, and replaces workers that end.
import { resolveLimits } from "../sandbox.limits.ts";
import { CTL_CLAIM, CTL_RUN, readLogs, withOverflowNotice, type CheckJob, type HostCall, type RunJob, type WorkerMessage, type WorkerResult } from "../sandbox.protocol.ts";
import type { CompileCheck, LogLine, RunInput, RunOutcome, Sandbox, SandboxDeps, SandboxHost, SandboxLimits } from "../sandbox.types.ts";
import { CpuClock } from "./cpu-clock.ts";
import { answer, HostCalls } from "./host-calls.ts";
import { CHECK_LANE, toOutcome, toRunJob, type Active, type Finish, type Pending, type RunSpec } from "./jobs.ts";
import { Lanes } from "./lanes.ts";
import { anyOpen, cpuSpent, FROZEN, slotFor, startWorker, STALL_MS, stopWorker, wake, type Slot } from "./worker-slot.ts";

const WORKER_URL = new URL("../sandbox.worker.ts", import.meta.url);
/** A run may wait this long for a worker beyond its wall time (a worker starts in tens to hundreds of ms). */
const START_ALLOWANCE_MS = 2_000;
/** Without a per-thread CPU clock the budget is judged on wall time minus host waits, with this much slack. */
const WALL_CPU_FACTOR = 2;

export function createSandbox(limits?: Partial<SandboxLimits>, deps: SandboxDeps = {}): Sandbox {
  return new WorkerPool(resolveLimits(limits), deps);
}

class WorkerPool implements Sandbox {
  private readonly limits: Readonly<SandboxLimits>;
  private readonly hostCalls: HostCalls;
  private readonly workerUrl: URL;
  private readonly slots = new Set<Slot>();
  private readonly lanes = new Lanes();
  private nextRunId = 1;
  private readonly sourceIds = new Map<string, number>();
  private nextSourceId = 1;
  private closed = false;
  private startupFailures = 0;

  constructor(limits: Readonly<SandboxLimits>, deps: SandboxDeps) {
    this.limits = limits;
    this.hostCalls = new HostCalls(limits, deps.lookup);
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
    const waiting = this.lanes.drain();
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
    await this.hostCalls.close();
  }

  // ---- queue and dispatch ------------------------------------------------------------------------

  /** Queues a job in its store's lane (`front`: a job taken back from a worker, which keeps its turn). */
  private enqueue(pending: Pending, front = false): void {
    if (this.closed) {
      pending.finish({ kind: "killed", message: "the sandbox is closed", line: null, cpuMs: 0 }, [], [], 0);
      return;
    }
    if (!front && this.lanes.empty) {
      // Nobody waits: straight to a worker, if this store may have one.
      const slot = this.slotFor(pending.key);
      if (slot !== null) {
        this.give(slot, pending);
        return;
      }
    }
    const lane = this.lanes.lane(pending.key);
    if (!front && lane.queue.length >= this.limits.maxQueuedPerStore) {
      // Refused before anything is queued: the store that floods is the one that gets turned away.
      pending.refuse(`this store already has ${lane.queue.length} plugin runs waiting for the sandbox`);
      if (lane.queue.length === 0) this.lanes.drop(lane);
      return;
    }
    if (front) this.lanes.putFront(lane, pending);
    else lane.queue.push(pending);
    this.dispatch();
    if (!lane.queue.includes(pending) || pending.queueTimer) return; // started, or already waiting with its timer
    // A run that cannot get a worker (all busy, or none able to start) fails instead of waiting forever.
    const patience = this.limits.wallMs + START_ALLOWANCE_MS;
    pending.queueTimer = setTimeout(() => {
      if (!this.lanes.remove(pending)) return;
      pending.finish({ kind: "timeout", message: `no sandbox worker became free within ${patience} ms`, line: null, cpuMs: 0 }, [], [], performance.now() - pending.queuedAt);
    }, patience);
  }

  /** Gives waiting jobs to workers, lane by lane in turn, while some worker has room. */
  private dispatch(): void {
    this.lanes.serve(
      () => anyOpen(this.slots),
      (key) => this.slotFor(key),
      (slot, pending) => this.give(slot, pending),
    );
  }

  private slotFor(key: string): Slot | null {
    return slotFor(this.slots, key, this.limits.maxConcurrentPerStore);
  }

  // ---- jobs on a worker: pipelining and limits ---------------------------------------------------

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
    wake(slot);
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
    const nowNs = running ? (slot.cpu?.readNs() ?? null) : null;
    if (nowNs !== null) {
      cpuLeft = cpuMs - (nowNs / 1000 - slot.cpuStart[0]!) / 1000;
    } else if (running && slot.cpu === null) {
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
    const slot = startWorker(this.workerUrl, this.limits, reservedFor);
    this.slots.add(slot);
    slot.worker.on("message", (message: WorkerMessage) => this.onMessage(slot, message));
    slot.worker.on("error", (err) => this.onExit(slot, `the sandbox worker failed: ${err.message}`));
    slot.worker.on("exit", (code) => this.onExit(slot, `the sandbox worker exited (code ${code})`));
  }

  private onMessage(slot: Slot, message: WorkerMessage): void {
    if (slot.gone) return;
    switch (message.type) {
      case "ready":
        slot.ready = true;
        slot.reservedFor = null;
        this.startupFailures = 0;
        slot.cpu = CpuClock.open(message.tid);
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
    this.slots.delete(slot);
    return stopWorker(slot);
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
    const reply = await this.hostCalls.perform(job, call);
    if (job.settled || slot.jobs[0] !== job) return;
    job.hostTotal += performance.now() - job.hostSince;
    job.hostSince = null;
    answer(slot, runId, reply);
  }
}
