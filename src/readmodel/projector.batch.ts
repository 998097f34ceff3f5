// Which documents a projector pass takes of a table (projector.ts): the oldest marks first, big documents
// by their size. Shared by both databases' passes.
import { type Kysely, type Transaction, sql } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import { oneOf } from "./paging.ts";
import { STALE_OF, type Views } from "./staleness.ts";

type Executor = Kysely<Database> | Transaction<Database>;

/** Bytes of big documents one pass rebuilds at most (one document at least). */
const PASS_BYTES = 2 * 1024 * 1024;

/** Which documents a pass takes of a table: up to `batch` of `views`, except ones whose rebuild is held back (`cooling`). */
export interface BuildRequest {
  views: Views;
  cooling: string[];
  batch: number;
}

/**
 * The documents a pass takes: the oldest marks, a window of the position index (never a sort of every
 * mark: a backlog of a bulk import holds hundreds of thousands), their documents in the order they were
 * first marked, up to about PASS_BYTES of them (one at least) by their size as remembered (`knownBytes`)
 * or as last stored.
 */
export async function pickBatch(db: Executor, request: BuildRequest, knownBytes: (id: string) => number | undefined): Promise<{ ids: string[]; more: boolean; bytes: (id: string) => number }> {
  const { views, cooling, batch } = request;
  let window = db.selectFrom(STALE_OF[views]).select(["doc_id", "pos"]).orderBy("pos").limit(batch * 8);
  if (cooling.length > 0) window = window.where("doc_id", "not in", cooling);
  const candidates = await db
    .selectFrom(window.as("w"))
    .select(["w.doc_id", sql<number>`count(*)`.as("marks")])
    .groupBy("w.doc_id")
    .orderBy(sql`min(w.pos)`)
    .limit(batch)
    .execute();
  if (candidates.length === 0) return { ids: [], more: false, bytes: () => 0 };
  const stored = views === "customer_views" ? await storedSizes(db, candidates.filter((c) => knownBytes(c.doc_id) === undefined).map((c) => c.doc_id)) : new Map<string, number>();
  const sizeOf = (id: string) => knownBytes(id) ?? stored.get(id) ?? 0;
  let bytes = 0;
  const ids: string[] = [];
  for (const c of candidates) {
    bytes += sizeOf(c.doc_id);
    if (ids.length > 0 && bytes > PASS_BYTES) break;
    ids.push(c.doc_id);
  }
  // A full batch, one cut short, or a full window of marks: more may wait.
  const marks = candidates.reduce((n, c) => n + Number(c.marks), 0);
  return { ids, more: candidates.length === batch || ids.length < candidates.length || marks === batch * 8, bytes: sizeOf };
}

/**
 * The stored customer documents' sizes, read from each value's header, not the value: a statement of its
 * own (SQLite copies a column's whole value into the sorter of a grouped query, megabytes here).
 */
async function storedSizes(db: Executor, ids: string[]): Promise<Map<string, number>> {
  if (ids.length === 0) return new Map();
  const rows = await db.selectFrom("customer_views").select(["id", sql<number | null>`octet_length(body)`.as("bytes")]).where(oneOf(db, "id", ids)).execute();
  return new Map(rows.map((r) => [r.id, Number(r.bytes ?? 0)]));
}

