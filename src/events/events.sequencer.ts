// Numbers committed events for the feed. An event is written without a number in the transaction of its
// change; here, after that commits, the store's next numbers are given to its unnumbered events in a short
// transaction of their own: the counter row of the store is incremented (its lock held to this commit, so
// numbers commit in increasing order per store, without gaps) and the events are updated. A feed reader
// who has seen number N can therefore never find a smaller one later, across processes, and no payment
// waits on a store lock (docs/decisions/0004-event-feed-order.md). On PostgreSQL a payment's statement
// numbers its own events when their store's counter is free (src/payments/payment.postgres.ts); what it
// leaves unnumbered, and every other event, is numbered here.
//
// Any process may run it at any time. On PostgreSQL the events are claimed with SKIP LOCKED, so two
// sequencers take different events, and the stores' counters are locked in store order (no deadlock). On
// SQLite the one writer makes each pass atomic anyway.
import { type Kysely, sql } from "kysely";
import type { Dialect } from "../platform/db/database.ts";
import type { Database } from "../platform/db/schema.ts";

/** Events numbered per pass at most; a pass is one transaction. */
const BATCH = 500;
/** How long a reader's catch-up waits for another sequencer's pass over the same events. */
const CATCH_UP_WAIT_MS = 2_000;

export interface Sequencer {
  /** Numbers the unnumbered events (of one store, or all); returns how many it numbered. */
  run(storeId?: string): Promise<number>;
  /**
   * Numbers one store's events when it has unnumbered ones, waiting for another sequencer's pass over them
   * if one is under way: a feed or list read sees every event that committed before it.
   */
  catchUp(storeId: string): Promise<void>;
}

export function createSequencer(db: Kysely<Database>, dialect: Dialect): Sequencer {
  async function pass(storeId: string | undefined): Promise<number> {
    return db.transaction().execute(async (tx) => {
      let q = tx.selectFrom("events").select(["id", "store_id"]).where("seq", "is", null);
      if (storeId !== undefined) q = q.where("store_id", "=", storeId);
      q = q.orderBy("store_id").orderBy("pos").limit(BATCH);
      if (dialect === "postgres") q = q.forUpdate().skipLocked();
      const rows = await q.execute();
      const byStore = new Map<string, string[]>();
      for (const r of rows) byStore.set(r.store_id, [...(byStore.get(r.store_id) ?? []), r.id]);
      // Store order: every sequencer locks counters in the same order.
      for (const [store, ids] of [...byStore].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
        const { last_seq: last } = await tx
          .insertInto("event_sequences")
          .values({ store_id: store, last_seq: ids.length })
          .onConflict((oc) => oc.column("store_id").doUpdateSet({ last_seq: sql`event_sequences.last_seq + ${ids.length}` }))
          .returning("last_seq")
          .executeTakeFirstOrThrow();
        const first = Number(last) - ids.length + 1;
        // The i-th id gets first + i. One text whatever the number of ids (SQLite keeps it prepared).
        if (dialect === "postgres") {
          await sql`update events set seq = cast(${first} as bigint) + u.ord - 1 from unnest(cast(${ids} as text[])) with ordinality as u(id, ord) where events.id = u.id`.execute(tx);
        } else {
          await sql`update events set seq = ${first} + j.key from json_each(${JSON.stringify(ids)}) as j where events.id = j.value`.execute(tx);
        }
      }
      return rows.length;
    });
  }

  /**
   * Whether any event (of the store) waits for its number: one read of the unnumbered events' partial index,
   * outside a transaction. Most passes find nothing (a PostgreSQL payment numbers its own events), and a pass
   * costs a transaction of three statements; this is one. An event that commits just after it is the next
   * pass's, as it would be the next pass's after a transaction's read.
   */
  async function waiting(storeId: string | undefined): Promise<boolean> {
    let q = db.selectFrom("events").select("pos").where("seq", "is", null);
    if (storeId !== undefined) q = q.where("store_id", "=", storeId);
    return (await q.limit(1).executeTakeFirst()) !== undefined;
  }

  async function passes(storeId: string | undefined): Promise<number> {
    let total = 0;
    for (;;) {
      const n = await pass(storeId);
      total += n;
      if (n < BATCH) return total;
    }
  }

  return {
    async run(storeId) {
      return (await waiting(storeId)) ? passes(storeId) : 0;
    },
    async catchUp(storeId) {
      const unnumbered = (upTo?: number) => {
        let q = db.selectFrom("events").select("pos").where("store_id", "=", storeId).where("seq", "is", null);
        if (upTo !== undefined) q = q.where("pos", "<=", upTo);
        return q.orderBy("pos", "desc").limit(1).executeTakeFirst();
      };
      const newest = await unnumbered();
      if (newest === undefined) return;
      // Another sequencer (the background loop, another process) may be numbering some of these events in
      // a pass of its own: SKIP LOCKED passes them over here, so wait for its commit, which takes
      // milliseconds. Bounded: past it the reader gets the events numbered so far, and the feed's cursor
      // still never skips the rest.
      const deadline = Date.now() + CATCH_UP_WAIT_MS;
      for (;;) {
        await passes(storeId);
        if ((await unnumbered(newest.pos)) === undefined || Date.now() > deadline) return;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    },
  };
}
