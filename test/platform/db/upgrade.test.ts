// Upgrades say what they do, on real processes and both databases: `migrate` and `serve` name each
// migration they apply with its duration, `--version` names the release and the schema, a database migrated
// by a newer release is refused in one line, and the first expiry pass at start-up says what it expired.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { sql, type Kysely } from "kysely";
import { loadConfig } from "../../../src/config.ts";
import { openDatabase } from "../../../src/platform/db/database.ts";
import { migrateTo } from "../../../src/platform/db/migrate.ts";
import { createServices } from "../../../src/services.ts";
import { REPO, runCli, type CliRun } from "../../helpers/cli.ts";
import { DIALECTS, freshDatabase } from "../../helpers/harness.ts";
import { startServer } from "../../helpers/server.ts";

const { version: RELEASE } = JSON.parse(readFileSync(path.join(REPO, "package.json"), "utf8")) as { version: string };
/** The migrations this release ships, from its own folder: the newest is the schema version. */
const MIGRATION_FILES = (await import("node:fs")).readdirSync(path.join(REPO, "src/platform/db/migrations")).filter((f) => /^\d{4}_.*\.ts$/.test(f)).sort();
const LATEST = MIGRATION_FILES.at(-1)!.replace(/\.ts$/, "");
const OLD = "0005_applied_events";

function oneLineFailure(run: CliRun, pattern: RegExp): void {
  assert.notEqual(run.code, 0, "exits non-zero");
  assert.equal(run.stderr.trimEnd().split("\n").length, 1, `one line, got:\n${run.stderr}`);
  assert.doesNotMatch(run.stderr, /\n\s+at |node:internal|Error:/, "no stack trace");
  assert.match(run.stderr, pattern);
}

async function migratedTo(url: string, last: string): Promise<void> {
  const db = openDatabase(loadConfig({ DATABASE_URL: url }).database);
  try {
    await migrateTo(db.kysely as unknown as Kysely<unknown>, { dialect: db.dialect }, last);
  } finally {
    await db.close();
  }
}

test("--version names the release (package.json) and the schema version (the newest migration)", async () => {
  const run = await runCli(["--version"]);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.stdout.trim(), `storefront ${RELEASE} (schema ${LATEST})`);
});

for (const dialect of DIALECTS) {
  describe(`upgrades on ${dialect.name}`, { skip: dialect.skip }, () => {
    test("migrate prints each migration it applied with its duration, then says the schema is current", async () => {
      const database = await freshDatabase(dialect.name);
      try {
        await migratedTo(database.url, OLD);
        const env = { DATABASE_URL: database.url, SECRETS_KEY: randomBytes(32).toString("hex") };
        const first = await runCli(["migrate"], { env });
        assert.equal(first.code, 0, first.stderr);
        const expected = MIGRATION_FILES.map((f) => f.replace(/\.ts$/, "")).filter((name) => name > OLD);
        const applied = [...first.stdout.matchAll(/^applied (\S+) in \d+ ms$/gm)].map((m) => m[1]);
        assert.deepEqual(applied, expected, first.stdout);
        assert.match(first.stdout, new RegExp(`^schema ${LATEST}: applied ${expected.length} migrations \\(${dialect.name}\\)$`, "m"));
        assert.doesNotMatch(first.stdout, /up to date/);

        const again = await runCli(["migrate", "--json"], { env });
        assert.deepEqual(JSON.parse(again.stdout), { dialect: dialect.name, schema: LATEST, applied: [] });
        const human = await runCli(["migrate"], { env });
        assert.equal(human.stdout, `schema ${LATEST}: up to date, nothing to apply (${dialect.name})\n`);
      } finally {
        await database.drop();
      }
    });

    test("serve logs each migration it applies at start-up, with its duration", async () => {
      const database = await freshDatabase(dialect.name);
      try {
        await migratedTo(database.url, OLD);
        const spawned = performance.now();
        const server = await startServer({ DATABASE_URL: database.url, SECRETS_KEY: randomBytes(32).toString("hex"), LOG_LEVEL: "info" });
        await server.stop();
        const lifetime = performance.now() - spawned;
        const lines = server.output().split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>);
        const applied = lines.filter((l) => typeof l.migration === "string");
        const expected = MIGRATION_FILES.map((f) => f.replace(/\.ts$/, "")).filter((name) => name > OLD);
        assert.deepEqual(applied.map((l) => l.migration), expected, server.output());
        for (const l of applied) assert.ok(Number.isInteger(l.durationMs), `a duration in whole milliseconds: ${JSON.stringify(l)}`);
        // Measured by the server, in milliseconds: together they fit in the time the server lived (an order, not a bound).
        const total = applied.reduce((sum, l) => sum + (l.durationMs as number), 0);
        assert.ok(total <= lifetime, `the migrations took ${total} ms of a server that lived ${Math.round(lifetime)} ms`);
        const pending = lines.find((l) => Array.isArray(l.pending));
        assert.deepEqual(pending?.pending, expected, "the migrations about to run are named before they run");
        assert.ok(lines.some((l) => l.schema === LATEST), "the schema version it serves is logged");
      } finally {
        await database.drop();
      }
    });

    test("a database migrated by a newer release is refused in one line by serve, migrate and other commands, and left untouched", async () => {
      const database = await freshDatabase(dialect.name);
      try {
        await migratedTo(database.url, LATEST);
        const db = openDatabase(loadConfig({ DATABASE_URL: database.url }).database);
        try {
          await sql`insert into kysely_migration (name, timestamp) values ('9999_from_the_future', ${new Date().toISOString()})`.execute(db.kysely);
        } finally {
          await db.close();
        }
        const env = { DATABASE_URL: database.url, SECRETS_KEY: randomBytes(32).toString("hex") };
        const newer = new RegExp(`database was migrated by a newer release of storefront \\(9999_from_the_future\\); this release \\(${RELEASE.replace(/\./g, "\\.")}\\) knows migrations up to ${LATEST}`);
        for (const args of [["serve"], ["migrate"], ["stores", "list"]]) oneLineFailure(await runCli(args, { env: { ...env, PORT: "0" }, timeoutMs: 60_000 }), newer);
        const after = openDatabase(loadConfig({ DATABASE_URL: database.url }).database);
        try {
          const { rows } = await sql<{ name: string }>`select name from kysely_migration order by name desc`.execute(after.kysely);
          assert.equal(rows[0]?.name, "9999_from_the_future", "nothing was changed");
        } finally {
          await after.close();
        }
      } finally {
        await database.drop();
      }
    });

    test("pending invoices the first expiry pass expires at start-up are counted in a warning naming INVOICE_PAYMENT_WINDOW_MINUTES", async () => {
      const database = await freshDatabase(dialect.name);
      try {
        const env = { DATABASE_URL: database.url, SECRETS_KEY: randomBytes(32).toString("hex") };
        // Three invoices checked out two hours ago, as an older release that never expired them left them.
        const twoHoursAgo = Date.now() - 2 * 3_600_000;
        const services = await createServices(loadConfig({ ...env, LOG_LEVEL: "silent" }), { now: () => twoHoursAgo });
        try {
          const store = await services.stores.createStore("old release");
          const customer = await services.customers.create(store.id, { email: "late@example.com" });
          for (let i = 0; i < 3; i++) await services.invoices.checkout(store.id, { customerId: customer.id, paymentMethod: "stripe", items: [{ productVariantId: "var_1", quantity: 1, price: 5 }] });
        } finally {
          await services.close();
        }
        const server = await startServer({ ...env, LOG_LEVEL: "info" });
        let warning: Record<string, unknown> | undefined;
        for (let i = 0; i < 100 && warning === undefined; i++) {
          warning = server.output().split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.expired !== undefined);
          if (warning === undefined) await new Promise((r) => setTimeout(r, 100));
        }
        await server.stop();
        assert.ok(warning, server.output());
        assert.equal(warning.expired, 3);
        assert.equal(warning.level, 40, "a warning");
        assert.match(String(warning.msg), /INVOICE_PAYMENT_WINDOW_MINUTES/);
      } finally {
        await database.drop();
      }
    });
  });
}
