// The default limits of CONTRACT section 6, and the merge of a caller's partial settings over them.
import os from "node:os";
import type { SandboxLimits } from "./sandbox.types.ts";

export const defaultSandboxLimits: Readonly<SandboxLimits> = Object.freeze({
  poolSize: os.availableParallelism(),
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
  const positive: (keyof SandboxLimits)[] = ["poolSize", "cpuMs", "wallMs", "memoryBytes", "fetchTimeoutMs", "fetchMaxBytes", "maxLogBytes", "maxResultBytes"];
  for (const key of positive) {
    const value = limits[key];
    if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) throw new RangeError(`sandbox limit ${key} must be a positive number, got ${String(value)}`);
  }
  for (const key of ["maxFetches", "maxLogLines"] as const) {
    const value = limits[key];
    if (!Number.isInteger(value) || value < 0) throw new RangeError(`sandbox limit ${key} must be a non-negative integer, got ${String(value)}`);
  }
  if (!Number.isInteger(limits.poolSize)) throw new RangeError(`sandbox limit poolSize must be an integer, got ${limits.poolSize}`);
  return Object.freeze(limits);
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
