// Bulk writers for the seed, one per dialect, behind one interface: the generator hands them rows one at a
// time, in batches of customers.
// SQLite (raw better-sqlite3 handle): prepared multi-row INSERTs into staging tables, then one ordered move
// per table with its indexes rebuilt; synchronous=OFF, foreign keys off and a large page cache only while
// loading.
// PostgreSQL: one `INSERT … SELECT * FROM unnest($1::text[], …)` per table per batch, in one transaction:
// a single round trip for thousands of rows, no COPY dependency.
import type SQLite from "better-sqlite3";
import type pg from "pg";

export const SEED_TABLES = [
  "customers",
  "customer_discord_accounts",
  "customer_sessions",
  "reviews",
  "invoices",
  "invoice_items",
  "invoice_fields",
  "invoice_logs",
] as const;
export type SeedTable = (typeof SEED_TABLES)[number];

type Value = string | number | null;

interface TableSpec {
  columns: string[];
  /** PostgreSQL array types, column by column, for unnest(). */
  pgTypes: string[];
}

// Column order is the argument order of RowSink's methods.
const TABLES: Record<SeedTable, TableSpec> = {
  customers: { columns: ["id", "store_id", "email", "created_at"], pgTypes: ["text", "text", "text", "int8"] },
  customer_discord_accounts: { columns: ["customer_id", "store_id", "discord_id", "email"], pgTypes: ["text", "text", "text", "text"] },
  customer_sessions: {
    columns: ["id", "store_id", "customer_id", "ip", "user_agent", "country", "last_used_at", "created_at"],
    pgTypes: ["text", "text", "text", "text", "text", "text", "int8", "int8"],
  },
  reviews: {
    columns: ["id", "store_id", "customer_id", "rating", "text", "product_id", "created_at", "customer_created_at"],
    pgTypes: ["text", "text", "text", "int4", "text", "text", "int8", "int8"],
  },
  invoices: {
    columns: [
      "id",
      "store_id",
      "customer_id",
      "total_cents",
      "payment_method",
      "displayed_payment_info",
      "created_on_session_id",
      "left_feedback",
      "status",
      "discord_id",
      "discord_email",
      "created_at",
      "updated_at",
    ],
    pgTypes: ["text", "text", "text", "int8", "text", "text", "text", "int4", "text", "text", "text", "int8", "int8"],
  },
  invoice_items: {
    columns: ["invoice_id", "position", "store_id", "customer_id", "product_variant_id", "quantity", "price_cents", "coupon_id", "invoice_created_at", "customer_created_at"],
    pgTypes: ["text", "int4", "text", "text", "text", "int4", "int8", "text", "int8", "int8"],
  },
  invoice_fields: { columns: ["invoice_id", "position", "key", "value", "type"], pgTypes: ["text", "int4", "text", "text", "text"] },
  // The id is assigned by the database (SQLite rowid, PostgreSQL identity), in insertion order.
  invoice_logs: { columns: ["invoice_id", "log", "type", "created_at"], pgTypes: ["text", "text", "text", "int8"] },
};

export interface LoadProgress {
  table: SeedTable;
  /** Rows moved into the store's tables so far, of `total`. */
  rows: number;
  total: number;
}

/** Receives rows; the values follow the column order of the table. */
export interface RowSink {
  row(table: SeedTable, values: Value[]): void;
  /** End of a batch of customers: lets the sink write what it holds. */
  flush(): Promise<void>;
  /** Makes every row visible in the store's tables, restores the connection's settings, refreshes statistics. */
  finish(onProgress?: (p: LoadProgress) => void): Promise<void>;
  /** Gives up after a failure: what was not yet moved into the store's tables is dropped. */
  abort(): Promise<void>;
}

/** Rows per multi-row INSERT on SQLite: fewer calls across the native boundary, under the variable limit. */
const SQLITE_ROWS_PER_STATEMENT = 64;

// The order in which staged rows enter each table. Customers and invoices in creation order, as a live store
// writes them (so a page of the newest rows is as compact on disk as in production); the other tables in
// primary-key order, which makes their primary-key index an append instead of a random insert, and keeps an
// invoice's items, fields and logs together as a checkout writes them.
const SQLITE_LOAD_ORDER: Record<SeedTable, string> = {
  customers: "rowid",
  customer_discord_accounts: "customer_id",
  customer_sessions: "id",
  reviews: "id",
  invoices: "created_at, id",
  invoice_items: "invoice_id, position",
  invoice_fields: "invoice_id, position",
  invoice_logs: "invoice_id, rowid",
};

// The documents table of each owner table, whose rows (empty documents, migration 0015) the seed writes
// itself. SQLite: laid down in id order before the owner's rows, which is the order the seed then builds
// the documents in: each document then grows in place, page after page, instead of at a random page of a
// table far bigger than the cache (at 1M customers, ~1k documents/s against several thousand); the owner's
// trigger finds its row there. PostgreSQL: written with the owner's rows when the triggers are off.
const DOCUMENTS_OF: Partial<Record<SeedTable, "customer_views" | "invoice_views">> = {
  customers: "customer_views",
  invoices: "invoice_views",
};

/**
 * SQLite: rows are appended to index-free staging tables in a private temporary database, then moved into
 * each table in one transaction per table with its secondary indexes dropped and rebuilt (a sort instead of
 * millions of random B-tree inserts). DDL is transactional in SQLite: an interrupted load leaves every
 * index in place.
 */
export function sqliteSink(handle: SQLite.Database): RowSink {
  const saved = {
    synchronous: handle.pragma("synchronous", { simple: true }) as number,
    foreignKeys: handle.pragma("foreign_keys", { simple: true }) as number,
    cacheSize: handle.pragma("cache_size", { simple: true }) as number,
    threads: handle.pragma("threads", { simple: true }) as number,
  };
  // Safe for a bulk load: each table arrives in one transaction, and a crash keeps the previous state.
  handle.pragma("synchronous = OFF");
  handle.pragma("foreign_keys = OFF");
  handle.pragma("cache_size = -1048576"); // 1 GiB while loading
  handle.pragma("threads = 4"); // lets the sorter of the ordered moves use helper threads
  // '' is a private temporary database: deleted when detached or when the process dies.
  handle.exec("attach database '' as seed_stage");
  handle.pragma("seed_stage.page_size = 65536"); // big pages: the staged rows are only appended, then scanned once
  handle.pragma("seed_stage.journal_mode = OFF");
  handle.pragma("seed_stage.synchronous = OFF");

  const writers = new Map<SeedTable, { values: Value[]; rows: number; total: number; many: SQLite.Statement; one: SQLite.Statement; width: number }>();
  for (const table of SEED_TABLES) {
    const { columns } = TABLES[table];
    handle.exec(`create table seed_stage.${table} (${columns.join(",")})`);
    const tuple = `(${columns.map(() => "?").join(",")})`;
    const head = `insert into seed_stage.${table} (${columns.join(",")}) values `;
    writers.set(table, {
      values: [],
      rows: 0,
      total: 0,
      width: columns.length,
      many: handle.prepare(head + Array.from({ length: SQLITE_ROWS_PER_STATEMENT }, () => tuple).join(",")),
      one: handle.prepare(head + tuple),
    });
  }
  let inTransaction = false;
  let closed = false;

  const restore = () => {
    if (closed) return;
    closed = true;
    if (handle.inTransaction) handle.exec("rollback");
    handle.exec("detach database seed_stage");
    handle.pragma(`synchronous = ${saved.synchronous}`);
    handle.pragma(`foreign_keys = ${saved.foreignKeys}`);
    handle.pragma(`cache_size = ${saved.cacheSize}`);
    handle.pragma(`threads = ${saved.threads}`);
  };

  return {
    row(table, values) {
      if (!inTransaction) {
        handle.exec("begin");
        inTransaction = true;
      }
      const w = writers.get(table)!;
      for (const v of values) w.values.push(v);
      w.total++;
      if (++w.rows === SQLITE_ROWS_PER_STATEMENT) {
        w.many.run(w.values);
        w.values = [];
        w.rows = 0;
      }
    },
    async flush() {
      for (const w of writers.values()) {
        for (let i = 0; i < w.rows; i++) w.one.run(w.values.slice(i * w.width, (i + 1) * w.width));
        w.values = [];
        w.rows = 0;
      }
      if (inTransaction) handle.exec("commit");
      inTransaction = false;
    },
    async finish(onProgress) {
      await this.flush();
      const total = [...writers.values()].reduce((sum, w) => sum + w.total, 0);
      let moved = 0;
      try {
        for (const table of SEED_TABLES) {
          const { columns } = TABLES[table];
          const indexes = handle
            .prepare("select name, sql from main.sqlite_master where type = 'index' and tbl_name = ? and sql is not null")
            .all(table) as { name: string; sql: string }[];
          handle.transaction(() => {
            for (const index of indexes) handle.exec(`drop index main.${index.name}`);
            const documents = DOCUMENTS_OF[table];
            if (documents !== undefined) {
              handle.exec(`insert into main.${documents} (id, store_id, created_at, body) select id, store_id, created_at, null from seed_stage.${table} order by id`);
            }
            handle.exec(
              `insert into main.${table} (${columns.join(",")}) select ${columns.join(",")} from seed_stage.${table} order by ${SQLITE_LOAD_ORDER[table]}`,
            );
            for (const index of indexes) handle.exec(index.sql);
          })();
          handle.exec(`drop table seed_stage.${table}`);
          moved += writers.get(table)!.total;
          onProgress?.({ table, rows: moved, total });
        }
      } finally {
        restore();
      }
      // Statistics for the query planner (sqlite_stat1), as SQLite recommends after a bulk change; sampled,
      // so it stays quick on millions of rows.
      const limit = handle.pragma("analysis_limit", { simple: true }) as number;
      handle.pragma("analysis_limit = 1000");
      handle.exec("analyze");
      handle.pragma(`analysis_limit = ${limit}`);
    },
    async abort() {
      inTransaction = false;
      restore();
    },
  };
}

/**
 * PostgreSQL: the seed's batches are written with the read model's triggers off for its own session
 * (`session_replication_role = replica`), which needs a superuser or that setting granted (PostgreSQL 15).
 * Every row is of a customer the seed creates, whose documents are built once the load is done
 * (rebuildReadModel): the triggers' work (lock the customer, empty its documents, one call per row) is
 * undone there. The owners' documents rows, which the triggers would have laid down, are written with
 * them. Foreign keys are not checked either, as on SQLite (seed data is consistent by construction). Other
 * sessions, the service's among them, keep their triggers. Without the right, the triggers run as for any
 * write (slower: a 20k-customer seed took 44 s through them, 33 s without).
 */

/** Whether this connection may turn its triggers off (tried in a savepoint of the open transaction). */
async function withoutTriggers(client: pg.PoolClient): Promise<boolean> {
  await client.query("savepoint seed_role");
  try {
    await client.query("set local session_replication_role = replica");
    await client.query("release savepoint seed_role");
    return true;
  } catch (err) {
    if ((err as { code?: string }).code !== "42501") throw err; // insufficient_privilege: keep the triggers
    await client.query("rollback to savepoint seed_role");
    return false;
  }
}

export function postgresSink(pool: pg.Pool): RowSink {
  const columnsOf = new Map<SeedTable, Value[][]>();
  /** Whether the batches are written with the triggers off: asked on the first batch. */
  let triggersOff: boolean | undefined;
  const reset = () => {
    for (const table of SEED_TABLES) columnsOf.set(table, TABLES[table].columns.map(() => []));
  };
  reset();
  let pending = 0;

  return {
    row(table, values) {
      const columns = columnsOf.get(table)!;
      for (let i = 0; i < values.length; i++) columns[i]!.push(values[i]!);
      pending++;
    },
    async flush() {
      if (pending === 0) return;
      const client = await pool.connect();
      try {
        await client.query("begin");
        await client.query("set local synchronous_commit = off");
        triggersOff ??= await withoutTriggers(client);
        if (triggersOff) await client.query("set local session_replication_role = replica");
        for (const table of SEED_TABLES) {
          const columns = columnsOf.get(table)!;
          if (columns[0]!.length === 0) continue;
          const spec = TABLES[table];
          const unnest = spec.pgTypes.map((t, i) => `$${i + 1}::${t}[]`).join(",");
          await client.query(`insert into ${table} (${spec.columns.join(",")}) select * from unnest(${unnest})`, columns);
          const views = DOCUMENTS_OF[table];
          if (triggersOff && views !== undefined) {
            // What the owner's trigger writes: its documents row, empty, built after the load (seed.ts).
            const at = (column: string) => columns[spec.columns.indexOf(column)]!;
            await client.query(`insert into ${views} (id, store_id, created_at, body) select *, null from unnest($1::text[], $2::text[], $3::int8[])`, [at("id"), at("store_id"), at("created_at")]);
          }
        }
        await client.query("commit");
      } catch (err) {
        await client.query("rollback").catch(() => {});
        throw err;
      } finally {
        client.release();
        reset();
        pending = 0;
      }
    },
    async finish() {
      await this.flush();
      await pool.query(`analyze ${SEED_TABLES.join(", ")}`);
    },
    async abort() {
      reset();
      pending = 0;
    },
  };
}
