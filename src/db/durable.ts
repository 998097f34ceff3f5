// Transactions whose commit must survive an OS crash or power loss before the caller answers: a webhook
// that changed an invoice tells the provider to stop retrying. Everything else keeps the cheaper default.
// SQLite (WAL, synchronous=NORMAL) syncs the WAL only at checkpoints; these commits run with
// synchronous=FULL, which syncs the WAL on commit. PostgreSQL commits durably unless the server is set
// otherwise; these transactions insist on synchronous_commit=on whatever the server's default.
import { type Kysely, SqliteAdapter, type Transaction, sql } from "kysely";
import type { Database } from "./schema.ts";

export async function durableTransaction<T>(db: Kysely<Database>, work: (tx: Transaction<Database>) => Promise<T>): Promise<T> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) {
    // The pragma is per connection: hold the one connection for the pragma, the transaction and the reset.
    return db.connection().execute(async (conn) => {
      await sql`pragma synchronous = FULL`.execute(conn);
      try {
        return await conn.transaction().execute(work);
      } finally {
        await sql`pragma synchronous = NORMAL`.execute(conn);
      }
    });
  }
  return db.transaction().execute(async (tx) => {
    await sql`set local synchronous_commit = on`.execute(tx);
    return work(tx);
  });
}
