// Authenticated keys are remembered between requests (src/stores/key-cache.ts), and a change to a key made
// anywhere, by this process or by another connection (the command line, another server, a raw UPDATE),
// takes effect at once: a revoked key is never answered from memory.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import SQLite from "better-sqlite3";
import pg from "pg";
import { KEY_CHANGES_CHANNEL, LISTENER_NAME, createKeyCache } from "../../src/stores/key-cache.ts";
import { createChangeWatch } from "../../src/platform/db/change-watch.ts";
import { DIALECTS, PG_ADMIN_URL, createHarness, expectStatus, pgSkip, type Harness } from "../helpers/harness.ts";

/** Runs SQL on the harness's database through a connection of its own, as another process would. */
async function elsewhere(h: Harness, statement: string, params: unknown[] = []): Promise<void> {
  if (h.dialect === "sqlite") {
    const other = new SQLite(h.databaseUrl.slice("sqlite:".length));
    try {
      other.pragma("busy_timeout = 5000");
      other.prepare(statement.replace(/\$\d+/g, "?")).run(...params);
    } finally {
      other.close();
    }
    return;
  }
  const other = new pg.Client({ connectionString: h.databaseUrl });
  await other.connect();
  try {
    await other.query(statement, params);
  } finally {
    await other.end();
  }
}

/** The status of the first request answered otherwise than `status`, asking until `ms` have passed. */
async function statusWithin(h: Harness, key: string, ms: number, until: (status: number) => boolean): Promise<number> {
  const deadline = Date.now() + ms;
  for (;;) {
    const { statusCode } = await h.get("/api/service/invoices", key);
    if (until(statusCode) || Date.now() > deadline) return statusCode;
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function newKey(h: Harness, storeId: string): Promise<{ id: string; key: string }> {
  const created = await h.admin("POST", `/api/admin/stores/${storeId}/keys`, {});
  expectStatus(created, 201);
  return created.json<{ id: string; key: string }>();
}

for (const dialect of DIALECTS) {
  describe(`remembered API keys on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let storeId: string;
    before(async () => {
      h = await createHarness(dialect.name, { READ_THREADS: "0" });
      storeId = (await h.store("cache")).id;
    });
    after(async () => h?.close());

    test("a key revoked by another connection is refused, though it was just answered from memory", async () => {
      const { id, key } = await newKey(h, storeId);
      expectStatus(await h.get("/api/service/invoices", key), 200);
      expectStatus(await h.get("/api/service/invoices", key), 200);
      await elsewhere(h, "update api_keys set revoked_at = $1 where id = $2", [Date.now(), id]);
      // SQLite: at once (the next lookup sees data_version move). PostgreSQL: once the notification arrives,
      // a few milliseconds; remembered keys otherwise live 60 s, so 5 s tells the two apart.
      const status = h.dialect === "sqlite" ? (await h.get("/api/service/invoices", key)).statusCode : await statusWithin(h, key, 5_000, (s) => s === 401);
      assert.equal(status, 401);
    });

    test("a key deleted by another connection is refused", async () => {
      const { id, key } = await newKey(h, storeId);
      expectStatus(await h.get("/api/service/invoices", key), 200);
      await elsewhere(h, "delete from api_keys where id = $1", [id]);
      const status = h.dialect === "sqlite" ? (await h.get("/api/service/invoices", key)).statusCode : await statusWithin(h, key, 5_000, (s) => s === 401);
      assert.equal(status, 401);
    });

    test("a key's scopes narrowed by another connection apply to the next request", async () => {
      const { id, key } = await newKey(h, storeId);
      expectStatus(await h.get("/api/service/invoices", key), 200);
      await elsewhere(h, "update api_keys set scopes = $1 where id = $2", ["customers:read", id]);
      const status = h.dialect === "sqlite" ? (await h.get("/api/service/invoices", key)).statusCode : await statusWithin(h, key, 5_000, (s) => s === 403);
      assert.equal(status, 403);
    });

    test("a key revoked through this process is refused at the next request", async () => {
      const { id, key } = await newKey(h, storeId);
      expectStatus(await h.get("/api/service/invoices", key), 200);
      expectStatus(await h.admin("DELETE", `/api/admin/stores/${storeId}/keys/${id}`), 204);
      expectStatus(await h.get("/api/service/invoices", key), 401);
    });
  });
}

test("a lookup that ran while keys changed is not remembered", () => {
  const handle = new SQLite(":memory:");
  try {
    const cache = createKeyCache<string>(createChangeWatch({ sqlite: handle }, null), KEY_CHANGES_CHANNEL);
    const remember = cache.begin();
    cache.clear(); // a revocation committed while the lookup ran
    remember("h1", "stale");
    assert.equal(cache.get("h1"), undefined);
    const next = cache.begin();
    next("h1", "fresh");
    assert.equal(cache.get("h1"), "fresh");
  } finally {
    handle.close();
  }
});

describe("PostgreSQL: remembered keys when the listening connection is lost", { skip: pgSkip }, () => {
  test("a revocation made while nobody listened is not answered from memory after the connection is back", async () => {
    const h = await createHarness("postgres", { READ_THREADS: "0" });
    const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
    await admin.connect();
    try {
      const { id: storeId } = await h.store("lost");
      const { id, key } = await newKey(h, storeId);
      const listeners = async () =>
        (await admin.query<{ pid: number }>("select pid from pg_stat_activity where application_name = $1 and query like 'listen%'", [LISTENER_NAME])).rows.map((r) => r.pid);
      // Listening: a fresh harness connects its listener in the background.
      for (let i = 0; i < 100 && (await listeners()).length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      const before = await listeners();
      assert.ok(before.length > 0, "the harness listens for key changes");
      expectStatus(await h.get("/api/service/invoices", key), 200);
      expectStatus(await h.get("/api/service/invoices", key), 200);

      // Our own connections only: the listeners of this test process.
      for (const pid of before) await admin.query("select pg_terminate_backend($1, 5000)", [pid]);
      await elsewhere(h, "update api_keys set revoked_at = $1 where id = $2", [Date.now(), id]);
      // Nobody heard that; the listener comes back within a second or so.
      for (let i = 0; i < 250; i++) {
        const now = await listeners();
        if (now.some((pid) => !before.includes(pid))) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.ok((await listeners()).some((pid) => !before.includes(pid)), "the listener reconnected");
      expectStatus(await h.get("/api/service/invoices", key), 401);
    } finally {
      await admin.end();
      await h.close();
    }
  });
});

test("API_KEY_CACHE_SECONDS=0: nothing is remembered; otherwise a key is remembered at most that long", () => {
  const handle = new SQLite(":memory:");
  try {
    let now = 1_000;
    const off = createKeyCache<string>(createChangeWatch({ sqlite: handle }, null), KEY_CHANGES_CHANNEL, () => now, 0);
    off.begin()("h1", "key");
    assert.equal(off.get("h1"), undefined);
    const on = createKeyCache<string>(createChangeWatch({ sqlite: handle }, null), KEY_CHANGES_CHANNEL, () => now, 60_000);
    on.begin()("h1", "key");
    now += 59_999;
    assert.equal(on.get("h1"), "key");
    now += 1;
    assert.equal(on.get("h1"), undefined, "forgotten after its time");
  } finally {
    handle.close();
  }
});
