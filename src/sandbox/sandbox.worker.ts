// Entry of one sandbox worker thread: a thin loop that waits for a job, runs it in its Lua state and
// posts the result. The thread never runs its event loop: it blocks on Atomics.wait between jobs and
// while the main thread performs a host call (getInvoice, fetch), so from Lua those calls are plain
// synchronous functions that work anywhere (inside pcall, a gsub callback or a metamethod).
import { readlinkSync } from "node:fs";
import { parentPort, receiveMessageOnPort, workerData } from "node:worker_threads";
import { LuaRuntime } from "./lua/lua.runtime.ts";
import type { HostBridge } from "./lua/lua.host.ts";
import {
  CPU_START_BYTE,
  CTL_CLAIM,
  CTL_HOST,
  CTL_JOB,
  CTL_PARKED,
  CTL_RUN,
  LogWriter,
  type FetchReply,
  type HostCall,
  type HostReply,
  type InvoiceReply,
  type Job,
  type WorkerInit,
  type WorkerMessage,
  type WorkerResult,
} from "./sandbox.protocol.ts";

/**
 * How long an idle worker keeps looking for the next job before it sleeps, when jobs have been coming
 * that quickly. The window has to cover the main thread's whole turn (it wakes for the result,
 * answers, and posts the next job), or every run pays two thread wake-ups instead of one; on a 2-vCPU
 * KVM guest that turn took 80–100 µs, and a trivial run's median fell from 149–195 µs to 88–92 µs
 * when the window went from 0.05 to 0.2 ms. A longer window gained nothing.
 */
const SPIN_MS = 0.2;
/**
 * Spinning pays only when the next job usually comes within the window; otherwise it takes a core
 * from the HTTP event loop for nothing (webhooks whose main-thread work is ~1 ms each). So the worker
 * keeps a moving share of its jobs that came within the window (or were already queued) and spins
 * only while at least half do. A job that comes while the worker sleeps still counts as within the
 * window if it would have been, so the worker starts spinning again when jobs speed up. With runs
 * 0.3 and 1 ms apart (`bench/sandbox/run.ts`, section 2) a run cost 241 and 271 µs of CPU this way,
 * 420 and 475 µs with a window always spun, 310 and 321 µs with the earlier 50 µs one.
 */
let withinWindow = 1;

const init = workerData as WorkerInit;
const port = parentPort!;
const ctl = new Int32Array(init.shared, 0, 16);
const cpuStart = new Float64Array(init.shared, CPU_START_BYTE, 1);
const logs = new LogWriter(init.shared, init.limits);
let currentRun = 0;

const post = (message: WorkerMessage): void => port.postMessage(message);
/** Atomics.pause (a CPU spin-wait hint) is newer than this project's TypeScript lib. */
const pause = (Atomics as unknown as { pause?: () => void }).pause?.bind(Atomics) ?? (() => {});
const threadCpuUs = (): number => {
  const u = process.threadCpuUsage();
  return u.user + u.system;
};

function hostCall(call: HostCall): FetchReply | InvoiceReply {
  Atomics.store(ctl, CTL_HOST, 0);
  post({ type: "host", runId: currentRun, call });
  for (;;) {
    Atomics.wait(ctl, CTL_HOST, 0);
    const received = receiveMessageOnPort(init.replyPort);
    if (received === undefined) {
      Atomics.wait(ctl, CTL_HOST, 1, 1); // flag raised before the message became visible; look again shortly
      continue;
    }
    const reply = received.message as HostReply;
    if (reply.runId === currentRun) return reply.reply;
  }
}

const bridge: HostBridge = {
  log: (description, type) => logs.write(description, type),
  logOverflow: () => logs.overflow(),
  invoice: (id) => hostCall({ op: "invoice", id }) as InvoiceReply,
  fetch: (request) => hostCall({ op: "fetch", request }) as FetchReply,
};

function nextJob(): Job {
  let idleSince = 0;
  for (;;) {
    const received = receiveMessageOnPort(init.jobPort);
    if (received !== undefined) return arrived(received.message as Job, idleSince);
    // Nothing queued: clear the flag, look once more (a job may have come in between), then wait.
    Atomics.store(ctl, CTL_JOB, 0);
    const late = receiveMessageOnPort(init.jobPort);
    if (late !== undefined) return arrived(late.message as Job, idleSince);
    const now = performance.now();
    if (idleSince === 0) idleSince = now;
    if (withinWindow >= 0.5) {
      const spinUntil = now + SPIN_MS;
      while (Atomics.load(ctl, CTL_JOB) === 0 && performance.now() < spinUntil) pause();
    }
    if (Atomics.load(ctl, CTL_JOB) === 0) {
      Atomics.store(ctl, CTL_PARKED, 1);
      Atomics.wait(ctl, CTL_JOB, 0);
      Atomics.store(ctl, CTL_PARKED, 0);
    }
  }
}

function arrived(job: Job, idleSince: number): Job {
  const within = idleSince === 0 || performance.now() - idleSince < SPIN_MS ? 1 : 0;
  withinWindow += (within - withinWindow) / 16;
  return job;
}

function threadId(): number | null {
  try {
    return Number(readlinkSync("/proc/thread-self").split("/").pop());
  } catch {
    return null; // not Linux: the pool falls back to wall time for the CPU budget
  }
}

const runtime = await LuaRuntime.create(init.limits, bridge);
post({ type: "ready", tid: threadId() });

for (;;) {
  const job = nextJob();
  // Claim the job unless the pool took it back (it was queued behind a run that blocked or ran long).
  if (Atomics.compareExchange(ctl, CTL_CLAIM, job.seq - 1, job.seq) !== job.seq - 1) continue;
  currentRun = job.runId;
  if (job.type === "check") {
    const compiled = runtime.check(job.source);
    const result: WorkerResult = compiled.ok ? { kind: "compiled" } : { kind: "compile_error", message: compiled.message, line: compiled.line };
    post({ type: "done", runId: job.runId, result, logs: [], logOverflow: false, retire: false });
    continue;
  }
  logs.reset();
  const cpu0 = threadCpuUs();
  cpuStart[0] = cpu0;
  Atomics.store(ctl, CTL_RUN, job.runId); // published after the CPU start, which the pool reads only for this run
  const { result, retire } = runtime.run(job);
  Atomics.store(ctl, CTL_RUN, 0);
  if ("cpuMs" in result) result.cpuMs = (threadCpuUs() - cpu0) / 1000;
  post({ type: "done", runId: job.runId, result, logs: logs.lines, logOverflow: logs.overflowed, retire });
  if (retire) break; // the pool terminates this thread and starts a fresh one
}
