// The projector: brings the read model's documents up to date after the writes that made them stale have
// committed. A write marks the documents it makes stale (the triggers of migration 0017 insert their ids
// into stale_customer_views / stale_invoice_views, in the write's own transaction); the read path assembles
// a marked document from the source tables, so a stale one is never served; and here, off every writer's
// transaction and locks, each marked document is rebuilt and the marks it was rebuilt for are deleted.
//
// Why it is safe with writers and with other projectors (any process may run one):
// - the marks a pass deletes are exactly the ones it read before reading the sources, so every change
//   they stand for is in the document it writes; a change that commits later leaves its own mark;
// - a document is written only if every mark read for it is still there when the pass writes (otherwise
//   another projector rebuilt it meanwhile, maybe from a newer state, and this pass leaves it alone);
// - on PostgreSQL the documents rows are locked first (SKIP LOCKED): two projectors never build one
//   document at once. Writers do not touch documents rows after the owner's insert, so nobody waits.
import { type Kysely, SqliteAdapter, type Transaction, sql } from "kysely";
import { assembleCustomers, customerRows } from "../customers/customers.repository.ts";
import type { Database } from "../db/schema.ts";
import { assembleInvoices } from "../invoices/invoices.repository.ts";

type Executor = Kysely<Database> | Transaction<Database>;
export type Views = "customer_views" | "invoice_views";
type Stale = "stale_customer_views" | "stale_invoice_views";

/** Documents rebuilt per pass and table at most: a customer with thousands of invoices is one of them. */
const BATCH = 200;
const STALE_OF: Record<Views, Stale> = { customer_views: "stale_customer_views", invoice_views: "stale_invoice_views" };

export interface ProjectorBacklog {
  /** Documents waiting to be rebuilt. */
  documents: number;
  /** When the oldest waiting change was written (epoch ms), or null. */
  oldestAt: number | null;
}

export interface Projector {
  /** Rebuilds up to a batch of stale documents per table; returns how many documents it rebuilt or dropped. */
  runOnce(): Promise<number>;
  /** Rebuilds until nothing is stale (tests, the seed, shutdown). */
  drain(): Promise<number>;
  backlog(): Promise<ProjectorBacklog>;
}

export function createProjector(db: Kysely<Database>): Projector {
  const sqlite = db.getExecutor().adapter instanceof SqliteAdapter;

  async function project(views: Views): Promise<number> {
    const stale = STALE_OF[views];
    const candidates = await db
      .selectFrom(stale)
      .select("doc_id")
      .groupBy("doc_id")
      .orderBy(sql`min(pos)`)
      .limit(BATCH)
      .execute();
    if (candidates.length === 0) return 0;
    const ids = candidates.map((c) => c.doc_id);
    if (sqlite) return rebuild(db, views, ids, false);
    return db.transaction().execute((tx) => rebuild(tx, views, ids, true));
  }

  /**
   * Reads the marks of `ids`, then their sources, then writes the documents whose marks are all still
   * there and deletes those marks. PostgreSQL: inside the caller's transaction, documents locked first.
   */
  async function rebuild(exec: Executor, views: Views, candidates: string[], lock: boolean): Promise<number> {
    const stale = STALE_OF[views];
    let ids = candidates;
    if (lock) {
      const existing = await exec.selectFrom(views).select("id").where("id", "in", candidates).forUpdate().skipLocked().execute();
      const locked = new Set(existing.map((r) => r.id));
      const present = new Set((await exec.selectFrom(views).select("id").where("id", "in", candidates).execute()).map((r) => r.id));
      // Locked by another projector: left to it. Gone (the owner was deleted): only its marks go.
      ids = candidates.filter((id) => locked.has(id) || !present.has(id));
    }
    if (ids.length === 0) return 0;
    const seen = await exec.selectFrom(stale).select(["pos", "doc_id"]).where("doc_id", "in", ids).execute();
    const bodies = views === "invoice_views" ? await invoiceBodies(exec, ids) : await customerBodies(exec, ids);
    const write = async (tx: Executor) => {
      const still = new Set((await tx.selectFrom(stale).select("pos").where("pos", "in", seen.map((s) => s.pos)).execute()).map((r) => Number(r.pos)));
      const whole = new Set(ids);
      for (const s of seen) if (!still.has(Number(s.pos))) whole.delete(s.doc_id);
      const built = [...whole].filter((id) => bodies.has(id));
      if (built.length > 0) {
        const bodyOf = sql.join(built.map((id) => sql`when ${id} then ${bodies.get(id)!}`), sql` `);
        await tx.updateTable(views).set({ body: sql<string>`case id ${bodyOf} end` }).where("id", "in", built).execute();
      }
      const done = seen.filter((s) => whole.has(s.doc_id)).map((s) => s.pos);
      if (done.length > 0) await tx.deleteFrom(stale).where("pos", "in", done).execute();
      return whole.size;
    };
    return lock ? write(exec) : db.transaction().execute(write);
  }

  async function runOnce(): Promise<number> {
    // Invoices first: a customer's document lists its invoices, read from their source rows anyway.
    return (await project("invoice_views")) + (await project("customer_views"));
  }

  return {
    runOnce,
    async drain() {
      let total = 0;
      for (;;) {
        const n = await runOnce();
        total += n;
        if (n === 0) return total;
      }
    },
    async backlog() {
      let documents = 0;
      let oldestAt: number | null = null;
      for (const stale of Object.values(STALE_OF)) {
        const row = await db
          .selectFrom(stale)
          .select([sql<number>`count(distinct doc_id)`.as("n"), sql<number | null>`min(created_at)`.as("oldest")])
          .executeTakeFirst();
        documents += Number(row?.n ?? 0);
        if (row?.oldest != null) oldestAt = oldestAt === null ? Number(row.oldest) : Math.min(oldestAt, Number(row.oldest));
      }
      return { documents, oldestAt };
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
