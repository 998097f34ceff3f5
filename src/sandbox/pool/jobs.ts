// A job as the pool holds it: the spec a worker gets (a run or a compile check), `Pending` while it
// waits in its store's lane, `Active` once a worker holds it (queued there, or running). Also the two
// conversions at the pool's edges: a caller's RunInput into the job sent to a worker (plain copies
// only), and a worker's result back into the RunOutcome the rest of the service sees.
import type { CheckJob, RunJob, WorkerResult } from "../sandbox.protocol.ts";
import type { FetchRecord, LogLine, PluginResult, RunErrorKind, RunInput, RunOutcome, SandboxHost } from "../sandbox.types.ts";

const MAX_MESSAGE = 4096;

/** Compile checks (uploads) share one lane of their own; no store id is "\0". */
export const CHECK_LANE = "\0check";

export type RunSpec = Omit<RunJob, "runId" | "seq" | "sourceId">;
export type JobSpec = RunSpec | Omit<CheckJob, "runId" | "seq">;
export type Finish = (result: WorkerResult, logs: LogLine[], fetches: FetchRecord[], durationMs: number) => void;

export interface Pending {
  job: JobSpec;
  host: SandboxHost | null;
  finish: Finish;
  /** Ends the job without running it: its store has too many runs waiting. */
  refuse: (message: string) => void;
  /** The lane: the store's id for a run, CHECK_LANE for compile checks. */
  key: string;
  queuedAt: number;
  queueTimer: NodeJS.Timeout | null;
}

/** A job handed to a worker: queued there, or running when it is the first of the slot's list. */
export interface Active {
  runId: number;
  seq: number;
  pending: Pending;
  /** When it became the slot's first job (its wall time counts from there). */
  startedAt: number;
  hostSince: number | null;
  hostTotal: number;
  fetches: FetchRecord[];
  fetchCount: number;
  /** Created by the first fetch: aborting it ends that run's network traffic. */
  abort: AbortController | null;
  /** One timer per running job: the next moment a limit (wall time, CPU, stall) has to be looked at. */
  timer: NodeJS.Timeout | null;
  settled: boolean;
}

export function toRunJob(input: RunInput): RunSpec {
  const { request } = input;
  if (typeof input.source !== "string") throw new TypeError("source must be a string");
  const body = request.body ?? Buffer.alloc(0);
  const pairs = (record: Record<string, string> | undefined, lower: boolean): [string, string][] =>
    Object.entries(record ?? {}).map(([k, v]) => [lower ? k.toLowerCase() : k, Array.isArray(v) ? v.join(", ") : String(v)]);
  return {
    type: "run",
    source: input.source,
    method: String(request.method ?? "POST"),
    // A private copy of exactly the body's bytes (a Buffer may be a view into a larger pooled buffer).
    body: new Uint8Array(body),
    headers: pairs(request.headers, true),
    query: pairs(request.query, false),
    storeId: String(input.store.id),
    pluginName: String(input.plugin.name),
    pluginVersion: Number(input.plugin.version) || 0,
    secrets: pairs(input.secrets, false),
    clockMs: input.clockMs ?? null,
  };
}

export function toOutcome(result: WorkerResult, logs: LogLine[], fetches: FetchRecord[], durationMs: number): RunOutcome {
  switch (result.kind) {
    case "ok": {
      const cpuMs = Math.round(result.cpuMs * 1000) / 1000;
      const event = result.eventId == null ? {} : { eventId: result.eventId };
      const outcome: PluginResult =
        result.status === "ignore"
          ? result.invoiceId === null
            ? { status: "ignore", ...event }
            : { status: "ignore", invoiceId: result.invoiceId, ...event }
          : { status: result.status, invoiceId: result.invoiceId ?? "", ...event };
      return { ok: true, result: outcome, logs, fetches, durationMs, cpuMs };
    }
    case "compiled":
      return { ok: false, error: { kind: "killed", message: "unexpected compile-only answer" }, logs, fetches, durationMs };
    case "compile_error":
      return { ok: false, error: errorOf("script_error", result.message, result.line), logs, fetches, durationMs };
    case "script_error":
    case "invalid_result":
    case "timeout":
    case "memory_limit":
    case "rejected":
    case "killed":
      return { ok: false, error: errorOf(result.kind, result.message, result.line), logs, fetches, durationMs };
  }
}

function errorOf(kind: RunErrorKind, message: string, line: number | null) {
  const text = message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE)}…` : message;
  return line === null ? { kind, message: text } : { kind, message: text, line };
}
