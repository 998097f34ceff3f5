// Says when something that happens often is happening too often to ignore: per key, a count over a fixed
// window, reported once when it reaches the threshold in that window. The log then gets one line per key
// and window however many times it happens (a burst of strangers' forged deliveries must not flood it),
// and no line at all for the odd occurrence. Keys are forgotten with their window, and at most `maxKeys`
// are held (the oldest windows are dropped first), so no input can grow the map without bound.
export interface BurstWatch {
  /** Counts one occurrence; the count when it has just reached the threshold in this window, else null. */
  note(key: string): number | null;
}

export interface BurstWatchOptions {
  threshold: number;
  windowMs: number;
  maxKeys?: number;
  now?: () => number;
}

export function createBurstWatch(options: BurstWatchOptions): BurstWatch {
  const { threshold, windowMs } = options;
  const maxKeys = options.maxKeys ?? 10_000;
  const now = options.now ?? Date.now;
  // Insertion order is window order: a key whose window ended is deleted and inserted again.
  const windows = new Map<string, { start: number; count: number }>();
  return {
    note(key) {
      const t = now();
      let w = windows.get(key);
      if (w === undefined || t - w.start >= windowMs) {
        windows.delete(key);
        if (windows.size >= maxKeys) windows.delete(windows.keys().next().value!);
        w = { start: t, count: 0 };
        windows.set(key, w);
      }
      w.count++;
      return w.count === threshold ? w.count : null;
    },
  };
}
