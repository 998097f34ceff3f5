// Fixed-window counters for limits that must be charged to whoever caused them: failed sign-in attempts
// per client address, unverified webhook deliveries per store and address, verified deliveries per store.
// In memory, per process (like the read API's limiter); bounded in size, so a stranger cycling through
// keys cannot grow it without end.
export interface AttemptLimiter {
  /** Seconds until `key` may try again, or 0 when it is within its budget. */
  wait(key: string, now?: number): number;
  /** Counts one attempt against `key`. */
  hit(key: string, now?: number): void;
  /**
   * Counts one attempt before it is made: 0 when it was within the budget (and is now counted), else the
   * seconds to wait (nothing counted). Parallel attempts cannot outrun the budget: each takes its place
   * synchronously, before any of them is checked.
   */
  take(key: string, now?: number): number;
  /** Gives back an attempt `take` counted (it succeeded), if its window is still the current one. */
  refund(key: string, now?: number): void;
}

export function createAttemptLimiter(options: { max: number; windowMs: number; maxKeys?: number }): AttemptLimiter {
  const { max, windowMs } = options;
  const maxKeys = options.maxKeys ?? 100_000;
  const windows = new Map<string, { start: number; count: number }>();

  const current = (key: string, now: number) => {
    const w = windows.get(key);
    return w !== undefined && now - w.start < windowMs ? w : null;
  };

  const limiter: AttemptLimiter = {
    wait(key, now = Date.now()) {
      const w = current(key, now);
      return w !== null && w.count >= max ? Math.max(1, Math.ceil((w.start + windowMs - now) / 1000)) : 0;
    },
    take(key, now = Date.now()) {
      const wait = limiter.wait(key, now);
      if (wait === 0) limiter.hit(key, now);
      return wait;
    },
    refund(key, now = Date.now()) {
      const w = current(key, now);
      if (w !== null && w.count > 0) w.count--;
    },
    hit(key, now = Date.now()) {
      const w = current(key, now);
      if (w !== null) {
        w.count++;
        return;
      }
      if (windows.size >= maxKeys) {
        for (const [k, v] of windows) if (now - v.start >= windowMs) windows.delete(k);
        // Still full of live windows: forget the oldest (Map keeps insertion order).
        if (windows.size >= maxKeys) windows.delete(windows.keys().next().value!);
      }
      windows.delete(key);
      windows.set(key, { start: now, count: 1 });
    },
  };
  return limiter;
}

/** The address a limit is charged to: IPv6 clients by their /64, which one host usually owns whole. */
export function clientBucket(ip: string): string {
  if (!ip.includes(":") || ip.startsWith("::ffff:")) return ip.replace(/^::ffff:/, "");
  const [head] = ip.split("%");
  const parts = expandV6(head!);
  return parts === null ? ip : `${parts.slice(0, 4).join(":")}::/64`;
}

function expandV6(ip: string): string[] | null {
  const halves = ip.split("::");
  if (halves.length > 2) return null;
  const left = halves[0] === "" ? [] : halves[0]!.split(":");
  const right = halves.length === 2 && halves[1] !== "" ? halves[1]!.split(":") : [];
  const fill = halves.length === 2 ? 8 - left.length - right.length : 0;
  const parts = [...left, ...Array.from({ length: fill }, () => "0"), ...right];
  return parts.length === 8 ? parts.map((p) => p.toLowerCase().replace(/^0+(?=.)/, "")) : null;
}
