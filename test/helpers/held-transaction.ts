// A transaction held open with its locks, as another process's work in flight: it takes its locks with
// `take`, waits until released, then finishes with `then` and commits.
import type { Kysely, Transaction } from "kysely";
import type { Database } from "../../src/platform/db/schema.ts";

export interface HeldTransaction {
  /** Lets the transaction go on to `then` and its commit. */
  release: () => void;
  /** The transaction's end (rejects with its error). */
  done: Promise<void>;
}

/** Starts the transaction and resolves once `take` has run (its locks are held). */
export async function holdTransaction<T>(db: Kysely<Database>, take: (tx: Transaction<Database>) => Promise<T>, then: (tx: Transaction<Database>, taken: T) => Promise<void> = async () => {}): Promise<HeldTransaction> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let taken!: () => void;
  const lockTaken = new Promise<void>((resolve) => (taken = resolve));
  const done = db.transaction().execute(async (tx) => {
    const value = await take(tx);
    taken();
    await released;
    await then(tx, value);
  });
  await Promise.race([lockTaken, done]);
  return { release, done };
}
