// PostgreSQL: the read model's backlog gauge (storefront_readmodel_backlog, read at every scrape of /metrics)
// costs what the queue holds, not what the marks table once held. A marks table keeps the pages of its largest
// backlog until a vacuum can cut them, and on a busy service that cut rarely gets its lock: the bench's marks
// table kept thousands of empty pages, and a plain count(*) read them all on every scrape (17 ms on average,
// 106 ms at worst, beside the payments and the reads). The count now walks the positions' index from the
// oldest mark on.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { sql } from "kysely";
import { markBacklog } from "../../src/readmodel/projector.ts";
import { createHarness, type Harness, pgSkip } from "../helpers/harness.ts";

describe("PostgreSQL: the read model's backlog gauge", { skip: pgSkip }, () => {
  let h: Harness;
  before(async () => {
    h = await createHarness("postgres");
  });
  after(async () => {
    await h?.close();
  });

  test("counts the queue through the positions' index: the empty pages a past backlog left are not read", async (t) => {
    const db = h.services.db.kysely;
    // The block count below flushes the connection's earlier counts first: pg_stat_force_next_flush is new in 15.
    const { rows: version } = await sql<{ n: string }>`select current_setting('server_version_num') as n`.execute(db);
    if (Number(version[0]!.n) < 150000) return t.skip("the block count needs PostgreSQL 15 or newer (the service runs on 13)");
    await h.services.projector.drain();
    // A past backlog: 60,000 marks, all but the newest three deleted (the projector's work), then vacuumed.
    // The three live marks sit on the table's last page, so the vacuum cannot cut the empty pages before it.
    await sql`insert into stale_invoice_views (doc_id, created_at) select 'gone-' || g, 1000 + g from generate_series(1, 60000) g`.execute(db);
    await sql`delete from stale_invoice_views where pos < (select max(pos) - 2 from stale_invoice_views)`.execute(db);
    await sql`vacuum stale_invoice_views`.execute(db);
    const { rows: size } = await sql<{ pages: string }>`select pg_relation_size('stale_invoice_views') / current_setting('block_size')::int as pages`.execute(db);
    assert.ok(Number(size[0]!.pages) > 200, `the marks table kept its pages (${size[0]!.pages})`);

    // The heap blocks the gauge's statements read, counted by the server for one transaction on one
    // connection (its earlier counts flushed first: the transaction's counter holds whatever is unflushed).
    const { backlog, blocks } = await db.connection().execute(async (c) => {
      await sql`select pg_stat_force_next_flush()`.execute(c);
      return c.transaction().execute(async (tx) => {
        const backlog = await markBacklog(tx);
        const { rows } = await sql<{ n: string }>`select pg_stat_get_xact_blocks_fetched('stale_invoice_views'::regclass) as n`.execute(tx);
        return { backlog, blocks: Number(rows[0]!.n) };
      });
    });
    assert.deepEqual(backlog, { changes: 3, oldestAt: 1000 + 59998 }, "the three marks left, and the oldest one's time");
    assert.ok(blocks <= 10, `the gauge read ${blocks} blocks of a ${size[0]!.pages}-page marks table for 3 marks`);
  });

  test("an empty queue reads as none, and a queue of both tables is counted whole", async () => {
    const db = h.services.db.kysely;
    await sql`delete from stale_invoice_views`.execute(db);
    assert.deepEqual(await markBacklog(db), { changes: 0, oldestAt: null });
    await sql`insert into stale_invoice_views (doc_id, created_at) select 'gone-i' || g, 5000 + g from generate_series(1, 1500) g`.execute(db);
    await sql`insert into stale_customer_views (doc_id, created_at) select 'gone-c' || g, 4000 + g from generate_series(1, 700) g`.execute(db);
    // Out of order, as the projector deletes: a pass takes documents, not a range of positions.
    await sql`delete from stale_invoice_views where doc_id in ('gone-i1', 'gone-i700', 'gone-i1500')`.execute(db);
    assert.deepEqual(await markBacklog(db), { changes: 1500 - 3 + 700, oldestAt: 4001 });
    await h.services.projector.drain();
    assert.deepEqual(await h.services.projector.backlog(), { changes: 0, oldestAt: null });
  });
});
