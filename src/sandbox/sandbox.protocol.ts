// What the pool (main thread) and a sandbox worker say to each other, and the layout of the
// SharedArrayBuffer they share. The shared buffer carries the wake-up flags (jobs, host-call
// replies) and the run's log lines, so the lines written before a worker is terminated survive it.
import type { MessagePort } from "node:worker_threads";
import type { LogLine, LogType, SandboxLimits } from "./sandbox.types.ts";

export interface WorkerInit {
  shared: SharedArrayBuffer;
  jobPort: MessagePort;
  replyPort: MessagePort;
  limits: SandboxLimits;
}

export interface RunJob {
  type: "run";
  runId: number;
  /** Position in the worker's job sequence: the worker claims job `seq` only if it claimed `seq - 1` last (CTL_CLAIM). */
  seq: number;
  source: string;
  /** Numbers a source for the worker's cache of compiled chunks. */
  sourceId: number;
  method: string;
  body: Uint8Array;
  headers: [string, string][];
  query: [string, string][];
  storeId: string;
  pluginName: string;
  pluginVersion: number;
  secrets: [string, string][];
  /** RunInput.clockMs, or null for the real time. */
  clockMs: number | null;
}

export interface CheckJob {
  type: "check";
  runId: number;
  seq: number;
  source: string;
}

export type Job = RunJob | CheckJob;

export type WorkerResult =
  | { kind: "ok"; status: "pushInvoice" | "disputeInvoice" | "ignore"; invoiceId: string | null; eventId?: string | null; cpuMs: number }
  | { kind: "script_error" | "invalid_result" | "timeout" | "memory_limit" | "rejected" | "killed"; message: string; line: number | null; cpuMs: number }
  | { kind: "compiled" }
  | { kind: "compile_error"; message: string; line: number | null };

/** Worker → main, over the worker's parentPort. */
export type WorkerMessage =
  | { type: "ready"; tid: number | null }
  | { type: "done"; runId: number; result: WorkerResult; logs: LogLine[]; logOverflow: boolean; retire: boolean }
  | { type: "host"; runId: number; call: HostCall };

export type HostCall =
  | { op: "invoice"; id: string }
  | { op: "fetch"; request: FetchRequest };

export interface FetchRequest {
  url: string;
  method: string;
  headers: Record<string, string> | null;
  body: Uint8Array | null;
  timeoutMs: number | null;
}

export type FetchReply = { ok: true; status: number; headers: [string, string][]; body: Uint8Array } | { ok: false; error: string };

export type InvoiceReply = { ok: true; json: string | null } | { ok: false; error: string };

/** Main → worker, over replyPort, after which the HOST flag is raised. */
export interface HostReply {
  runId: number;
  reply: FetchReply | InvoiceReply;
}

// Int32 slots at the start of the shared buffer.
export const CTL_JOB = 0; // main sets 1 after posting a job
export const CTL_HOST = 1; // main sets 1 after posting a host-call reply
export const CTL_LOG_COUNT = 2;
export const CTL_LOG_END = 3; // byte offset after the last record
export const CTL_LOG_OVERFLOW = 4;
export const CTL_RUN = 5; // the runId the worker is running, 0 between runs
/**
 * The seq of the last job the worker claimed. The worker claims job s with compareExchange(s-1 → s);
 * the pool takes queued jobs back with compareExchange(running → last posted), after which the
 * worker skips them. Either side wins, never both.
 */
export const CTL_CLAIM = 7;
export const CTL_PARKED = 6; // 1 while the worker sleeps in Atomics.wait for a job (only then does a job need a notify)
/** Byte offset of a Float64: the worker thread's CPU time (µs) when the running run started. */
export const CPU_START_BYTE = 32;
const LOG_START = 64;
const RECORD_HEADER = 16; // f64 time, u8 type, 3 pad, u32 length

const TYPE_CODES: Record<LogType, number> = { info: 0, warning: 1, error: 2 };
const CODE_TYPES: LogType[] = ["info", "warning", "error"];

export function sharedBufferSize(limits: SandboxLimits): number {
  return LOG_START + limits.maxLogLines * (RECORD_HEADER + limits.maxLogBytes + 8) + 8;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Cuts a UTF-8 byte string to at most `max` bytes without splitting a character. */
export function truncateUtf8(bytes: Uint8Array, max: number): Uint8Array {
  if (bytes.length <= max) return bytes;
  const marker = max >= 3 ? encoder.encode("…") : new Uint8Array(0);
  let end = max - marker.length;
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  const out = new Uint8Array(end + marker.length);
  out.set(bytes.subarray(0, end));
  out.set(marker, end);
  return out;
}

/** Worker side: appends log records for the current run. */
export class LogWriter {
  private readonly ctl: Int32Array;
  private readonly view: DataView;
  private readonly bytes: Uint8Array;
  private readonly maxBytes: number;

  constructor(shared: SharedArrayBuffer, limits: SandboxLimits) {
    this.ctl = new Int32Array(shared, 0, 16);
    this.view = new DataView(shared);
    this.bytes = new Uint8Array(shared);
    this.maxBytes = limits.maxLogBytes;
  }

  /** The run's lines, sent with its result; the shared copy only matters if the worker is terminated. */
  lines: LogLine[] = [];
  overflowed = false;

  reset(): void {
    Atomics.store(this.ctl, CTL_LOG_COUNT, 0);
    Atomics.store(this.ctl, CTL_LOG_END, LOG_START);
    Atomics.store(this.ctl, CTL_LOG_OVERFLOW, 0);
    this.lines = [];
    this.overflowed = false;
  }

  write(description: Uint8Array, type: LogType): void {
    const text = truncateUtf8(description, this.maxBytes);
    const time = Date.now();
    this.lines.push({ description: decoder.decode(text), type, at: new Date(time).toISOString() });
    const at = Atomics.load(this.ctl, CTL_LOG_END);
    if (at + RECORD_HEADER + text.length > this.bytes.length) return;
    this.view.setFloat64(at, time, true);
    this.view.setUint8(at + 8, TYPE_CODES[type]);
    this.view.setUint32(at + 12, text.length, true);
    this.bytes.set(text, at + RECORD_HEADER);
    const next = at + RECORD_HEADER + text.length;
    Atomics.store(this.ctl, CTL_LOG_END, next + ((8 - (next % 8)) % 8));
    Atomics.add(this.ctl, CTL_LOG_COUNT, 1); // published last: the reader trusts only counted records
  }

  overflow(): void {
    this.overflowed = true;
    Atomics.store(this.ctl, CTL_LOG_OVERFLOW, 1);
  }
}

/** Past the line limit the last line says that lines were dropped. */
export function withOverflowNotice(lines: LogLine[], overflowed: boolean, limits: SandboxLimits): LogLine[] {
  if (!overflowed || limits.maxLogLines === 0) return lines;
  const notice: LogLine = {
    description: `log limit of ${limits.maxLogLines} lines reached; further lines were dropped`,
    type: "warning",
    at: lines.at(-1)?.at ?? new Date().toISOString(),
  };
  if (lines.length >= limits.maxLogLines) lines[lines.length - 1] = notice;
  else lines.push(notice);
  return lines;
}

/** Main side: the log lines of the run that just ended (or whose worker was just terminated). */
export function readLogs(shared: SharedArrayBuffer, limits: SandboxLimits): LogLine[] {
  const ctl = new Int32Array(shared, 0, 16);
  const view = new DataView(shared);
  const bytes = new Uint8Array(shared);
  const count = Atomics.load(ctl, CTL_LOG_COUNT);
  const lines: LogLine[] = [];
  let at = LOG_START;
  for (let i = 0; i < count; i++) {
    const time = view.getFloat64(at, true);
    const type = CODE_TYPES[view.getUint8(at + 8)] ?? "info";
    const length = view.getUint32(at + 12, true);
    const description = decoder.decode(bytes.subarray(at + RECORD_HEADER, at + RECORD_HEADER + length));
    lines.push({ description, type, at: new Date(time).toISOString() });
    const next = at + RECORD_HEADER + length;
    at = next + ((8 - (next % 8)) % 8);
  }
  return withOverflowNotice(lines, Atomics.load(ctl, CTL_LOG_OVERFLOW) === 1, limits);
}
