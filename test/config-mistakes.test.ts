// Configuration mistakes an operator makes on the first day, as real processes meet them: each is one line
// saying what is wrong and what to do, never a stack, and nothing is created or changed on the way.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { runCli, type CliRun } from "./helpers/cli.ts";
import { PG_ADMIN_URL, freshDatabase, pgSkip } from "./helpers/harness.ts";
import { startServer } from "./helpers/server.ts";

function oneLineFailure(run: CliRun, pattern: RegExp): void {
  assert.notEqual(run.code, 0, "exits non-zero");
  assert.equal(run.stderr.trimEnd().split("\n").length, 1, `one line, got:\n${run.stderr}`);
  assert.doesNotMatch(run.stderr, /\n\s+at |node:internal|Error:/, "no stack trace");
  assert.match(run.stderr, pattern);
}

describe("configuration mistakes", () => {
  test("a file that is not an SQLite database is named in one line by serve and by commands", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-notadb-"));
    try {
      const file = path.join(dir, "notes.txt");
      writeFileSync(file, "these are my notes, not a database\n".repeat(200));
      const env = { DATABASE_URL: `sqlite:${file}`, SECRETS_KEY: randomBytes(32).toString("hex") };
      for (const args of [["serve"], ["stores", "list"], ["migrate"]]) {
        oneLineFailure(await runCli(args, { env: { ...env, PORT: "0" }, timeoutMs: 60_000 }), new RegExp(`${file.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")} is not an SQLite database .*DATABASE_URL`));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a DATABASE_URL that names no database is refused in one line naming DATABASE_URL", { skip: pgSkip }, async () => {
    // A role that does not exist: were the URL accepted, the login fails before anything could be created in
    // the database PostgreSQL would pick (the role's name).
    const url = new URL(PG_ADMIN_URL);
    url.username = "storefront_no_such_role";
    url.pathname = "/";
    url.search = "";
    for (const args of [["serve"], ["stores", "list"]]) {
      const run = await runCli(args, { env: { DATABASE_URL: url.toString(), SECRETS_KEY: randomBytes(32).toString("hex"), PORT: "0" }, timeoutMs: 60_000 });
      oneLineFailure(run, /DATABASE_URL names no database: .*postgres:\/\/.*\/storefront/);
    }
  });

  test("a bad PORT stops serve with one line naming PORT, and does not stop commands that never listen", async () => {
    const database = await freshDatabase("sqlite");
    try {
      const env = { DATABASE_URL: database.url, SECRETS_KEY: randomBytes(32).toString("hex") };
      const list = await runCli(["stores", "list", "--json"], { env: { ...env, PORT: "http" } });
      assert.equal(list.code, 0, list.stderr);
      assert.deepEqual(JSON.parse(list.stdout), { data: [] });
      oneLineFailure(await runCli(["serve"], { env: { ...env, PORT: "http" }, timeoutMs: 60_000 }), /PORT must be a whole number, got "http"/);
    } finally {
      await database.drop();
    }
  });

  test("a second serve on the same SQLite file is refused in one line; commands still run beside the first; a killed server leaves no lock", async () => {
    const database = await freshDatabase("sqlite");
    const env = { DATABASE_URL: database.url, SECRETS_KEY: randomBytes(32).toString("hex") };
    const first = await startServer(env);
    try {
      const second = await runCli(["serve"], { env: { ...env, PORT: "0" }, timeoutMs: 60_000 });
      oneLineFailure(second, /another storefront serve is using the SQLite database .*test\.db.*PostgreSQL/);
      assert.equal((await fetch(`${first.url}/readyz`)).status, 200, "the first server was not disturbed");
      const list = await runCli(["stores", "list", "--json"], { env });
      assert.equal(list.code, 0, `commands run beside the server: ${list.stderr}`);
      await first.kill9();
      const again = await startServer(env);
      assert.equal((await fetch(`${again.url}/readyz`)).status, 200, "after a crash the file can be served again");
      await again.stop();
    } finally {
      await first.kill9();
      await database.drop();
    }
  });

  test("a missing SQLite directory that cannot be created is one line, and nothing is left behind", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-blocked-"));
    try {
      const blocker = path.join(dir, "blocker");
      writeFileSync(blocker, "a file where a directory should be");
      const run = await runCli(["stores", "list"], { env: { DATABASE_URL: `sqlite:${path.join(blocker, "sf.db")}`, SECRETS_KEY: randomBytes(32).toString("hex") } });
      oneLineFailure(run, /cannot open the SQLite database .*blocker\/sf\.db/);
      assert.deepEqual(readdirSync(dir), ["blocker"]);
      assert.ok(!existsSync(path.join(dir, "data")));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
