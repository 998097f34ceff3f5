// Messages between the main thread and the reader threads (src/readmodel/readers.worker.ts).
import type { Config } from "../config.ts";
import type { ErrorCode } from "../errors.ts";
import type { ListQuery } from "../lib/list-query.ts";
import type { BuildRequest } from "./projector.batch.ts";
import type { BuiltBatch } from "./projector.sqlite.ts";

export type ListName = "customers" | "invoices";

export interface ReaderInit {
  database: Config["database"];
  nice: number;
  /**
   * Memory shared with the main thread for the pages' bytes: `slotCount` slots of `slotSize` bytes, and one
   * Int32 per slot in `slotStates` (0 free, 1 holding a page until its response is done). A page written
   * into a slot reaches the socket without a new buffer per page, which on the main thread meant a full
   * garbage collection several times a second under read load, each a pause for the webhooks too.
   */
  slots: SharedArrayBuffer;
  slotStates: SharedArrayBuffer;
  slotSize: number;
  slotCount: number;
}

/** A list page to build. */
export interface PageJob {
  id: number;
  list: ListName;
  storeId: string;
  query: ListQuery;
  /** When the main thread posted it (wallClockMs), for the time it waited for the reader to take it up. */
  postedAt: number;
}

/**
 * Milliseconds on a clock that threads share (the thread's time origin plus its monotonic time), to time a
 * page's stages across the threads it passes through.
 */
export function wallClockMs(): number {
  return performance.timeOrigin + performance.now();
}

/** When the reader took a page job up and when it had the page ready (wallClockMs). */
export interface PageTimes {
  startedAt: number;
  doneAt: number;
}

/** A projector pass's batches of the read model's stale documents to build, a table each (SQLite: the projector writes them, projector.ts). */
export interface BuildJob {
  id: number;
  build: BuildRequest[];
}

export type ReadJob = PageJob | BuildJob;

export type ReadReply =
  /** The batches a BuildJob asked for, in its order. */
  | { id: number; ok: true; built: BuiltBatch[] }
  /** The page's JSON, UTF-8, in a transferred buffer (a page larger than a slot, or no slot free). */
  | ({ id: number; ok: true; json: Uint8Array } & PageTimes)
  /** The page's JSON, UTF-8, in shared slot `slot` (its first `length` bytes); the main thread frees it. */
  | ({ id: number; ok: true; slot: number; length: number } & PageTimes)
  /** An expected failure (AppError) or a bug, described: errors do not cross threads as themselves. */
  | { id: number; ok: false; error: { expected: boolean; code: ErrorCode; message: string; param?: string; dbCode?: string } }
  | { id: -1; ok: true; ready: true };
