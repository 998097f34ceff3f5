// Payments first on the main thread. Reader threads build pages off this thread, but writing a page out
// (its bytes to the socket, and the garbage they leave) still happens here, between the steps of whatever
// else is in flight. While a payment webhook is being handled, finished pages wait: the webhook's steps
// (its lookups, the sandbox's answer, its transaction) then find the thread free. A page waits at most
// `maxHoldMs` however many webhooks follow one another, so reads are delayed, never starved.
// See docs/decisions/0005-reads-off-the-money-path.md.

export interface PriorityGate {
  /** A payment request starts; call the returned function once when it has been answered (or abandoned). */
  enter(): () => void;
  /** Resolves when no payment request is in flight, or after `maxHoldMs` at most. */
  whenIdle(): Promise<void>;
  /** Payment requests in flight now. */
  readonly active: number;
}

export function createPriorityGate(maxHoldMs: number): PriorityGate {
  let active = 0;
  let waiting: (() => void)[] = [];
  const release = () => {
    const ready = waiting;
    waiting = [];
    for (const go of ready) go();
  };
  return {
    get active() {
      return active;
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
      if (active === 0 || maxHoldMs <= 0) return Promise.resolve();
      return new Promise<void>((resolve) => {
        let done = false;
        const go = () => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(go, maxHoldMs);
        waiting.push(go);
      });
    },
  };
}
