// The webhook benchmark's count of the bytes an SQLite server writes to its write-ahead log (bench/webhook/
// probes.ts, watchSqliteWal), read from the log's index of a real database: every committed frame counted
// once, also across a restart of the log, which starts the frame count again from 0.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import SQLite from "better-sqlite3";
import { watchSqliteWal } from "../../bench/webhook/probes.ts";

const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-wal-probe-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const PAGE = 4096;
const FRAME = PAGE + 24;
const tick = () => new Promise((resolve) => setTimeout(resolve, 30));

function database(name: string): SQLite.Database {
  const db = new SQLite(path.join(dir, name));
  db.pragma(`page_size = ${PAGE}`);
  db.pragma("journal_mode = WAL");
  db.pragma("wal_autocheckpoint = 0");
  db.exec("create table t (id integer primary key, body blob)");
  return db;
}
/** Frames in the log now, and copied back (so the next write starts the log again: read only where that is wanted). */
const logFrames = (db: SQLite.Database) => (db.pragma("wal_checkpoint(PASSIVE)") as { log: number }[])[0]!.log;
/** An empty log: the watch starts from 0 frames. */
const emptyLog = (db: SQLite.Database) => db.pragma("wal_checkpoint(TRUNCATE)");

test("counts every frame committed while watched, as page plus frame header", () => {
  const db = database("plain.db");
  emptyLog(db);
  const watch = watchSqliteWal(path.join(dir, "plain.db"));
  const insert = db.prepare("insert into t (body) values (?)");
  for (let i = 0; i < 20; i++) insert.run(Buffer.alloc(3000, i));
  const counted = watch.stop();
  const written = logFrames(db);
  assert.ok(written >= 20, `each commit wrote at least one frame (${written})`);
  assert.equal(counted, written * FRAME);
  db.close();
});

test("counts the frames of both generations when the log restarts between two samples", async () => {
  const db = database("restart.db");
  emptyLog(db);
  const insert = db.prepare("insert into t (body) values (?)");
  const watch = watchSqliteWal(path.join(dir, "restart.db"));
  for (let i = 0; i < 10; i++) insert.run(Buffer.alloc(3000, i));
  await tick(); // sampled: the first generation's frames are seen
  const first = logFrames(db);
  db.pragma("wal_checkpoint(RESTART)");
  for (let i = 0; i < 5; i++) insert.run(Buffer.alloc(3000, i));
  const counted = watch.stop();
  const second = logFrames(db);
  assert.ok(second > 0 && second < first, `the log started again (${second} frames after ${first})`);
  assert.equal(counted, (first + second) * FRAME);
  db.close();
});

test("is null when the database has no log index", () => {
  assert.equal(watchSqliteWal(path.join(dir, "missing.db")).stop(), null);
});
