// The sandbox's public vocabulary: what a caller hands in (a plugin's source, one webhook request,
// the store's secrets, a host for invoice lookups) and what always comes back (a RunOutcome value).
import type { LookupAddress, LookupFunction } from "../platform/outbound/guarded-connect.ts";

export interface SandboxLimits {
  /** Worker threads running Lua; default os.availableParallelism(). */
  poolSize: number;
  /** CPU budget of the script itself (Lua and the host helpers it calls, not time spent waiting on fetch/getInvoice). */
  cpuMs: number;
  /** Wall time of one run including fetches; past it the worker is terminated and replaced. */
  wallMs: number;
  /** Lua memory of one run. */
  memoryBytes: number;
  maxFetches: number;
  fetchTimeoutMs: number;
  fetchMaxBytes: number;
  maxLogLines: number;
  /** Per log line, in UTF-8 bytes; longer lines are cut. */
  maxLogBytes: number;
  maxResultBytes: number;
  /** Hosts, IPs or CIDR ranges exempt from the private-address block (PLUGIN_FETCH_ALLOW), each optionally `:port`. */
  fetchAllow: string[];
  /** Workers one store's runs may occupy at once (PLUGIN_MAX_CONCURRENT_PER_STORE); default poolSize - 1, at least 1. */
  maxConcurrentPerStore: number;
  /** Runs of one store that may wait for a worker (PLUGIN_MAX_QUEUED_PER_STORE); more are refused at once as `busy`. */
  maxQueuedPerStore: number;
}

export interface PluginRequest {
  method: string;
  body: Buffer;
  headers: Record<string, string>;
  query: Record<string, string>;
}

export interface RunInput {
  /** Lua source of the plugin version. */
  source: string;
  request: PluginRequest;
  store: { id: string };
  plugin: { name: string; version: number };
  secrets: Record<string, string>;
  /**
   * The run's clock, epoch milliseconds: when given, `os.time()` and `os.date()` without a time read
   * it instead of the real time (a replay keeps the original delivery's time). `os.clock` is unaffected.
   */
  clockMs?: number;
}

/** Handed in by the caller: the sandbox knows nothing of HTTP or the database. */
export interface SandboxHost {
  /** The invoice as the list API shows it (a JSON-able object), or null when this store has no such invoice. */
  getInvoice(id: string): Promise<unknown>;
}

/** `eventId`: the provider's id of the event, by which the service applies each event once. */
export type PluginResult = { status: "pushInvoice" | "disputeInvoice"; invoiceId: string; eventId?: string } | { status: "ignore"; invoiceId?: string; eventId?: string };

export type LogType = "info" | "warning" | "error";

export interface LogLine {
  description: string;
  type: LogType;
  /** ISO 8601 time the script logged it. */
  at: string;
}

export interface FetchRecord {
  url: string;
  method: string;
  status: number | null;
  error: string | null;
  durationMs: number;
  requestBytes: number;
  responseBytes: number;
}

/** `busy`: not run at all, the store already had `maxQueuedPerStore` runs waiting (try again later). */
export type RunErrorKind = "script_error" | "invalid_result" | "timeout" | "memory_limit" | "rejected" | "killed" | "busy";

export interface RunError {
  kind: RunErrorKind;
  message: string;
  /** Line of the plugin source the error points at, when the Lua message names one. */
  line?: number;
}

export type RunOutcome =
  | { ok: true; result: PluginResult; logs: LogLine[]; fetches: FetchRecord[]; durationMs: number; cpuMs?: number }
  | { ok: false; error: RunError; logs: LogLine[]; fetches: FetchRecord[]; durationMs: number };

export type CompileCheck = { ok: true } | { ok: false; message: string; line: number | null };

export interface Sandbox {
  /** Runs one plugin against one request. Never throws for anything a script does. */
  run(input: RunInput, host: SandboxHost): Promise<RunOutcome>;
  /** Compile-only check for uploads: the syntax error with its line; binary chunks are refused. */
  check(source: string): Promise<CompileCheck> | CompileCheck;
  /** Stops every worker; runs still in flight end as `killed`. */
  close(): Promise<void>;
}

/** Small seams for tests and embedding. */
export interface SandboxDeps {
  /** DNS lookup used by `fetch` (same contract as `dns.lookup`); every address it returns is still checked. */
  lookup?: LookupFunction;
  /** Entry module of the worker threads (tests point it at a worker that crashes on purpose). */
  workerUrl?: URL;
}

export type { LookupAddress, LookupFunction };
