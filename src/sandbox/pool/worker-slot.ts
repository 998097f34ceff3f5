// One worker thread as the pool sees it (a slot): the thread, the buffer it shares with the main thread,
// its two ports, its CPU clock, and the jobs it holds (the running one first, then a few queued behind
// it). Here: starting and stopping a slot's worker, waking it for a new job, and choosing which slot a
// store's next job goes to. What happens to the jobs when a worker stops is the pool's business.
import { MessageChannel, Worker, type MessagePort } from "node:worker_threads";
import { CPU_START_BYTE, CTL_JOB, CTL_PARKED, CTL_RUN, sharedBufferSize, type WorkerInit } from "../sandbox.protocol.ts";
import type { SandboxLimits } from "../sandbox.types.ts";
import type { CpuClock } from "./cpu-clock.ts";
import type { Active } from "./jobs.ts";

/** Jobs a worker may hold: the one it runs and the ones queued behind it. */
export const PIPELINE_DEPTH = 3;
/** A run longer than this stops being a good one to queue behind: its queued jobs go elsewhere. */
export const STALL_MS = 5;
/** CTL_CLAIM value that no job sequence reaches: a worker being replaced claims nothing more. */
export const FROZEN = 0x3fffffff;

export interface Slot {
  worker: Worker;
  shared: SharedArrayBuffer;
  ctl: Int32Array;
  cpuStart: Float64Array;
  jobPort: MessagePort;
  replyPort: MessagePort;
  ready: boolean;
  gone: boolean;
  /** Opened when the worker is ready; null before, and where the platform has no per-thread clock. */
  cpu: CpuClock | null;
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

/** Starts a worker thread in a new slot; the slot is not ready until the worker says so. */
export function startWorker(workerUrl: URL, limits: Readonly<SandboxLimits>, reservedFor: string | null): Slot {
  const shared = new SharedArrayBuffer(sharedBufferSize(limits));
  const jobs = new MessageChannel();
  const replies = new MessageChannel();
  const init: WorkerInit = { shared, jobPort: jobs.port2, replyPort: replies.port2, limits: { ...limits, fetchAllow: [...limits.fetchAllow] } };
  const worker = new Worker(workerUrl, {
    workerData: init,
    transferList: [jobs.port2, replies.port2],
    resourceLimits: { maxOldGenerationSizeMb: 128, maxYoungGenerationSizeMb: 32, stackSizeMb: 4 },
    name: "storefront-sandbox",
  });
  jobs.port1.unref();
  replies.port1.unref();
  return {
    worker,
    shared,
    ctl: new Int32Array(shared, 0, 16),
    cpuStart: new Float64Array(shared, CPU_START_BYTE, 1),
    jobPort: jobs.port1,
    replyPort: replies.port1,
    ready: false,
    gone: false,
    cpu: null,
    seq: 0,
    revoked: 0,
    jobs: [],
    reservedFor,
  };
}

/** Marks the slot gone and terminates its worker (whatever it is doing). */
export function stopWorker(slot: Slot): Promise<number> {
  slot.gone = true;
  slot.cpu?.close();
  slot.cpu = null;
  slot.jobPort.close();
  slot.replyPort.close();
  return slot.worker.terminate();
}

/** Wakes the worker if it sleeps: a job was posted to it. */
export function wake(slot: Slot): void {
  const { ctl } = slot;
  Atomics.store(ctl, CTL_JOB, 1);
  if (Atomics.load(ctl, CTL_PARKED) === 1) Atomics.notify(ctl, CTL_JOB);
}

/** CPU milliseconds the slot's running job has used so far, when the clock can tell (else 0). */
export function cpuSpent(slot: Slot, active: Active): number {
  const now = slot.cpu?.readNs() ?? null;
  return now !== null && Atomics.load(slot.ctl, CTL_RUN) === active.runId ? now / 1e6 - slot.cpuStart[0]! / 1000 : 0;
}

/** A worker that can take a job now: started, with room, and its running job neither long nor waiting on the host. */
export function isOpen(slot: Slot, now = performance.now()): boolean {
  if (!slot.ready || slot.gone || slot.jobs.length >= PIPELINE_DEPTH) return false;
  const head = slot.jobs[0];
  return !head || (head.hostSince === null && head.hostTotal === 0 && now - head.startedAt < STALL_MS);
}

export function anyOpen(slots: Iterable<Slot>): boolean {
  const now = performance.now();
  for (const slot of slots) if (isOpen(slot, now)) return true;
  return false;
}

/**
 * The worker for a job of lane `key`: idle workers first, then queueing behind runs that are short so
 * far. A store at its cap (`maxConcurrent` workers) may only queue behind workers it already holds.
 */
export function slotFor(slots: Iterable<Slot>, key: string, maxConcurrent: number): Slot | null {
  let held = 0;
  let anyBest: Slot | null = null; // the best worker of all
  let ownBest: Slot | null = null; // the best among those already holding this store's jobs
  const now = performance.now();
  for (const slot of slots) {
    let own = !slot.ready && slot.reservedFor === key;
    for (const j of slot.jobs) if (j.pending.key === key) own = true;
    if (own) held++;
    if (!isOpen(slot, now)) continue;
    if (!anyBest || slot.jobs.length < anyBest.jobs.length) anyBest = slot;
    if (own && (!ownBest || slot.jobs.length < ownBest.jobs.length)) ownBest = slot;
  }
  return held >= maxConcurrent ? ownBest : anyBest;
}
