// A small background loop owned by `serve`: runs one pass at start, then one pass every interval after the
// previous pass ended (never two at once), logs failures and keeps going. Each pass claims its work from
// the database, so any number of processes can run the same loop. `kick()` asks for a pass soon (work was
// just committed in this process): kicks while a pass runs are folded into one more pass after it.
// stop() waits for the pass in flight. When the last pass succeeded is observable (metrics): a loop that
// keeps failing, or is stuck in a pass, stops moving it.
export interface BackgroundLoop {
  /** A pass as soon as the one in flight (if any) ends; repeated kicks are folded into one. */
  kick(): void;
  stop(): Promise<void>;
  /** Wall-clock milliseconds at which the last pass ended without an error; null before the first. */
  lastSuccessAt(): number | null;
}

export interface LoopLogger {
  error(obj: unknown, msg: string): void;
}

export interface LoopOptions {
  /** After a kick, wait this long before the pass (more kicks fold into it); default 0. */
  kickDelayMs?: number | (() => number);
}

export function startBackgroundLoop(name: string, intervalMs: number, pass: () => Promise<void>, log: LoopLogger, options: LoopOptions = {}): BackgroundLoop {
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  let kicked = false;
  let stopped = false;
  let lastSuccess: number | null = null;
  const kickDelay = () => (typeof options.kickDelayMs === "function" ? options.kickDelayMs() : (options.kickDelayMs ?? 0));

  const tick = () => {
    timer = null;
    kicked = false;
    running = pass()
      .then(() => {
        lastSuccess = Date.now();
      })
      .catch((err: unknown) => log.error({ err, loop: name }, `${name} failed; retrying in ${Math.round(intervalMs / 1000)} s`))
      .finally(() => {
        running = null;
        if (!stopped) schedule(kicked ? kickDelay() : intervalMs);
      });
  };
  const schedule = (ms: number) => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(tick, ms);
    timer.unref(); // never the reason the process stays alive
  };
  tick();

  return {
    kick() {
      if (stopped || kicked) return;
      kicked = true;
      if (running === null) schedule(kickDelay());
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      timer = null;
      await running;
    },
    lastSuccessAt: () => lastSuccess,
  };
}
