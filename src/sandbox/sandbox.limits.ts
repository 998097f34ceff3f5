// The default limits (docs/plugins.md, "Limits"), and the merge of a caller's partial settings over them.
import os from "node:os";
import type { SandboxLimits } from "./sandbox.types.ts";

/** One store may occupy all workers but one, so another store's run always finds a worker soon. */
export const defaultConcurrentPerStore = (poolSize: number): number => Math.max(1, poolSize - 1);

export const defaultSandboxLimits: Readonly<SandboxLimits> = Object.freeze({
  poolSize: os.availableParallelism(),
  maxConcurrentPerStore: defaultConcurrentPerStore(os.availableParallelism()),
  maxQueuedPerStore: 50,
  cpuMs: 250,
  wallMs: 10_000,
  memoryBytes: 32 * 1024 * 1024,
  maxFetches: 10,
  fetchTimeoutMs: 5_000,
  fetchMaxBytes: 1024 * 1024,
  maxLogLines: 100,
  maxLogBytes: 2048,
  maxResultBytes: 64 * 1024,
  fetchAllow: Object.freeze([]) as unknown as string[],
});

/** Merges `partial` over the defaults. A nonsensical value is a programming error, so it throws. */
export function resolveLimits(partial: Partial<SandboxLimits> = {}): Readonly<SandboxLimits> {
  const limits: SandboxLimits = { ...defaultSandboxLimits, ...stripUndefined(partial), fetchAllow: [...(partial.fetchAllow ?? [])] };
  // The default cap follows the pool size the caller chose.
  if (partial.maxConcurrentPerStore === undefined) limits.maxConcurrentPerStore = defaultConcurrentPerStore(limits.poolSize);
  const positive: (keyof SandboxLimits)[] = ["poolSize", "cpuMs", "wallMs", "memoryBytes", "fetchTimeoutMs", "fetchMaxBytes", "maxLogBytes", "maxResultBytes", "maxConcurrentPerStore"];
  for (const key of positive) {
    const value = limits[key];
    if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) throw new RangeError(`sandbox limit ${key} must be a positive number, got ${String(value)}`);
  }
  for (const key of ["maxFetches", "maxLogLines", "maxQueuedPerStore"] as const) {
    const value = limits[key];
    if (!Number.isInteger(value) || value < 0) throw new RangeError(`sandbox limit ${key} must be a non-negative integer, got ${String(value)}`);
  }
  for (const key of ["poolSize", "maxConcurrentPerStore"] as const) {
    if (!Number.isInteger(limits[key])) throw new RangeError(`sandbox limit ${key} must be an integer, got ${limits[key]}`);
  }
  return Object.freeze(limits);
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
