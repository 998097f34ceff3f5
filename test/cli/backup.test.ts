// Backups taken while a real service takes payments, and restores that check what they restore: every
// payment answered 200 before the backup began is in the restored copy, with the secrets key that opens its
// plugins' secrets. SQLite through `storefront backup|restore`; PostgreSQL through the documented pg_dump and
// pg_restore, with SECRETS_KEY kept beside the dump.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import SQLite from "better-sqlite3";
import { loadConfig } from "../../src/config.ts";
import { createServices } from "../../src/services.ts";
import { runCli, type CliRun } from "../helpers/cli.ts";
import { PG_ADMIN_URL, freshDatabase, pgSkip } from "../helpers/harness.ts";
import { startServer, type ServerProcess } from "../helpers/server.ts";
import { SIGNED_PLUGIN, TEST_SECRET, sign } from "../helpers/webhook.ts";

const INVOICES = 240;
/** Invoices held back from the stream and paid once the backup has ended. */
const AFTER = 5;

function oneLineFailure(run: CliRun, pattern: RegExp): void {
  assert.notEqual(run.code, 0, "exits non-zero");
  assert.equal(run.stderr.trimEnd().split("\n").length, 1, `one line, got:\n${run.stderr}`);
  assert.doesNotMatch(run.stderr, /\n\s+at |node:internal|Error:/, "no stack trace");
  assert.match(run.stderr, pattern);
}

/** A store with the signed test plugin (its secret sealed with the configured key) and pending invoices. */
async function setup(env: Record<string, string>) {
  const services = await createServices(loadConfig({ ...env, LOG_LEVEL: "silent", PLUGIN_POOL_SIZE: "1" }));
  try {
    const store = await services.stores.createStore("backed up");
    await services.plugins.install(store.id, "pay", { source: SIGNED_PLUGIN, secrets: { key: TEST_SECRET } });
    const ids: string[] = [];
    for (let i = 0; i < INVOICES; i++) {
      // A customer each: small documents, so a payment adds a few pages to the write-ahead log and the log
      // holds many payments between two checkpoints (where a copy of the file alone would miss them).
      const customer = await services.customers.create(store.id, { email: `b${i}@example.com` });
      ids.push((await services.invoices.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 10 }] })).id);
    }
    return { storeId: store.id, invoiceIds: ids };
  } finally {
    await services.close();
  }
}

function pay(base: string, storeId: string, invoiceId: string): Promise<number> {
  const body = JSON.stringify({ type: "paid", invoiceId });
  return fetch(`${base}/api/paymentPlugins?pluginName=pay&storeId=${storeId}`, { method: "POST", headers: { "content-type": "application/json", "x-signature": sign(body) }, body }).then(
    (r) => r.status,
    () => 0,
  );
}

/**
 * Pays invoices in order from four clients until `take` resolves, then pays a few more that were held back.
 * Returns the invoices answered 200 before `take` began (the backup must hold them all) and those answered
 * 200 after it ended (the backup cannot hold them). Once `before` is taken the clients slow down, so that the
 * stream still runs while the backup, a separate process that takes a moment to start, copies the database.
 */
async function backupDuringPayments(server: ServerProcess, storeId: string, ids: string[], take: () => Promise<void>): Promise<{ before: string[]; after: string[] }> {
  const held = ids.slice(-AFTER);
  const stream = ids.slice(0, -AFTER);
  const acked: string[] = [];
  let next = 0;
  let stop = false;
  let paced = false;
  const client = async () => {
    while (!stop && next < stream.length) {
      const id = stream[next++]!;
      if ((await pay(server.url, storeId, id)) === 200) acked.push(id);
      if (paced) await new Promise((r) => setTimeout(r, 100));
    }
  };
  const clients = Array.from({ length: 4 }, client);
  while (acked.length < 40) await new Promise((r) => setTimeout(r, 20));
  const before = [...acked];
  paced = true;
  await take();
  stop = true;
  await Promise.all(clients);
  assert.ok(acked.length > before.length, "payments went on while the backup was taken");
  for (const id of held) assert.equal(await pay(server.url, storeId, id), 200, "a payment after the backup is answered");
  return { before, after: held };
}

function completedIn(file: string, ids: string[]): string[] {
  const db = new SQLite(file, { readonly: true });
  try {
    const done = new Set(db.prepare("select id from invoices where status = 'completed'").pluck().all() as string[]);
    // Each completed invoice has its transition line: the copy holds whole transactions only.
    const lines = db.prepare("select count(*) from invoice_logs where log like 'Payment confirmed%'").pluck().get() as number;
    assert.equal(lines, done.size, "one transition line per completed invoice");
    return ids.filter((id) => done.has(id));
  } finally {
    db.close();
  }
}

describe("SQLite: storefront backup and restore", () => {
  test("a backup taken under a stream of payments, restored after the data directory is lost, holds every payment answered before it began, and its key opens the secrets", { timeout: 240_000 }, async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-backup-"));
    // No SECRETS_KEY: the key is the file beside the database, which the backup carries beside its copy.
    const env = { DATABASE_URL: `sqlite:${path.join(dir, "data", "storefront.db")}`, SECRETS_KEY: "" };
    const backup = path.join(dir, "backups", "nightly.db");
    try {
      const { storeId, invoiceIds } = await setup(env);
      const server = await startServer({ ...env, WEBHOOK_RATE_LIMIT_MAX: "100000", PLUGIN_POOL_SIZE: "2" });
      // A reader that stays open (as a long page or a slow backup does) keeps every commit after it in the
      // write-ahead log: no checkpoint can move them into the database file, which alone (`cp`) misses them.
      const reader = new SQLite(path.join(dir, "data", "storefront.db"), { readonly: true });
      reader.exec("begin");
      reader.prepare("select count(*) from stores").get();
      let run: CliRun | null = null;
      let before: string[] = [];
      let after: string[] = [];
      try {
        ({ before, after } = await backupDuringPayments(server, storeId, invoiceIds, async () => {
          run = await runCli(["backup", backup, "--json"], { env });
        }));
        const taken = run! as CliRun;
        assert.equal(taken.code, 0, taken.stderr);
        const result = JSON.parse(taken.stdout) as { file: string; secretsKey: { source: string; file: string } };
        assert.deepEqual(result.secretsKey, { source: "file", file: `${backup}.secrets.key` });
        assert.equal(statSync(`${backup}.secrets.key`).mode & 0o777, 0o600, "the key's copy is readable by its owner only");
        assert.deepEqual(completedIn(backup, before), before, "every payment answered before the backup began is in it");
        oneLineFailure(await runCli(["restore", backup], { env }), /a storefront serve is using the database: stop it before restoring/);
      } finally {
        reader.close();
        await server.stop();
      }
      rmSync(path.join(dir, "data"), { recursive: true, force: true }); // the disk is lost: database, log and key

      const restored = await runCli(["restore", backup, "--json"], { env });
      assert.equal(restored.code, 0, restored.stderr);
      assert.equal((JSON.parse(restored.stdout) as { previous: unknown }).previous, null);
      const again = await startServer({ ...env, PLUGIN_POOL_SIZE: "1" });
      try {
        const restoredDb = path.join(dir, "data", "storefront.db");
        assert.deepEqual(completedIn(restoredDb, before), before, "the restored copy holds every payment answered before the backup began");
        assert.deepEqual(completedIn(restoredDb, after), [], "invoices paid after the backup are pending again in the restored copy");
        assert.equal(await pay(again.url, storeId, after[0]!), 200, "the restored key opens the plugin's secret: a signed payment verifies");
      } finally {
        await again.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("restore refuses a damaged backup, one from a newer release, and one whose secrets the key does not open, changing nothing", { timeout: 120_000 }, async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-restore-"));
    const db = path.join(dir, "live.db");
    const env = { DATABASE_URL: `sqlite:${db}`, SECRETS_KEY: randomBytes(32).toString("hex") };
    try {
      await setup(env);
      const good = path.join(dir, "good.db");
      const taken = await runCli(["backup", good], { env });
      assert.equal(taken.code, 0, taken.stderr);
      assert.match(taken.stdout, /secrets key: SECRETS_KEY in this environment, not in the backup/);
      assert.ok(!existsSync(`${good}.secrets.key`), "a key from the environment is not copied");
      const live = readFileSync(db);

      const damaged = path.join(dir, "damaged.db");
      const bytes = readFileSync(good);
      bytes.fill(0x5a, 4096 * 3, 4096 * 6); // pages of tables and indexes overwritten
      writeFileSync(damaged, bytes);
      oneLineFailure(await runCli(["restore", damaged], { env }), /damaged\.db fails SQLite's integrity check .*not restored/);

      const newer = path.join(dir, "newer.db");
      writeFileSync(newer, readFileSync(good));
      const handle = new SQLite(newer);
      handle.prepare("insert into kysely_migration (name, timestamp) values ('9999_from_the_future', '')").run();
      handle.close();
      oneLineFailure(await runCli(["restore", newer], { env }), /newer\.db was taken from a newer release \(9999_from_the_future\)/);

      oneLineFailure(await runCli(["restore", good], { env: { ...env, SECRETS_KEY: randomBytes(32).toString("hex") } }), /the secrets in .*good\.db do not open with SECRETS_KEY/);

      const check = await runCli(["restore", good, "--check"], { env });
      assert.equal(check.code, 0, check.stderr);
      assert.match(check.stdout, /can be restored: integrity ok, .*nothing was changed/);
      assert.ok(readFileSync(db).equals(live), "the live database is untouched by every refusal and by --check");
      assert.deepEqual(
        (await import("node:fs")).readdirSync(dir).filter((f) => f.includes("restoring") || f.includes("before-restore")),
        [],
        "no staged copy is left behind",
      );

      const restored = await runCli(["restore", good], { env });
      assert.equal(restored.code, 0, restored.stderr);
      assert.match(restored.stdout, new RegExp(`previous database ${db.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}\\.before-restore-`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

function sh(command: string, args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out }));
  });
}

describe("PostgreSQL: the documented pg_dump and pg_restore, with the key kept beside the dump", { skip: pgSkip }, () => {
  test("a dump taken under a stream of payments, restored into an emptied schema, holds every payment answered before it began; storefront backup points to the procedure", { timeout: 240_000 }, async () => {
    const database = await freshDatabase("postgres");
    const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-pgdump-"));
    const env = { DATABASE_URL: database.url, SECRETS_KEY: randomBytes(32).toString("hex") };
    const schema = /search_path=(\w+)/.exec(decodeURIComponent(database.url))![1]!;
    const admin = new URL(PG_ADMIN_URL);
    const connection = ["-h", admin.hostname, "-p", admin.port || "5432", "-U", decodeURIComponent(admin.username), "-d", admin.pathname.slice(1)];
    const dump = path.join(dir, "storefront.dump");
    try {
      oneLineFailure(await runCli(["backup", path.join(dir, "x.db")], { env }), /PostgreSQL is backed up with pg_dump .*SECRETS_KEY/);
      const { storeId, invoiceIds } = await setup(env);
      const server = await startServer({ ...env, WEBHOOK_RATE_LIMIT_MAX: "100000", PLUGIN_POOL_SIZE: "2" });
      let before: string[];
      let after: string[];
      try {
        ({ before, after } = await backupDuringPayments(server, storeId, invoiceIds, async () => {
          const dumped = await sh("pg_dump", [...connection, "--format=custom", `--schema=${schema}`, "--file", dump]);
          assert.equal(dumped.code, 0, dumped.out);
        }));
      } finally {
        await server.stop();
      }
      const dropped = await sh("psql", [...connection, "-c", `drop schema ${schema} cascade`]);
      assert.equal(dropped.code, 0, dropped.out);
      const restored = await sh("pg_restore", [...connection, "--no-owner", dump]);
      assert.equal(restored.code, 0, restored.out);
      const again = await startServer({ ...env, PLUGIN_POOL_SIZE: "1" });
      try {
        const services = await createServices(loadConfig({ ...env, LOG_LEVEL: "silent" }), { migrate: false });
        try {
          const done = new Set((await services.db.kysely.selectFrom("invoices").select("id").where("status", "=", "completed").execute()).map((r) => r.id));
          assert.deepEqual(before.filter((id) => !done.has(id)), [], "every payment answered before the dump began is in it");
          assert.deepEqual(after.filter((id) => done.has(id)), [], "payments answered after the dump ended are not in it");
          assert.equal(await pay(again.url, storeId, after[0]!), 200, "SECRETS_KEY opens the restored plugin's secret");
        } finally {
          await services.close();
        }
      } finally {
        await again.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await database.drop();
    }
  });
});
