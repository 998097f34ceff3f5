// The projector: brings the read model's documents up to date after the writes that made them stale have
// committed. A write marks the documents it makes stale (the triggers of migration 0017 insert their ids
// into stale_customer_views / stale_invoice_views, in the write's own transaction); the read path assembles
// a marked document from the source tables, so a stale one is never served; and here, off every writer's
// transaction and locks, each marked document is rebuilt and the marks it was rebuilt for are deleted.
//
// Why it is safe with writers and with other projectors (any process may run one):
// - the marks a pass deletes are only ones it read before reading the sources, so every change they stand
//   for is in the document it writes; a change that commits later leaves its own mark;
// - a document is written only by the pass that deletes its marks. On PostgreSQL the documents rows are
//   locked first (SKIP LOCKED), so two projectors never build one document at once, and the server builds
//   the documents in the statement that writes them (documents.postgres.ts). On SQLite a batch is
//   built outside any transaction (on a reader thread when there is one: buildBatch), then written in one
//   short transaction that first checks that every mark the build read is still there (applyBatch): a
//   mark gone means another projector wrote that document meanwhile, from sources at least as new, and the
//   older build is dropped. Writers do not touch documents rows after the owner's insert.
import { type Kysely, SqliteAdapter, type Transaction, sql } from "kysely";
import { assembleCustomers, customerRows } from "./customer-documents.ts";
import type { Database } from "../platform/db/schema.ts";
import { assembleInvoices, INVOICE_COLUMNS } from "./invoice-documents.ts";
import { oneOf } from "./paging.ts";
import { compiledOnce } from "../platform/db/compiled-once.ts";
import { lockWithMarks, rebuildDocuments, vacuumAfterDeletes } from "./projector.postgres.ts";
import { STALE_OF, type Views } from "./staleness.ts";
import { PATCH_FROM_BYTES, patchedCustomerBodies } from "./customer-patch.ts";

type Executor = Kysely<Database> | Transaction<Database>;

/**
 * Documents rebuilt per pass at most. A customer's document holds all its invoices (a customer with
 * thousands is a megabyte): a pass takes customers up to PASS_BYTES of their documents as last stored.
 * On SQLite a pass whose build runs on the thread that answers webhooks (no reader thread) runs statement
 * after statement without a pause there, so it takes fewer customers. Built on a reader thread, only the
 * writes are on that thread (a small document's is microseconds), and a pass of 25 could not keep up with
 * payments: each pass left a backlog, so the next ran 5 ms later with its fixed cost (picking the batch,
 * reading the marks, a transaction), about every four payments. On PostgreSQL the server does the work.
 */
export function passBatch(views: Views, builtOnWritersThread: boolean): number {
  return views === "invoice_views" ? 200 : builtOnWritersThread ? 25 : 100;
}
/** A document this large is big (its rebuilds are spaced out, see createProjector). */
const BIG_DOCUMENT_BYTES = 64 * 1024;
/** A big document waits its size divided by this (bytes per millisecond) before it is rebuilt again, */
const BYTES_PER_COOLDOWN_MS = 400;
/**
 * ... and at least this many times as long as its last build took (its share of its pass's build time, by
 * size): a big document's rebuilds take at most about 1/150 of a thread, on a slow or busy machine too, ...
 */
const REBUILD_TIME_MULTIPLE = 150;
/** ... up to this long: however slow its build, a big document is not left stale longer for it. */
const REBUILD_TIME_COOLDOWN_MAX_MS = 10_000;
/**
 * Big documents wait out their cool-down only while writes go on: once no document of the table has been
 * marked for this long, the burst is over and folding it into fewer rebuilds saves nothing more, so they
 * are rebuilt now (the bench's 32 customers of 5,000 invoices were caught up 4 to 9 s after their last
 * payment, waiting for nothing). Under a trickle slower than this, each big document's rebuild is its own
 * change's, a small share of an idle machine.
 */
export const QUIET_MS = 200;
/** Bytes of big documents one pass rebuilds at most (one document at least). */
const PASS_BYTES = 2 * 1024 * 1024;
const MAX_BIG_REMEMBERED = 10_000;

/** A big document as last rebuilt here: its size, when, and its share of that pass's build time. */
interface BigDocument {
  bytes: number;
  at: number;
  buildMs: number;
}

export interface ProjectorBacklog {
  /** Changes waiting to be applied (a document changed several times counts each). */
  changes: number;
  /** When the oldest waiting change was written (epoch ms), or null. */
  oldestAt: number | null;
}

/** What a SQLite pass builds: the documents of a batch, each with the marks read before its sources. */
export interface BuiltBatch {
  views: Views;
  /**
   * The documents built, as JSON, by id; a document whose owner is gone has none (only its marks go). A big
   * customer document patched in place is its text's UTF-8 bytes (customer-patch.ts), which a reader thread
   * hands over without a copy.
   */
  bodies: [string, string | Uint8Array][];
  /** The positions of the marks read for each document of the batch. */
  marks: [string, number[]][];
  /** More stale documents may wait. */
  more: boolean;
  /** How many of the bodies are big customer documents patched in place rather than rebuilt (customer-patch.ts). */
  patched: number;
}

/** Which documents a pass takes: up to `batch` of `views`, except ones whose rebuild is held back (`cooling`). */
export interface BuildRequest {
  views: Views;
  cooling: string[];
  batch: number;
}

/** Builds a batch off this thread (a reader thread's own connection), or null to build it here. */
export type BatchBuilder = (request: BuildRequest) => Promise<BuiltBatch>;

export interface Projector {
  /** Rebuilds up to a batch of stale documents per table: how many it rebuilt or dropped, and whether a batch was full (more wait). */
  runOnce(): Promise<{ documents: number; more: boolean }>;
  /** Rebuilds until nothing is stale, big documents included whenever they were last rebuilt (tests, the seed). */
  drain(): Promise<number>;
  backlog(): Promise<ProjectorBacklog>;
}

/**
 * Documents of a megabyte (a customer with thousands of invoices) are rebuilt at most once per their size in
 * kilobytes / 0.4 ms (3 s for 1.2 MB), and at most once per 150 times their last build's time, up to 10 s
 * (3 s for a 20 ms build; on a machine that builds it in 50 ms, 7.5 s), and a pass takes ~2 MB of them at most: a
 * burst of that customer's payments is folded into a rebuild every few seconds (the lists assemble it
 * meanwhile), their rebuilds keep to a small share of the machine however fast it is, and no pass holds
 * the event loop for long; when the writes stop, they are rebuilt at once (QUIET_MS). Small documents are
 * never held back. Remembered per process, for the big ones.
 */
function bigDocuments(now: () => number) {
  const big = new Map<string, BigDocument>();
  const coolingUntil = (b: BigDocument) => b.at + Math.max(b.bytes / BYTES_PER_COOLDOWN_MS, Math.min(b.buildMs * REBUILD_TIME_MULTIPLE, REBUILD_TIME_COOLDOWN_MAX_MS));
  return {
    /** The big documents still cooling down: a pass leaves them marked. */
    cooling(): string[] {
      const t = now();
      return [...big].filter(([, b]) => coolingUntil(b) > t).map(([id]) => id).slice(0, 500);
    },
    /** A big document's size as last built here. */
    bytes: (id: string) => big.get(id)?.bytes,
    /** The documents a pass built in `buildMs` (reading their sources, assembling, serializing), by their sizes. */
    remember(sizes: Map<string, number>, buildMs: number): void {
      const at = now();
      let total = 0;
      for (const bytes of sizes.values()) total += bytes;
      for (const [id, bytes] of sizes) {
        if (bytes >= BIG_DOCUMENT_BYTES) big.set(id, { bytes, at, buildMs: (buildMs * bytes) / total });
        else big.delete(id);
      }
      for (const [id, b] of big) if (big.size > MAX_BIG_REMEMBERED || coolingUntil(b) < at - 60_000) big.delete(id);
    },
  };
}

/**
 * The marks waiting (the backlog gauge, read at every scrape of /metrics): a count, and the oldest mark found
 * by its position (marks are written in time order), never a sort of all of them. The count starts at the
 * oldest mark's position, so it walks the positions' index over the queue alone: a plain count read the whole
 * table, and on PostgreSQL a marks table keeps the empty pages of its largest backlog until a vacuum gets the
 * lock to cut them, which a busy service rarely gives it (the bench's table kept thousands: 17 ms a count,
 * 106 ms at worst, beside the payments).
 */
export async function markBacklog(db: Executor): Promise<ProjectorBacklog> {
  let changes = 0;
  let oldestAt: number | null = null;
  for (const stale of Object.values(STALE_OF)) {
    const oldest = await db.selectFrom(stale).select(["pos", "created_at"]).orderBy("pos").limit(1).executeTakeFirst();
    if (oldest === undefined) continue;
    const count = await db
      .selectFrom(stale)
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("pos", ">=", oldest.pos)
      .executeTakeFirst();
    changes += Number(count?.n ?? 0);
    oldestAt = oldestAt === null ? Number(oldest.created_at) : Math.min(oldestAt, Number(oldest.created_at));
  }
  return { changes, oldestAt };
}

/**
 * `passes`: PostgreSQL, where a pass's transaction runs (by default `db`). The service gives it a pool of its
 * own whose statements are planned once, without their values, and by key (database.ts, BY_KEY_SETTINGS):
 * left to itself the server planned most of a pass's statements again on every pass (their cost depends on
 * the batch's values), an eighth of its CPU under payments. Each of them finds its rows by key, whatever the
 * values (a plan test checks the lock's in both modes); the pick, whose window's size and order matter,
 * stays on `db`.
 */
export function createProjector(db: Kysely<Database>, now: () => number = Date.now, builder: () => BatchBuilder | null = () => null, passes: Kysely<Database> = db): Projector {
  const sqlite = db.getExecutor().adapter instanceof SqliteAdapter;
  const big = bigDocuments(now);
  const vacuum = sqlite ? null : vacuumAfterDeletes(db, now);

  /** The big documents a pass leaves marked: those cooling down, unless no write has marked `views` for QUIET_MS. */
  async function heldBack(views: Views): Promise<string[]> {
    const cooling = big.cooling();
    if (cooling.length === 0) return cooling;
    // The newest mark, found by its position (an index's last entry).
    const newest = await db.selectFrom(STALE_OF[views]).select("created_at").orderBy("pos", "desc").limit(1).executeTakeFirst();
    return newest === undefined || now() - Number(newest.created_at) >= QUIET_MS ? [] : cooling;
  }

  async function project(views: Views, everything: boolean): Promise<{ documents: number; more: boolean }> {
    const cooling = everything ? [] : await heldBack(views);
    if (sqlite) {
      // Built where the builder says (a reader thread: the assembly and the source reads leave the thread
      // that answers webhooks), written here in one short transaction.
      const build = builder();
      // Nothing stale (a quiet service): no build, and no thread started for one.
      if (build !== null && (await db.selectFrom(STALE_OF[views]).select("pos").limit(1).executeTakeFirst()) === undefined) return { documents: 0, more: false };
      const request = { views, cooling, batch: passBatch(views, build === null) };
      const started = now();
      const built = build === null ? await buildBatch(db, request) : await build(request);
      big.remember(new Map(built.bodies.map(([id, body]) => [id, body.length])), now() - started);
      await applyBatch(db, built);
      return { documents: built.marks.length, more: built.more };
    }
    const picked = await pickBatch(db, { views, cooling, batch: passBatch(views, false) }, (id) => big.bytes(id));
    if (picked.ids.length === 0) {
      // The queue is empty: a vacuum a backlog put off (its last pass was full) is owed now.
      vacuum?.deleted(views, 0, false);
      return { documents: 0, more: false };
    }
    const { documents, marks } = await passes.transaction().execute((tx) => rebuildPostgres(tx, views, picked.ids));
    vacuum?.deleted(views, marks, picked.more);
    return { documents, more: picked.more };
  }

  /**
   * PostgreSQL: the documents rows are locked first (SKIP LOCKED: those another projector holds are left to
   * it), then their marks read, then their sources (each statement sees what committed before it, so every
   * change those marks stand for); exactly the marks read are deleted: a change that commits meanwhile keeps
   * its own mark for the next pass. The server builds the documents in the statement that writes them
   * (rebuildDocuments). Four round trips: BEGIN, the locks with the marks, the rebuild, COMMIT.
   */
  async function rebuildPostgres(tx: Transaction<Database>, views: Views, candidates: string[]): Promise<{ documents: number; marks: number }> {
    const { ids, positions } = await lockWithMarks(tx, views, candidates);
    if (ids.length === 0) return { documents: 0, marks: 0 };
    const started = now();
    big.remember(await rebuildDocuments(tx, views, ids, positions), now() - started);
    return { documents: ids.length, marks: positions.length };
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
    backlog: () => markBacklog(db),
  };
}

/**
 * The documents a pass takes: the oldest marks, a window of the position index (never a sort of every
 * mark: a backlog of a bulk import holds hundreds of thousands), their documents in the order they were
 * first marked, up to about PASS_BYTES of them (one at least) by their size as remembered (`knownBytes`)
 * or as last stored.
 */
async function pickBatch(db: Executor, request: BuildRequest, knownBytes: (id: string) => number | undefined): Promise<{ ids: string[]; more: boolean; bytes: (id: string) => number }> {
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

/**
 * SQLite: a batch of stale documents built from their sources, outside any transaction, on any connection
 * to the database (it only reads). Each document's marks are read before its sources, so the document holds
 * every change those marks stand for (each statement reads what committed before it).
 */
export async function buildBatch(db: Kysely<Database>, request: BuildRequest): Promise<BuiltBatch> {
  // One read transaction: another connection's writes make SQLite drop this connection's page cache when
  // its next read transaction starts, so statements of their own would each read their pages again.
  return db.transaction().execute((tx) => buildIn(tx, request));
}

async function buildIn(db: Transaction<Database>, request: BuildRequest): Promise<BuiltBatch> {
  const { views } = request;
  const picked = await pickBatch(db, request, () => undefined);
  if (picked.ids.length === 0) return { views, bodies: [], marks: [], more: false, patched: 0 };
  const marks = new Map<string, number[]>(picked.ids.map((id) => [id, []]));
  if (views === "invoice_views") {
    const rows = await db.selectFrom("stale_invoice_views").select(["doc_id", "pos"]).where("doc_id", "in", picked.ids).execute();
    for (const r of rows) marks.get(r.doc_id)?.push(Number(r.pos));
    return { views, bodies: [...(await invoiceBodies(db, picked.ids))], marks: [...marks], more: picked.more, patched: 0 };
  }
  // A big customer document whose every mark names an invoice is patched (customer-patch.ts).
  const rows = await db.selectFrom("stale_customer_views").select(["doc_id", "pos", "invoice_id"]).where("doc_id", "in", picked.ids).execute();
  const named = new Map<string, string[] | null>(picked.ids.filter((id) => picked.bytes(id) >= PATCH_FROM_BYTES).map((id) => [id, []]));
  for (const r of rows) {
    marks.get(r.doc_id)?.push(Number(r.pos));
    const invoices = named.get(r.doc_id);
    if (!invoices) continue;
    if (r.invoice_id === null) named.set(r.doc_id, null);
    else invoices.push(r.invoice_id);
  }
  const patchable = new Map([...named].filter((e): e is [string, string[]] => e[1] !== null && e[1].length > 0));
  const bodies = new Map<string, string | Uint8Array>(await patchedCustomerBodies(db, patchable));
  const patched = bodies.size;
  for (const [id, body] of await customerBodies(db, picked.ids.filter((id) => !bodies.has(id)))) bodies.set(id, body);
  return { views, bodies: [...bodies], marks: [...marks], more: picked.more, patched };
}

/**
 * SQLite: writes a built batch in one transaction. A document whose marks are all still there is written
 * and its marks deleted; one that lost a mark (or had none left when it was built) was written meanwhile by
 * another projector, from sources at least as new as this build's, and is left as it is (a mark that
 * remains is another pass's work). A document with no body (its owner is gone) only loses its marks.
 */
export async function applyBatch(db: Kysely<Database>, built: BuiltBatch): Promise<number> {
  if (built.marks.length === 0) return 0;
  const stale = STALE_OF[built.views];
  const positions = (list: [string, number[]][]) => JSON.stringify(list.flatMap(([, p]) => p));
  return db.transaction().execute(async (tx) => {
    const present = await tx
      .selectFrom(stale)
      .select("pos")
      .where("pos", "in", sql<number>`(select value from json_each(${positions(built.marks)}))`)
      .execute();
    const there = new Set(present.map((r) => Number(r.pos)));
    // A document with no mark left to read when it was built was written by another projector in between:
    // nothing here can tell whose build is newer, so it is that projector's.
    const whole = built.marks.filter(([, p]) => p.length > 0 && p.every((pos) => there.has(pos)));
    if (whole.length === 0) return 0;
    const ids = new Set(whole.map(([id]) => id));
    await writeBodies(tx, built.views, new Map(built.bodies.filter(([id]) => ids.has(id))));
    await tx.deleteFrom(stale).where("pos", "in", sql<number>`(select value from json_each(${positions(whole)}))`).execute();
    return whole.length;
  });
}

/**
 * A document's body written, built once per table (SQLite runs one per document: each is microseconds). A
 * body given as bytes is stored as the text they encode, as a string would be (the cast keeps the column's
 * type: bytes alone would be stored as a blob).
 */
const writeBodyOf = (views: Views) =>
  compiledOnce<{ id: string; body: string | Uint8Array }>(`${views} document`, (db, param) =>
    db.updateTable(views).set({ body: sql<string>`cast(${param((d) => d.body)} as text)` }).where("id", "=", param((d) => d.id)),
  );
const writeBody = { customer_views: writeBodyOf("customer_views"), invoice_views: writeBodyOf("invoice_views") };

/** SQLite: the bodies written, one statement per document, of one text (prepared once). */
async function writeBodies(tx: Executor, views: Views, bodies: Map<string, string | Uint8Array>): Promise<void> {
  for (const [id, body] of bodies) await writeBody[views](tx, { id, body });
}

/** Invoices as the list shows them, as JSON, by id (those that still exist). */
async function invoiceBodies(db: Executor, ids: string[]): Promise<Map<string, string>> {
  const rows = await db.selectFrom("invoices").select(INVOICE_COLUMNS).where(oneOf(db, "id", ids)).execute();
  const views = await assembleInvoices(db as Kysely<Database>, rows);
  return new Map(views.map((v) => [v.id, JSON.stringify(v)]));
}

/** Customers as the list shows them, as JSON, by id (those that still exist). */
async function customerBodies(db: Executor, ids: string[]): Promise<Map<string, string>> {
  const views = await assembleCustomers(db as Kysely<Database>, await customerRows(db as Kysely<Database>, ids));
  return new Map(views.map((v) => [v.id, JSON.stringify(v)]));
}
