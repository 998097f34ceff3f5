// PostgreSQL over its Unix socket: DATABASE_URL names the socket's directory in a `host` parameter (the URL
// itself keeps a host, as a WHATWG URL must), and every connection of a real `serve` uses it: the pool, the
// reader threads (postgres.js), the listener and the dispatcher.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { test } from "node:test";
import pg from "pg";
import { ADMIN_TOKEN, PG_ADMIN_URL, freshDatabase, pgSkip } from "../../helpers/harness.ts";
import { startServer } from "../../helpers/server.ts";

const SOCKET_DIR = "/var/run/postgresql";
const skip = pgSkip || (!existsSync(`${SOCKET_DIR}/.s.PGSQL.5432`) && `no PostgreSQL socket in ${SOCKET_DIR}`);

test("serve runs on a PostgreSQL Unix socket given as DATABASE_URL's host parameter", { skip, timeout: 120_000 }, async () => {
  const database = await freshDatabase("postgres");
  const url = new URL(database.url);
  const name = `sf_socket_${randomBytes(4).toString("hex")}`;
  url.hostname = "localhost";
  url.port = "";
  url.searchParams.set("host", SOCKET_DIR);
  url.searchParams.set("application_name", name);
  const server = await startServer({ DATABASE_URL: url.toString(), ADMIN_TOKEN, SECRETS_KEY: randomBytes(32).toString("hex"), READ_THREADS: "1" });
  const admin = (path: string, body: unknown) =>
    fetch(`${server.url}${path}`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" }, body: JSON.stringify(body) });
  try {
    const store = (await (await admin("/api/admin/stores", { name: "by socket" })).json()) as { id: string };
    const { key } = (await (await admin(`/api/admin/stores/${store.id}/keys`, {})).json()) as { key: string };
    const created = await admin(`/api/admin/stores/${store.id}/customers`, { email: "socket@example.com" });
    assert.equal(created.status, 201);
    const list = await fetch(`${server.url}/api/service/customers`, { headers: { authorization: key } });
    assert.equal(list.status, 200, await list.clone().text());
    assert.deepEqual(((await list.json()) as { data: { customers: { email: string }[] } }).data.customers.map((c) => c.email), ["socket@example.com"]);

    const probe = new pg.Client({ connectionString: PG_ADMIN_URL });
    await probe.connect();
    try {
      const rows = (await probe.query<{ socket: boolean }>("select client_addr is null and client_port = -1 as socket from pg_stat_activity where application_name = $1", [name])).rows;
      assert.ok(rows.length >= 2, `the server's connections are found (${rows.length})`);
      assert.ok(rows.every((r) => r.socket), "each came through the socket");
    } finally {
      await probe.end();
    }
  } finally {
    await server.stop();
    await database.drop();
  }
});
