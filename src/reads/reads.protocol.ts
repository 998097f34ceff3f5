// Messages between the main thread and the reader threads (src/reads/reads.worker.ts).
import type { Config } from "../config.ts";
import type { ErrorCode } from "../errors.ts";
import type { ListQuery } from "../lib/list-query.ts";

export type ListName = "customers" | "invoices";

export interface ReaderInit {
  database: Config["database"];
  nice: number;
}

export interface ReadJob {
  id: number;
  list: ListName;
  storeId: string;
  query: ListQuery;
}

export type ReadReply =
  /** The page's JSON, UTF-8, in a transferred buffer. */
  | { id: number; ok: true; json: Uint8Array }
  /** An expected failure (AppError) or a bug, described: errors do not cross threads as themselves. */
  | { id: number; ok: false; error: { expected: boolean; code: ErrorCode; message: string; param?: string; dbCode?: string } }
  | { id: -1; ok: true; ready: true };
