// PostgreSQL drivers side by side (docs/decisions/0008-postgresql-drivers.md): the reader threads' page
// statement, a prepared keyset SELECT of 101 rows (id, created_at, the stored document as text), run
//   · through pg, a named prepared statement on one Client (as the main thread's pool runs it), the
//     documents decoded into strings and then encoded into a shared slot (what a reader on pg would do,
//     src/readmodel/paging.ts writePieces);
//   · through postgres.js, prepared, `raw()` rows as src/platform/db/database.ts postgresJsPrepared reads
//     them, the documents' bytes copied into the slot;
// one connection each, with plan_cache_mode=force_generic_plan as the readers run. Two modes: serial (one
// statement in flight) and 4 in flight on the one connection (a reader with pages queued). Per side and
// mode: statements per second, this process's CPU per statement, and the PostgreSQL backend's CPU per
// statement (/proc/<backend pid>/stat, the server being on this machine). Rounds interleaved, the order
// of the sides alternating; medians reported.
//   node bench/pg-drivers/run.ts [--rounds 5] [--seconds 2] [--rows 20000] [--url postgres://postgres@127.0.0.1:5432/test]
// Talks only to 127.0.0.1: it seeds and reads the schema bench_pg_drivers there (kept between runs).
import { execSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import postgres from "postgres";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "5" },
    seconds: { type: "string", default: "2" },
    rows: { type: "string", default: "20000" },
    url: { type: "string", default: "postgres://postgres@127.0.0.1:5432/test" },
  },
});
const ROUNDS = Number(args.rounds);
const SECONDS = Number(args.seconds);
const ROWS = Number(args.rows);
const url = new URL(args.url);
if (url.hostname !== "127.0.0.1") throw new Error(`this benchmark only talks to 127.0.0.1, not ${url.hostname}`);
const SCHEMA = "bench_pg_drivers";
const LIMIT = 100;
const STORES = 4;
const CLK_TCK = Number(execSync("getconf CLK_TCK").toString().trim());

// The page statement's shape: one store's newest-first keyset page, one row past the limit.
const PAGE_SQL = `select id, created_at, body from ${SCHEMA}.docs where store_id = $1 and (created_at, id) < ($2, $3) order by created_at desc, id desc limit ${LIMIT + 1}`;
const STARTUP = `-c search_path=${SCHEMA} -c plan_cache_mode=force_generic_plan`;

async function seed(): Promise<void> {
  const c = new pg.Client({ connectionString: args.url });
  await c.connect();
  try {
    await c.query(`create schema if not exists ${SCHEMA}`);
    const have = await c.query<{ n: string }>(`select count(*) as n from ${SCHEMA}.docs`).catch(() => null);
    if (have !== null && Number(have.rows[0]!.n) === ROWS) return;
    await c.query(`drop table if exists ${SCHEMA}.docs`);
    // Stored as the read model stores documents (migration 0013): uncompressed, inline.
    await c.query(`create table ${SCHEMA}.docs (store_id text not null, id text not null, created_at int8 not null, body text not null)`);
    await c.query(`alter table ${SCHEMA}.docs alter column body set storage external`);
    await c.query(`alter table ${SCHEMA}.docs set (toast_tuple_target = 8160)`);
    // Documents of 0.3 to ~4 KiB (mean ~1.6 KiB), JSON, some of it non-ASCII.
    await c.query(
      `insert into ${SCHEMA}.docs
       select 'st_' || (g % ${STORES}), 'cus_' || lpad(g::text, 10, '0'), 1700000000000 + g * 1000,
              '{"id":"cus_' || lpad(g::text, 10, '0') || '","email":"user' || g || '@example.com","name":"Jürgen ✓ ' || g
              || '","notes":"' || repeat(md5(g::text), 8 + (g * 7919) % 112) || '","totalOrders":' || (g % 17) || '}'
       from generate_series(1, ${ROWS}) as g`,
    );
    await c.query(`create index on ${SCHEMA}.docs (store_id, created_at desc, id desc)`);
    await c.query(`vacuum analyze ${SCHEMA}.docs`);
  } finally {
    await c.end();
  }
}

/** A page's parameters: a store and a keyset position somewhere in its rows. */
function pageParams(i: number): [string, number, string] {
  const g = ROWS - ((i * 7_331) % (ROWS - 2 * LIMIT * STORES));
  return [`st_${i % STORES}`, 1700000000000 + g * 1000, `cus_${String(g).padStart(10, "0")}`];
}

// The shared slot a reader writes a page into (4 MiB, as the slots are sized for large pages).
const slot = new Uint8Array(4 * 1024 * 1024);
const encoder = new TextEncoder();

interface Side {
  name: string;
  /** Runs one page statement and writes its documents into the slot; resolves with the bytes written. */
  page(i: number): Promise<number>;
  backendPid: number;
  close(): Promise<void>;
}

async function pgSide(): Promise<Side> {
  // A pool of one connection, as each reader would have (a lone Client would queue the 4-in-flight mode's
  // statements too, but warns that doing so is deprecated).
  const c = new pg.Pool({
    connectionString: args.url,
    max: 1,
    idleTimeoutMillis: 0,
    options: STARTUP,
    types: { getTypeParser: ((oid: number, format?: "text" | "binary") => (oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format ?? "text"))) as typeof pg.types.getTypeParser },
  });
  const backendPid = (await c.query<{ pid: number }>("select pg_backend_pid() as pid")).rows[0]!.pid;
  return {
    name: "pg",
    backendPid,
    async page(i) {
      const r = await c.query<{ id: string; created_at: number; body: string }>({ name: "bench_page", text: PAGE_SQL, values: pageParams(i) });
      let at = 0;
      for (const row of r.rows) at += encoder.encodeInto(row.body, slot.subarray(at)).written;
      return at;
    },
    close: () => c.end(),
  };
}

async function postgresJsSide(): Promise<Side> {
  const sql = postgres({
    host: url.hostname,
    port: Number(url.port || 5432),
    database: url.pathname.slice(1),
    user: decodeURIComponent(url.username),
    max: 1,
    prepare: true,
    fetch_types: false,
    onnotice: () => {},
    connection: { application_name: "bench pg-drivers", options: STARTUP },
  });
  const [{ pid }] = (await sql`select pg_backend_pid() as pid`) as unknown as [{ pid: number }];
  const PG_INTEGERS = new Set([20, 21, 23]);
  return {
    name: "postgres.js",
    backendPid: pid,
    async page(i) {
      const result = await sql.unsafe(PAGE_SQL, pageParams(i), { prepare: true }).raw();
      // As postgresJsPrepared reads a row: `body` as the bytes the server sent, integers as numbers, other text as strings.
      const columns = result.columns.map((col) => ({ name: col.name, as: col.name === "body" ? "bytes" : PG_INTEGERS.has(col.type) ? "number" : "text" }));
      let at = 0;
      for (const values of result) {
        const row: Record<string, unknown> = {};
        for (let k = 0; k < columns.length; k++) {
          const value = values[k] as Buffer | null;
          const column = columns[k]!;
          row[column.name] = value === null ? null : column.as === "bytes" ? value : column.as === "number" ? Number(value.toString("latin1")) : value.toString("utf8");
        }
        const body = row.body as Buffer;
        slot.set(body, at);
        at += body.length;
      }
      return at;
    },
    close: () => sql.end(),
  };
}

/** utime + stime of a process, in microseconds. */
function procCpuUs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return ((Number(fields[11]) + Number(fields[12])) / CLK_TCK) * 1e6;
}

interface Sample {
  perSecond: number;
  clientCpuUsPerStatement: number;
  serverCpuUsPerStatement: number;
  statements: number;
}

/** Statements for SECONDS seconds, `depth` in flight on the side's one connection. */
async function measure(side: Side, depth: number, seconds = SECONDS): Promise<Sample> {
  let n = 0;
  let next = 0;
  const server0 = procCpuUs(side.backendPid);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  const worker = async () => {
    while (performance.now() < end) {
      await side.page(next++);
      n++;
    }
  };
  await Promise.all(Array.from({ length: depth }, worker));
  const elapsed = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const server = procCpuUs(side.backendPid) - server0;
  return { perSecond: (n / elapsed) * 1000, clientCpuUsPerStatement: (cpu.user + cpu.system) / n, serverCpuUsPerStatement: server / n, statements: n };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

await seed();
const sides = [await pgSide(), await postgresJsSide()];
// The two sides must produce the same bytes for a page.
for (const i of [0, 1, 2, 3, 977]) {
  const lengths = [];
  const copies = [];
  for (const side of sides) {
    const n = await side.page(i);
    lengths.push(n);
    copies.push(Buffer.from(slot.subarray(0, n)));
  }
  if (lengths[0] !== lengths[1] || !copies[0]!.equals(copies[1]!)) throw new Error(`page ${i}: the sides differ (${lengths.join(" vs ")} bytes)`);
  if (i === 0) console.log(`a page: ${LIMIT + 1} rows, ${lengths[0]} bytes of documents`);
}
for (const side of sides) await measure(side, 1, 1); // warm-up: JIT, the statement prepared on each connection

const MODES = [
  { name: "serial", depth: 1 },
  { name: "4 in flight", depth: 4 },
];
const machine = {
  cpu: execSync("lscpu | grep 'Model name'").toString().replace(/^Model name:\s*/, "").trim(),
  cpus: os.cpus().length,
  memGiB: Math.round(os.totalmem() / 2 ** 30),
  node: process.version,
  postgres: (await (async () => {
    const c = new pg.Client({ connectionString: args.url });
    await c.connect();
    const v = (await c.query<{ v: string }>("select current_setting('server_version') as v")).rows[0]!.v;
    await c.end();
    return v;
  })()),
  pg: JSON.parse(readFileSync(path.join(HERE, "../../node_modules/pg/package.json"), "utf8")).version as string,
  postgresJs: JSON.parse(readFileSync(path.join(HERE, "../../node_modules/postgres/package.json"), "utf8")).version as string,
  loadBefore: os.loadavg().map((l) => l.toFixed(2)).join(" "),
};
console.log(machine);

const samples: Record<string, Record<string, Sample[]>> = {};
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? sides : [...sides].reverse();
  for (const mode of MODES) {
    for (const side of order) {
      const s = await measure(side, mode.depth);
      ((samples[mode.name] ??= {})[side.name] ??= []).push(s);
      console.log(`round ${round + 1} ${mode.name.padEnd(11)} ${side.name.padEnd(11)} ${s.perSecond.toFixed(0).padStart(6)}/s  client ${s.clientCpuUsPerStatement.toFixed(0).padStart(5)} µs  server ${s.serverCpuUsPerStatement.toFixed(0).padStart(5)} µs CPU per statement`);
    }
  }
}
for (const side of sides) await side.close();

// Of pg's client CPU, what encoding a page's strings into the slot takes (the rest is pg's own decoding
// and row building): the documents of page 0, as strings, encoded 500 times.
const strings = (await (async () => {
  const c = new pg.Client({ connectionString: args.url, options: STARTUP });
  await c.connect();
  const r = await c.query<{ body: string }>({ text: PAGE_SQL, values: pageParams(0) });
  await c.end();
  return r.rows.map((row) => row.body);
})());
const enc0 = process.cpuUsage();
for (let k = 0; k < 500; k++) {
  let at = 0;
  for (const body of strings) at += encoder.encodeInto(body, slot.subarray(at)).written;
}
const encoded = process.cpuUsage(enc0);
const encodeCpuUsPerPage = (encoded.user + encoded.system) / 500;
console.log(`encoding a page's documents into the slot: ${encodeCpuUsPerPage.toFixed(0)} µs CPU`);

const summary: Record<string, unknown> = {};
for (const mode of MODES) {
  const m = (side: string, key: keyof Sample) => median(samples[mode.name]![side]!.map((s) => s[key]));
  const row = (key: keyof Sample) => ({ pg: m("pg", key), postgresJs: m("postgres.js", key), ratio: m("postgres.js", key) / m("pg", key) });
  summary[mode.name] = { perSecond: row("perSecond"), clientCpuUsPerStatement: row("clientCpuUsPerStatement"), serverCpuUsPerStatement: row("serverCpuUsPerStatement") };
}
const loadAfter = os.loadavg().map((l) => l.toFixed(2)).join(" ");
console.log("\nmedians of", ROUNDS, "rounds (ratio = postgres.js / pg):");
console.log(JSON.stringify(summary, null, 2));
console.log("load average after:", loadAfter);
const results = path.join(HERE, "results");
mkdirSync(results, { recursive: true });
const file = path.join(results, `${new Date().toISOString().slice(0, 16).replace(":", "")}.json`);
writeFileSync(file, JSON.stringify({ machine: { ...machine, loadAfter }, rounds: ROUNDS, seconds: SECONDS, rows: ROWS, statement: PAGE_SQL, summary, encodeCpuUsPerPage, samples }, null, 2));
console.log("written", path.relative(process.cwd(), file));
