// The projector: brings the read model's documents up to date after the writes that made them stale have
// committed. A write marks the documents it makes stale (the triggers of migration 0017 insert their ids
// into stale_customer_views / stale_invoice_views, in the write's own transaction); the read path assembles
// a marked document from the source tables, so a stale one is never served; and here, off every writer's
// transaction and locks, each marked document is rebuilt and the marks it was rebuilt for are deleted.
//
// Why it is safe with writers and with other projectors (any process may run one):
// - the marks a pass deletes are only ones it read before reading the sources, so every change they stand
//   for is in the document it writes; a change that commits later leaves its own mark;
// - two projectors never build one document at once: on SQLite a pass is one write transaction, on
//   PostgreSQL the documents rows are locked first (SKIP LOCKED). Writers do not touch documents rows after
//   the owner's insert, so nobody waits on those locks.
import { type Kysely, SqliteAdapter, type Transaction, sql } from "kysely";
import { assembleCustomers, customerRows } from "./customer-documents.ts";
import type { Database } from "../platform/db/schema.ts";
import { assembleInvoices } from "./invoice-documents.ts";

type Executor = Kysely<Database> | Transaction<Database>;
export type Views = "customer_views" | "invoice_views";
type Stale = "stale_customer_views" | "stale_invoice_views";

/**
 * Documents rebuilt per pass at most. A customer's document holds all its invoices (a customer with
 * thousands is a megabyte): a pass takes customers up to PASS_BYTES of their documents as last stored.
 * On SQLite a pass runs on the thread that answers webhooks, statement after statement without a pause,
 * so it takes fewer customers; on PostgreSQL the server does the work and a pass only waits for it.
 */
export function passBatch(views: Views, sqlite: boolean): number {
  return views === "invoice_views" ? 200 : sqlite ? 25 : 100;
}
/** A document this large is big (its rebuilds are spaced out, see createProjector). */
const BIG_DOCUMENT_BYTES = 64 * 1024;
/** A big document waits its size divided by this (bytes per millisecond) before it is rebuilt again. */
const BYTES_PER_COOLDOWN_MS = 400;
/** Bytes of big documents one pass rebuilds at most (one document at least). */
const PASS_BYTES = 2 * 1024 * 1024;
const MAX_BIG_REMEMBERED = 10_000;
const STALE_OF: Record<Views, Stale> = { customer_views: "stale_customer_views", invoice_views: "stale_invoice_views" };

export interface ProjectorBacklog {
  /** Changes waiting to be applied (a document changed several times counts each). */
  changes: number;
  /** When the oldest waiting change was written (epoch ms), or null. */
  oldestAt: number | null;
}

export interface Projector {
  /** Rebuilds up to a batch of stale documents per table: how many it rebuilt or dropped, and whether a batch was full (more wait). */
  runOnce(): Promise<{ documents: number; more: boolean }>;
  /** Rebuilds until nothing is stale, big documents included whenever they were last rebuilt (tests, the seed). */
  drain(): Promise<number>;
  backlog(): Promise<ProjectorBacklog>;
}

export function createProjector(db: Kysely<Database>, now: () => number = Date.now): Projector {
  const sqlite = db.getExecutor().adapter instanceof SqliteAdapter;

  /**
   * Documents of a megabyte (a customer with thousands of invoices) are rebuilt at most once per their size in
   * kilobytes / 0.4 ms (3 s for 1.2 MB) and a pass takes ~2 MB of them at most: a burst of that customer's
   * payments is folded into a rebuild every few seconds (the lists assemble it meanwhile), and no pass holds
   * the event loop for long. Small documents are never held back. Remembered per process, for the big ones.
   */
  const big = new Map<string, { bytes: number; at: number }>();
  const coolingUntil = (b: { bytes: number; at: number }) => b.at + b.bytes / BYTES_PER_COOLDOWN_MS;

  function remember(bodies: Map<string, string>): void {
    const at = now();
    for (const [id, body] of bodies) {
      if (body.length >= BIG_DOCUMENT_BYTES) big.set(id, { bytes: body.length, at });
      else big.delete(id);
    }
    for (const [id, b] of big) if (big.size > MAX_BIG_REMEMBERED || coolingUntil(b) < at - 60_000) big.delete(id);
  }

  async function project(views: Views, everything: boolean): Promise<{ documents: number; more: boolean }> {
    const stale = STALE_OF[views];
    const batch = passBatch(views, sqlite);
    const t = now();
    const cooling = everything ? [] : [...big].filter(([, b]) => coolingUntil(b) > t).map(([id]) => id).slice(0, 500);
    // The oldest marks, a window of the position index (never a sort of every mark: a backlog of a bulk
    // import holds hundreds of thousands), and their documents in the order they were first marked.
    let window = db.selectFrom(stale).select(["doc_id", "pos"]).orderBy("pos").limit(batch * 8);
    if (cooling.length > 0) window = window.where("doc_id", "not in", cooling);
    const candidates = await db
      .selectFrom(window.as("w"))
      .select(["w.doc_id", sql<number>`count(*)`.as("marks")])
      .groupBy("w.doc_id")
      .orderBy(sql`min(w.pos)`)
      .limit(batch)
      .execute();
    if (candidates.length === 0) return { documents: 0, more: false };
    // Up to about PASS_BYTES of documents, one at least, by their size as remembered or as last stored.
    const stored = views === "customer_views" ? await storedSizes(candidates.filter((c) => !big.has(c.doc_id)).map((c) => c.doc_id)) : new Map<string, number>();
    let bytes = 0;
    const ids: string[] = [];
    for (const c of candidates) {
      bytes += big.get(c.doc_id)?.bytes ?? stored.get(c.doc_id) ?? 0;
      if (ids.length > 0 && bytes > PASS_BYTES) break;
      ids.push(c.doc_id);
    }
    const documents = await db.transaction().execute((tx) => (sqlite ? rebuildSqlite(tx, views, ids) : rebuildPostgres(tx, views, ids)));
    // A full batch, one cut short, or a full window of marks: more may wait.
    const marks = candidates.reduce((n, c) => n + Number(c.marks), 0);
    return { documents, more: candidates.length === batch || ids.length < candidates.length || marks === batch * 8 };
  }

  /**
   * The stored customer documents' sizes, read from each value's header, not the value: a statement of its
   * own (SQLite copies a column's whole value into the sorter of a grouped query, megabytes here).
   */
  async function storedSizes(ids: string[]): Promise<Map<string, number>> {
    if (ids.length === 0) return new Map();
    const rows = await db.selectFrom("customer_views").select(["id", sql<number | null>`octet_length(body)`.as("bytes")]).where("id", "in", ids).execute();
    return new Map(rows.map((r) => [r.id, Number(r.bytes ?? 0)]));
  }

  /**
   * SQLite: one writer. The marks read in this transaction are all the marks there are until it commits (a
   * write of another process in between makes this transaction's commit fail, and the pass is tried again),
   * so the documents are built from the sources as they are and all their marks go.
   */
  async function rebuildSqlite(tx: Transaction<Database>, views: Views, ids: string[]): Promise<number> {
    await writeBodies(tx, views, await build(tx, views, ids));
    await tx.deleteFrom(STALE_OF[views]).where("doc_id", "in", ids).execute();
    return ids.length;
  }

  /**
   * PostgreSQL: the documents rows are locked first (SKIP LOCKED: those another projector holds are left to
   * it), then their marks read, then their sources (each statement sees what committed before it, so every
   * change those marks stand for); exactly the marks read are deleted: a change that commits meanwhile keeps
   * its own mark for the next pass.
   */
  async function rebuildPostgres(tx: Transaction<Database>, views: Views, candidates: string[]): Promise<number> {
    const locked = new Set((await tx.selectFrom(views).select("id").where("id", "in", candidates).forUpdate().skipLocked().execute()).map((r) => r.id));
    const present = new Set((await tx.selectFrom(views).select("id").where("id", "in", candidates).execute()).map((r) => r.id));
    // Gone (the owner was deleted): only its marks go.
    const ids = candidates.filter((id) => locked.has(id) || !present.has(id));
    if (ids.length === 0) return 0;
    const stale = STALE_OF[views];
    const seen = await tx.selectFrom(stale).select(sql<string[] | null>`array_agg(pos)`.as("positions")).where("doc_id", "in", ids).executeTakeFirst();
    await writeBodies(tx, views, await build(tx, views, ids));
    if (seen?.positions) await tx.deleteFrom(stale).where(sql<boolean>`pos = any(${seen.positions}::bigint[])`).execute();
    return ids.length;
  }

  async function build(tx: Executor, views: Views, ids: string[]): Promise<Map<string, string>> {
    const bodies = views === "invoice_views" ? await invoiceBodies(tx, ids) : await customerBodies(tx, ids);
    remember(bodies);
    return bodies;
  }

  async function writeBodies(tx: Executor, views: Views, bodies: Map<string, string>): Promise<void> {
    if (bodies.size === 0) return;
    const bodyOf = sql.join([...bodies].map(([id, body]) => sql`when ${id} then ${body}`), sql` `);
    await tx.updateTable(views).set({ body: sql<string>`case id ${bodyOf} end` }).where("id", "in", [...bodies.keys()]).execute();
  }

  async function runOnce(everything = false): Promise<{ documents: number; more: boolean }> {
    // Invoices first: a customer's document lists its invoices, read from their source rows anyway.
    const invoices = await project("invoice_views", everything);
    const customers = await project("customer_views", everything);
    return { documents: invoices.documents + customers.documents, more: invoices.more || customers.more };
  }

  return {
    runOnce,
    async drain() {
      let total = 0;
      for (;;) {
        const { documents } = await runOnce(true);
        total += documents;
        if (documents === 0) return total;
      }
    },
    async backlog() {
      // Cheap whatever the backlog: a count, and the oldest mark found by its position (marks are written in
      // time order), never a sort of all of them.
      let changes = 0;
      let oldestAt: number | null = null;
      for (const stale of Object.values(STALE_OF)) {
        const count = await db.selectFrom(stale).select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst();
        changes += Number(count?.n ?? 0);
        const oldest = await db.selectFrom(stale).select("created_at").orderBy("pos").limit(1).executeTakeFirst();
        if (oldest !== undefined) oldestAt = oldestAt === null ? Number(oldest.created_at) : Math.min(oldestAt, Number(oldest.created_at));
      }
      return { changes, oldestAt };
    },
  };
}

/** Invoices as the list shows them, as JSON, by id (those that still exist). */
async function invoiceBodies(db: Executor, ids: string[]): Promise<Map<string, string>> {
  const rows = await db.selectFrom("invoices").selectAll().where("id", "in", ids).execute();
  const views = await assembleInvoices(db as Kysely<Database>, rows);
  return new Map(views.map((v) => [v.id, JSON.stringify(v)]));
}

/** Customers as the list shows them, as JSON, by id (those that still exist). */
async function customerBodies(db: Executor, ids: string[]): Promise<Map<string, string>> {
  const views = await assembleCustomers(db as Kysely<Database>, await customerRows(db as Kysely<Database>, ids));
  return new Map(views.map((v) => [v.id, JSON.stringify(v)]));
}
