// Transactions whose commit must survive an OS crash or power loss before the caller answers: a payment
// that changed an invoice tells the provider to stop retrying. Everything else keeps the cheaper default.
//
// SQLite (WAL, synchronous = NORMAL): a commit writes its frames to the write-ahead log and returns; the
// log is synced only at checkpoints. Here the log file is synced (fdatasync, off the main thread) after
// the commit, before the callers hear of it: the same frames on disk that synchronous = FULL would sync,
// without holding the event loop for the sync and without a PRAGMA on every payment. And payments that
// arrive together share a commit: the queued works run one after the other in one transaction, each in a
// savepoint of its own (a work that fails is rolled back alone), then one commit and one sync answer them
// all. The next group commits when that sync is done: the payments that finish during it join that group.
// Between two works of a group the event loop takes a turn, so a long group does not stall the others.
//
// PostgreSQL: a commit is durable unless the server says otherwise (synchronous_commit); read once, and
// only when it is off do these transactions ask for it (SET LOCAL). Concurrent commits already share the
// server's WAL flushes; payments share more than that, one statement for the writes of those ready
// together (src/payments/payment.postgres.ts).
import { type FileHandle, open } from "node:fs/promises";
import { statSync } from "node:fs";
import path from "node:path";
import { CompiledQuery, type Kysely, type Transaction, sql } from "kysely";
import type { Database } from "./schema.ts";
import { executeFixed } from "./compiled-once.ts";

export type Work<T> = (tx: Transaction<Database>) => Promise<T>;
/** Work that writes with one statement at most, given the database or a transaction to run it on. */
export type AtomicWork<T> = (db: Kysely<Database> | Transaction<Database>) => Promise<T>;

export interface DurableCommitter {
  /** Runs `work` in a transaction whose commit is on disk when the promise resolves. */
  run<T>(work: Work<T>): Promise<T>;
  /**
   * Runs `work` whose writes are one statement, atomic by itself, and whose reads before it need no
   * transaction (that statement checks what they found): durable when the promise resolves. On PostgreSQL,
   * when commits are durable by default, the statement commits on its own, without BEGIN and COMMIT (two
   * round trips fewer, and no transaction left open while the process answers others); otherwise as `run`.
   */
  runAtomic<T>(work: AtomicWork<T>): Promise<T>;
}

/** Works per shared SQLite commit at most: a group holds the one writer while it runs. */
const MAX_GROUP = 64;

export interface CommitterOptions {
  /** SQLite: called after each shared commit (the log grew: wal-checkpointer.ts wakes). */
  afterCommit?: () => void;
  /** SQLite: syncs the write-ahead log after a commit (by default fdatasync on the log file; tests hold it). */
  syncLog?: () => Promise<void>;
}

export function createDurableCommitter(db: Kysely<Database>, database: { kind: "sqlite"; file: string } | { kind: "postgres" }, options: CommitterOptions = {}): DurableCommitter {
  return database.kind === "sqlite" ? sqliteCommitter(db, database.file, options.afterCommit ?? (() => {}), options.syncLog) : postgresCommitter(db);
}

function postgresCommitter(db: Kysely<Database>): DurableCommitter {
  let durableByDefault: Promise<boolean> | null = null;
  const durable = () =>
    (durableByDefault ??= sql<{ synchronous_commit: string }>`show synchronous_commit`
      .execute(db)
      .then((r) => r.rows[0]?.synchronous_commit !== "off")
      .catch((err: unknown) => {
        durableByDefault = null;
        throw err;
      }));
  const run = async <T>(work: Work<T>): Promise<T> => {
    const byDefault = await durable();
    return db.transaction().execute(async (tx) => {
      if (!byDefault) await sql`set local synchronous_commit = on`.execute(tx);
      return work(tx);
    });
  };
  return {
    run,
    async runAtomic(work) {
      return (await durable()) ? work(db) : run(work);
    },
  };
}

/**
 * Lets the event loop take a turn. better-sqlite3's statements are synchronous, so a group's works run back to
 * back would hold the thread that answers webhooks for the whole group (tens of milliseconds for thirty
 * payments on a busy machine): deliveries arriving meanwhile went unread and the sandbox's finished runs
 * unheard, then came all at once. Between two works of a group the loop takes its turn; the transaction stays
 * open (this connection is the only writer, and Kysely's other users of it wait for the commit as before).
 */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A work's savepoint in a shared commit (compiled once: the group runs three of them per work). */
const SAVEPOINT = CompiledQuery.raw("savepoint payment");
const ROLLBACK_TO = CompiledQuery.raw("rollback to payment");
const RELEASE = CompiledQuery.raw("release payment");

interface Queued {
  work: Work<unknown>;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

function sqliteCommitter(db: Kysely<Database>, file: string, afterCommit: () => void, syncLog?: () => Promise<void>): DurableCommitter {
  const queue: Queued[] = [];
  let active = false;
  const wal = file === ":memory:" ? null : walFile(`${file}-wal`);
  const syncTheLog = syncLog ?? (() => (wal === null ? Promise.resolve() : wal.sync()));

  /** Runs a group in one transaction; each work's own outcome, or the group's failure for all. */
  async function commitGroup(group: Queued[]): Promise<({ ok: true; value: unknown } | { ok: false; err: unknown })[]> {
    if (group.length === 1) {
      try {
        return [{ ok: true, value: await db.transaction().execute(group[0]!.work) }];
      } catch (err) {
        return [{ ok: false, err }];
      }
    }
    return db.transaction().execute(async (tx) => {
      const outcomes: ({ ok: true; value: unknown } | { ok: false; err: unknown })[] = [];
      for (const [i, item] of group.entries()) {
        if (i > 0) await nextTurn();
        await executeFixed(tx, SAVEPOINT);
        try {
          outcomes.push({ ok: true, value: await item.work(tx) });
        } catch (err) {
          await executeFixed(tx, ROLLBACK_TO);
          outcomes.push({ ok: false, err });
        }
        await executeFixed(tx, RELEASE);
      }
      return outcomes;
    });
  }

  /** The last group's sync of the log, settled either way. */
  let synced: Promise<unknown> = Promise.resolve();

  async function drain(): Promise<void> {
    while (queue.length > 0) {
      // The next group commits once the last one is on disk: the payments that finish meanwhile join it.
      // Committing it during that sync gained nothing (the kernel runs the two syncs of the log one after
      // the other) and made groups of three payments on average, each commit writing its own copy of the
      // pages they share (the tails of the append-only tables, their indexes' right edges).
      await synced;
      const group = queue.splice(0, MAX_GROUP);
      let outcomes: Awaited<ReturnType<typeof commitGroup>>;
      try {
        outcomes = await commitGroup(group);
      } catch (err) {
        for (const item of group) item.reject(err);
        continue;
      }
      afterCommit();
      // Answered once the log is on disk.
      const sync = syncTheLog();
      synced = sync.catch(() => {});
      sync.then(
        () => group.forEach((item, i) => (outcomes[i]!.ok ? item.resolve((outcomes[i] as { value: unknown }).value) : item.reject((outcomes[i] as { err: unknown }).err))),
        (err: unknown) => group.forEach((item) => item.reject(err)),
      );
    }
    active = false;
  }

  function run<T>(work: Work<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      queue.push({ work: work as Work<unknown>, resolve: resolve as (v: unknown) => void, reject });
      if (active) return; // the running drain takes it next
      active = true;
      // After this turn's I/O callbacks: every payment whose run finished in this turn joins the group.
      setImmediate(() => void drain());
    });
  }
  return { run, runAtomic: run };
}

/**
 * The write-ahead log, synced on demand. Kept open; reopened when the file at the path is not the one held
 * (the log is deleted when the last connection closes, and made again), and then its directory is synced
 * once too, as SQLite does for a file it creates.
 */
function walFile(walPath: string): { sync(): Promise<void> } {
  let handle: FileHandle | null = null;
  let inode = -1;
  let opening: Promise<FileHandle> | null = null;
  async function current(): Promise<FileHandle> {
    const ino = statSync(walPath).ino;
    if (handle !== null && ino === inode) return handle;
    opening ??= (async () => {
      const old = handle;
      const next = await open(walPath, "r");
      inode = (await next.stat()).ino;
      const dir = await open(path.dirname(walPath), "r");
      try {
        await dir.sync();
      } finally {
        await dir.close();
      }
      handle = next;
      await old?.close();
      return next;
    })().finally(() => {
      opening = null;
    });
    return opening;
  }
  return {
    async sync() {
      await (await current()).datasync();
    },
  };
}
