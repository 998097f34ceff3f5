// SQLite's log checkpointed off the main thread (src/platform/db/wal-checkpointer.ts): under writes a thread
// of its own copies the log into the database file, the main connection only checkpoints past a backstop,
// and the thread leaves once the log is quiet (an idle service holds none) or when the database closes.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { pathToFileURL } from "node:url";
import SQLite from "better-sqlite3";
import { openDatabase } from "../../../src/platform/db/database.ts";
import { createDurableCommitter } from "../../../src/platform/db/durable.ts";
import { type WalCheckpointer, walCheckpointer } from "../../../src/platform/db/wal-checkpointer.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => boolean): Promise<void> {
  for (let i = 0; !check(); i++) {
    assert.ok(i < 500, `timed out waiting until ${what}`);
    await sleep(20);
  }
}

/** A WAL database with a table whose rows fill pages: ~250 pages written into the log by 500 rows. */
function walDatabase(): { dir: string; file: string; handle: SQLite.Database; write(rows: number): void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-wal-"));
  const file = path.join(dir, "w.db");
  const handle = new SQLite(file);
  handle.pragma("journal_mode = WAL");
  handle.pragma("synchronous = NORMAL");
  handle.exec("create table t (id integer primary key, v blob not null)");
  const insert = handle.prepare("insert into t (v) values (randomblob(2000))");
  const write = handle.transaction((rows: number) => {
    for (let i = 0; i < rows; i++) insert.run();
  });
  return { dir, file, handle, write };
}

/** Runs `check` on a WAL database with a checkpointer of these options; stops both and removes the files. */
async function withCheckpointer(options: { intervalMs: number; idleMs: number }, check: (db: ReturnType<typeof walDatabase>, checkpoints: WalCheckpointer) => Promise<void>): Promise<void> {
  const db = walDatabase();
  const checkpoints = walCheckpointer(db.handle, db.file, options);
  try {
    await check(db, checkpoints);
  } finally {
    await checkpoints.close();
    db.handle.close();
    rmSync(db.dir, { recursive: true, force: true });
  }
}

describe("the WAL checkpoint thread", () => {
  test("under writes, the thread copies the log into the database file; the main connection's threshold is only a backstop", () =>
    withCheckpointer({ intervalMs: 20, idleMs: 60_000 }, async ({ file, handle, write }, checkpoints) => {
      assert.equal(handle.pragma("wal_autocheckpoint", { simple: true }), 1000, "SQLite's own threshold before any write");
      const before = statSync(file).size;
      write(500); // ~250 pages: below either threshold, so only the thread can have copied them
      checkpoints.wake();
      assert.equal(checkpoints.running, true);
      assert.equal(handle.pragma("wal_autocheckpoint", { simple: true }), 100_000, "the main connection checkpoints only past the backstop");
      await until("the log is in the database file", () => statSync(file).size > before + 500 * 2000);
    }));

  test("a log of 12,000 pages waits for the thread: no commit of the main connection checkpoints it", () =>
    // The thread's first checkpoint would come a minute later: only the main connection could copy the log.
    withCheckpointer({ intervalMs: 60_000, idleMs: 60_000 }, async ({ file, write }, checkpoints) => {
      write(10);
      checkpoints.wake();
      const before = statSync(file).size;
      for (let i = 0; i < 24; i++) write(1000); // 24 commits of ~500 pages: a log past 10,000 pages
      assert.ok(statSync(`${file}-wal`).size > 12_000 * 4096, "the log holds every page written");
      assert.equal(statSync(file).size, before, "the database file has not grown: nothing was checkpointed in a commit");
    }));

  test("once the log is quiet the thread leaves, and the main connection checkpoints at SQLite's threshold again", () =>
    withCheckpointer({ intervalMs: 20, idleMs: 200 }, async ({ handle, write }, checkpoints) => {
      write(10);
      checkpoints.wake();
      await until("the thread left", () => !checkpoints.running);
      assert.equal(handle.pragma("wal_autocheckpoint", { simple: true }), 1000);
      // The next write starts it again.
      write(10);
      checkpoints.wake();
      assert.equal(checkpoints.running, true);
    }));

  test("closing stops the thread, and a closed checkpointer starts none", () =>
    withCheckpointer({ intervalMs: 20, idleMs: 60_000 }, async ({ write }, checkpoints) => {
      write(10);
      checkpoints.wake();
      assert.equal(checkpoints.running, true);
      await checkpoints.close();
      assert.equal(checkpoints.running, false);
      checkpoints.wake();
      assert.equal(checkpoints.running, false);
    }));

  test("a process whose last work is closing the checkpointer ends once the thread is gone, not before", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-wal-"));
    const module = (file: string) => JSON.stringify(pathToFileURL(path.join(import.meta.dirname, "../../../src/platform/db", file)).href);
    // As a command does: its database closes last, at the top level, with nothing else keeping the loop alive.
    const script = `
      import SQLite from "better-sqlite3";
      const { walCheckpointer } = await import(${module("wal-checkpointer.ts")});
      const file = ${JSON.stringify(path.join(dir, "c.db"))};
      const handle = new SQLite(file);
      handle.pragma("journal_mode = WAL");
      handle.exec("create table t (v)");
      const checkpoints = walCheckpointer(handle, file, { intervalMs: 20, idleMs: 60000 });
      checkpoints.wake();
      await checkpoints.close();
      handle.close();
      console.log("closed");
    `;
    try {
      const run = spawnSync(process.execPath, ["--input-type=module", "-e", script], { cwd: path.join(import.meta.dirname, "../../.."), encoding: "utf8" });
      assert.equal(run.status, 0, run.stderr);
      assert.equal(run.stdout.trim(), "closed");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a durable commit wakes the thread of the database that serves writes; the database's close stops it", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-wal-"));
    const file = path.join(dir, "d.db");
    const db = openDatabase({ kind: "sqlite", file }, { walCheckpoints: true });
    try {
      await db.migrate();
      assert.equal(db.walCheckpoints?.running, false, "no thread before the first durable commit");
      const committer = createDurableCommitter(db.kysely, { kind: "sqlite", file }, { afterCommit: () => db.walCheckpoints?.wake() });
      await committer.run((tx) => tx.insertInto("stores").values({ id: "st_w", name: "w", created_at: 1 }).execute());
      assert.equal(db.walCheckpoints?.running, true);
    } finally {
      await db.close();
      assert.equal(db.walCheckpoints?.running, false);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("an in-memory database and a connection that does not serve writes have no checkpoint thread", async () => {
    const memory = openDatabase({ kind: "sqlite", file: ":memory:" }, { walCheckpoints: true });
    assert.equal(memory.walCheckpoints, null);
    await memory.close();
    const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-wal-"));
    const reader = openDatabase({ kind: "sqlite", file: path.join(dir, "r.db") });
    assert.equal(reader.walCheckpoints, null);
    await reader.close();
    rmSync(dir, { recursive: true, force: true });
  });
});
