// Durable commits (src/platform/db/durable.ts): on SQLite, payments that arrive together share one transaction and
// one sync of the write-ahead log, each in a savepoint of its own, so one that fails rolls back alone.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { type Db, type OpenOptions, openDatabase } from "../../../src/platform/db/database.ts";
import { createDurableCommitter } from "../../../src/platform/db/durable.ts";
import { createHarness } from "../../helpers/harness.ts";

/** A migrated SQLite database in a folder of its own for `body`, with the statements sent to it; removed after. */
async function withDatabase(options: OpenOptions, body: (db: Db, file: string, statements: string[]) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-durable-"));
  const file = path.join(dir, "d.db");
  const statements: string[] = [];
  const db = openDatabase({ kind: "sqlite", file }, { ...options, onQuery: (s) => statements.push(s) });
  try {
    await db.migrate();
    statements.length = 0;
    await body(db, file, statements);
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("SQLite durable commits", () => {
  test("works queued together share one transaction; the one that fails is rolled back alone, the others commit", async () => {
    await withDatabase({}, async (db, file, statements) => {
      const committer = createDurableCommitter(db.kysely, { kind: "sqlite", file });
      const store = (id: string) => committer.run((tx) => tx.insertInto("stores").values({ id, name: id, created_at: 1 }).execute());
      statements.length = 0;
      const outcomes = await Promise.allSettled([
        store("st_a"),
        committer.run(async (tx) => {
          await tx.insertInto("stores").values({ id: "st_b", name: "b", created_at: 1 }).execute();
          throw new Error("this payment fails after writing");
        }),
        store("st_c"),
      ]);
      assert.deepEqual(outcomes.map((o) => o.status), ["fulfilled", "rejected", "fulfilled"]);
      const ids = (await db.kysely.selectFrom("stores").select("id").orderBy("id").execute()).map((r) => r.id);
      assert.deepEqual(ids, ["st_a", "st_c"]);
      assert.equal(statements.filter((s) => s === "begin").length, 1, "one transaction for the three");
      assert.equal(statements.filter((s) => s === "commit").length, 1);
      assert.equal(statements.filter((s) => s.startsWith("rollback to")).length, 1);
    });
  });

  test("a shared commit lets the event loop turn between its payments, so arrivals are heard during a long group", async () => {
    // The group's statements are synchronous (better-sqlite3): run back to back, a group of 30 payments held
    // the thread that answers webhooks for its whole length (tens of milliseconds), and the deliveries that
    // arrived meanwhile, and the sandbox's finished runs, waited for all of it.
    await withDatabase({}, async (db, file, statements) => {
      const committer = createDurableCommitter(db.kysely, { kind: "sqlite", file });
      const heard: boolean[] = [];
      let arrived = false;
      statements.length = 0;
      await Promise.all(
        ["st_a", "st_b", "st_c"].map((id, i) =>
          committer.run(async (tx) => {
            if (i === 0) setImmediate(() => (arrived = true)); // something that arrives while the group runs
            heard.push(arrived);
            await tx.insertInto("stores").values({ id, name: id, created_at: 1 }).execute();
          }),
        ),
      );
      assert.deepEqual(heard, [false, true, true], "the loop turned between the first payment and the second");
      assert.equal(statements.filter((s) => s === "begin").length, 1, "still one transaction for the three");
    });
  });

  test("a work alone runs in a transaction of its own, without savepoints", async () => {
    await withDatabase({}, async (db, file, statements) => {
      const committer = createDurableCommitter(db.kysely, { kind: "sqlite", file });
      statements.length = 0;
      await committer.run((tx) => tx.insertInto("stores").values({ id: "st_x", name: "x", created_at: 1 }).execute());
      assert.deepEqual(statements.map((s) => s.split(" ")[0]), ["begin", "insert", "commit"]);
    });
  });

  test("a payment's savepoint keeps the pages it would undo in memory, not in a temporary file", { skip: !existsSync("/proc/self/fd") && "needs /proc/self/fd" }, async () => {
    // A savepoint copies each page it changes first, so it can roll back alone; SQLite keeps those copies in
    // memory up to 64 KiB, then in a temporary file (deleted once opened), whose every page is a write(2).
    // A payment changes about thirty pages: kept in a file, those writes were a fifth of the busy writer.
    // (The file is unlinked at once, or made with O_TMPFILE: an open descriptor of a deleted file.)
    // Opened as the service opens its writing connection.
    await withDatabase({ savepointsInMemory: true }, async (db, file) => {
      // The descriptors of deleted files, as "fd target": one opened during the savepoint is new in the set
      // (others may close meanwhile: an earlier test's connections, whose files are gone).
      const temporaryFiles = () =>
        new Set(
          readdirSync("/proc/self/fd").flatMap((fd) => {
            try {
              const target = readlinkSync(`/proc/self/fd/${fd}`);
              return / \(deleted\)$/.test(target) ? [`${fd} ${target}`] : [];
            } catch {
              return []; // closed meanwhile (the directory's own descriptor)
            }
          }),
        );
      const big = "x".repeat(3_500); // a store per page
      await db.kysely.insertInto("stores").values(Array.from({ length: 40 }, (_, i) => ({ id: `st_${i}`, name: big, created_at: 1 }))).execute();
      const committer = createDurableCommitter(db.kysely, { kind: "sqlite", file });
      const before = temporaryFiles();
      let opened: string[] | null = null;
      await Promise.all([
        committer.run((tx) => tx.insertInto("stores").values({ id: "st_first", name: "first", created_at: 1 }).execute()),
        committer.run(async (tx) => {
          await tx.updateTable("stores").set({ name: big.toUpperCase() }).execute(); // forty pages, 160 KiB to undo
          opened = [...temporaryFiles()].filter((fd) => !before.has(fd));
        }),
      ]);
      assert.deepEqual(opened, [], "no temporary file opened while the savepoint ran");
      assert.equal((await db.kysely.selectFrom("stores").select("name").where("id", "=", "st_7").executeTakeFirstOrThrow()).name, big.toUpperCase());
    });
  });

  test("the service's writing connection is opened so (temp_store = MEMORY)", async () => {
    const h = await createHarness("sqlite");
    try {
      assert.equal(h.services.db.sqlite!.pragma("temp_store", { simple: true }), 2);
    } finally {
      await h.close();
    }
  });

  test("payments that finish while a commit is being synced join one commit after it, each answered after its sync", async () => {
    await withDatabase({}, async (db, file, statements) => {
      const syncs: (() => void)[] = [];
      const committer = createDurableCommitter(db.kysely, { kind: "sqlite", file }, { syncLog: () => new Promise<void>((resolve) => syncs.push(resolve)) });
      const turn = () => new Promise((r) => setImmediate(r));
      const store = (id: string) => committer.run((tx) => tx.insertInto("stores").values({ id, name: id, created_at: 1 }).execute());
      const answered = new Set<string>();
      const pay = (id: string) => store(id).then(() => answered.add(id));
      statements.length = 0;
      const first = pay("st_a");
      while (syncs.length === 0) await turn(); // st_a is committed, its sync held
      // Three payments finish one by one, each in a turn of its own, while that sync runs.
      const later = [];
      for (const id of ["st_b", "st_c", "st_d"]) {
        later.push(pay(id));
        await turn();
        await turn();
      }
      assert.equal(statements.filter((s) => s === "begin").length, 1, "nothing else committed during the sync");
      assert.equal(answered.size, 0, "st_a is not answered before its sync");
      syncs.shift()!();
      await first;
      while (syncs.length === 0) await turn();
      assert.equal(statements.filter((s) => s === "begin").length, 2, "the three share the next commit");
      assert.deepEqual([...answered], ["st_a"], "they wait for their own sync");
      syncs.shift()!();
      await Promise.all(later);
      assert.deepEqual([...answered].sort(), ["st_a", "st_b", "st_c", "st_d"]);
    });
  });
});
