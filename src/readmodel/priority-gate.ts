// Payments first on the main thread. Reader threads build pages off this thread, but writing a page out
// (its bytes to the socket, and the garbage they leave) still happens here, between the steps of whatever
// else is in flight. While a payment webhook is being handled and the main thread is busy, finished pages
// wait: the webhook's steps (its lookups, the sandbox's answer, its transaction) then find the thread free.
// A thread with room to spare (a webhook spends most of its time waiting on the sandbox and the disk) lets
// pages go at once: holding them there would only slow reads down, not speed payments up. A page waits at
// most `maxHoldMs` however many webhooks follow one another, so reads are delayed, never starved.
// The reads service asks it only while several pages are in flight (readers.service.ts, `holdFrom`).
// See docs/decisions/0005-reads-off-the-money-path.md.
import { performance } from "node:perf_hooks";

export interface PriorityGate {
  /** A payment request starts; call the returned function once when it has been answered (or abandoned). */
  enter(): () => void;
  /** Resolves when no payment request is in flight or the thread has room, or after `maxHoldMs` at most. */
  whenIdle(): Promise<void>;
  /** Payment requests in flight now. */
  readonly active: number;
  /** Pages waiting now. */
  readonly waiting: number;
}

/** How long a measure of the main thread's busyness stands before it is taken again. */
const BUSY_WINDOW_MS = 100;

/**
 * Whether this thread's event loop was busy at least `percent` % of the last window of about 100 ms (its
 * utilization, as performance.eventLoopUtilization counts it). 0: always busy.
 */
export function eventLoopBusy(percent: number): () => boolean {
  if (percent <= 0) return () => true;
  let mark = performance.eventLoopUtilization();
  let markAt = performance.now();
  let busy = false;
  return () => {
    const now = performance.now();
    if (now - markAt >= BUSY_WINDOW_MS) {
      busy = performance.eventLoopUtilization(mark).utilization * 100 >= percent;
      mark = performance.eventLoopUtilization();
      markAt = now;
    }
    return busy;
  };
}

/** `busy`: whether the thread is busy enough for pages to wait (by default always, when a payment is in flight). */
export function createPriorityGate(maxHoldMs: number, busy: () => boolean = () => true): PriorityGate {
  let active = 0;
  let waiting: (() => void)[] = [];
  /** Pages still held (one whose bound ran out is gone from it, though not yet from `waiting`). */
  let held = 0;
  const release = () => {
    const ready = waiting;
    waiting = [];
    for (const go of ready) go();
  };
  return {
    get active() {
      return active;
    },
    get waiting() {
      return held;
    },
    enter() {
      active++;
      let left = false;
      return () => {
        if (left) return;
        left = true;
        active--;
        if (active === 0) release();
      };
    },
    whenIdle() {
      if (active === 0 || maxHoldMs <= 0 || !busy()) return Promise.resolve();
      return new Promise<void>((resolve) => {
        let done = false;
        const go = () => {
          if (done) return;
          done = true;
          held--;
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(go, maxHoldMs);
        held++;
        waiting.push(go);
      });
    },
  };
}
