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
import { type Kysely, SqliteAdapter, type Transaction } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import { type BuildRequest, pickBatch } from "./projector.batch.ts";
import { lockWithMarks, rebuildDocuments, vacuumAfterDeletes } from "./projector.postgres.ts";
import { applyBatch, type BatchBuilder, buildBatch, tablesWithMarks } from "./projector.sqlite.ts";
import { STALE_OF, type Views } from "./staleness.ts";

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

  /**
   * SQLite: both tables in one pass: their batches built in one read transaction where the builder says (a
   * reader thread: the assembly and the source reads leave the thread that answers webhooks), then written
   * here in one short transaction. A pass follows most payments of a trickle, so its fixed cost counts: one
   * statement to find the tables with marks, one build, one commit (two of each cost the projector's thread
   * twice the CPU, and the writer's thread two commits).
   */
  async function projectSqlite(everything: boolean): Promise<{ documents: number; more: boolean }> {
    const build = builder();
    // Nothing stale (a quiet service): no build, and no thread started for one.
    const marked = await tablesWithMarks(db);
    if (marked.length === 0) return { documents: 0, more: false };
    const requests: BuildRequest[] = [];
    for (const views of marked) requests.push({ views, cooling: everything ? [] : await heldBack(views), batch: passBatch(views, build === null) });
    const started = now();
    const built = build === null ? await buildBatch(db, requests) : await build(requests);
    big.remember(new Map(built.flatMap((b) => b.bodies.map(([id, body]) => [id, body.length] as const))), now() - started);
    await applyBatch(db, built);
    return { documents: built.reduce((n, b) => n + b.marks.length, 0), more: built.some((b) => b.more) };
  }

  async function project(views: Views, everything: boolean): Promise<{ documents: number; more: boolean }> {
    const cooling = everything ? [] : await heldBack(views);
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
    if (sqlite) return projectSqlite(everything);
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

