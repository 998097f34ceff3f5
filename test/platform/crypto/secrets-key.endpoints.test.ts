// Every value sealed with SECRETS_KEY is held to it, whichever table keeps it: the outbound endpoints'
// signing secrets are checked at start-up like the plugins' secrets and moved by `storefront secrets
// rekey` with them, in one transaction (all or nothing), on SQLite and PostgreSQL. Without SECRETS_KEY the
// key file beside the database is the key: rekey then moves everything to a fresh key and puts it there.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { describe, test } from "node:test";
import { buildApp } from "../../../src/app.ts";
import { loadConfig } from "../../../src/config.ts";
import { createSecretBox, parseSecretsKey } from "../../../src/platform/crypto/secret-box.ts";
import { SecretsKeyMismatch } from "../../../src/platform/crypto/secrets-key.service.ts";
import { createServices } from "../../../src/services.ts";
import { ADMIN_TOKEN, DIALECTS, createHarness, expectStatus, type Harness } from "../../helpers/harness.ts";
import { startReceiver } from "../../helpers/receiver.ts";
import { startServer } from "../../helpers/server.ts";
import { SIGNED_PLUGIN, installPlugin } from "../../helpers/webhook.ts";

const run = promisify(execFile);
const MAIN = path.resolve(import.meta.dirname, "../../../src/main.ts");

async function rekey(env: Record<string, string>, args: string[]) {
  const { stdout } = await run(process.execPath, [MAIN, "secrets", "rekey", "--json", ...args], { env: { ...process.env, LOG_LEVEL: "silent", ...env } });
  return JSON.parse(stdout) as { moved: number; alreadyNew: number; unreadable: { kind: string }[]; keyFile?: string };
}

function keyFile(key: string): string {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), "rekey-")), "old.key");
  writeFileSync(file, key);
  return file;
}

async function addEndpoint(h: Harness, storeId: string, url: string) {
  const r = await h.admin("POST", `/api/admin/stores/${storeId}/endpoints`, { url });
  expectStatus(r, 201);
  return r.json<{ id: string; secret: string }>();
}

/** The service under another key, as `serve` builds it (the start-up check on). */
async function servicesWith(h: Harness, secretsKey: string) {
  return createServices(loadConfig({ DATABASE_URL: h.databaseUrl, ADMIN_TOKEN, LOG_LEVEL: "silent", SECRETS_KEY: secretsKey, ENDPOINT_ALLOW: "127.0.0.1" }), { checkSecretsKey: true });
}

for (const { name: dialect, skip } of DIALECTS) {
  describe(`endpoint signing secrets under SECRETS_KEY on ${dialect}`, { skip }, () => {
    test("a database holding only endpoint secrets does not start under a wrong key, and the message names them", async () => {
      const h = await createHarness(dialect, { ENDPOINT_ALLOW: "127.0.0.1" });
      try {
        const store = await h.store();
        await addEndpoint(h, store.id, "http://127.0.0.1:9/hook");
        const started = await servicesWith(h, randomBytes(32).toString("hex")).then(
          async (services) => {
            await services.close();
            return null;
          },
          (err: unknown) => err,
        );
        assert.ok(started instanceof SecretsKeyMismatch, "refused to start");
        assert.match(started.message, /SECRETS_KEY cannot open .*1 webhook endpoint/);
      } finally {
        await h.close();
      }
    });

    test("a process that did not check the key (the command line) answers rotate-secret 503 secrets_unavailable, not 500", async () => {
      const h = await createHarness(dialect, { ENDPOINT_ALLOW: "127.0.0.1" });
      try {
        const store = await h.store();
        const ep = await addEndpoint(h, store.id, "http://127.0.0.1:9/hook");
        const services = await createServices(loadConfig({ DATABASE_URL: h.databaseUrl, ADMIN_TOKEN, LOG_LEVEL: "silent", SECRETS_KEY: randomBytes(32).toString("hex") }));
        const app = await buildApp(services, { logger: false });
        try {
          const r = await app.inject({ method: "POST", url: `/api/admin/stores/${store.id}/endpoints/${ep.id}/rotate-secret`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
          assert.equal(r.statusCode, 503, r.body);
          assert.equal(r.json<{ error: { code: string } }>().error.code, "secrets_unavailable");
        } finally {
          await app.close();
          await services.close();
        }
      } finally {
        await h.close();
      }
    });

    test("rekey moves endpoint secrets with the plugins' in one run; endpoints then sign and rotate under the new key", async () => {
      const receiver = await startReceiver();
      const h = await createHarness(dialect, { ENDPOINT_ALLOW: "127.0.0.1" });
      const newKey = randomBytes(32).toString("hex");
      try {
        const store = await h.store();
        await installPlugin(h, store.id, "pay", SIGNED_PLUGIN);
        const ep = await addEndpoint(h, store.id, `${receiver.url}/hooks`);
        const report = await rekey({ DATABASE_URL: h.databaseUrl, SECRETS_KEY: newKey }, ["--from-file", keyFile(h.config.secretsKey!)]);
        assert.equal(report.moved, 2, "the plugin's secrets and the endpoint's");
        assert.deepEqual(report.unreadable, []);

        const services = await servicesWith(h, newKey);
        const app = await buildApp(services, { logger: false });
        try {
          const rotated = await app.inject({ method: "POST", url: `/api/admin/stores/${store.id}/endpoints/${ep.id}/rotate-secret`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
          expectStatus(rotated, 200);
          const customer = await app.inject({ method: "POST", url: `/api/admin/stores/${store.id}/customers`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload: { email: "k@example.com" } });
          expectStatus(customer, 201);
          await app.inject({
            method: "POST",
            url: `/api/admin/stores/${store.id}/invoices`,
            headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
            payload: { customerId: customer.json<{ id: string }>().id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] },
          });
          assert.equal(await services.dispatcher.runDue(), 1);
          assert.equal(receiver.verifiedWith(ep.secret).length, 1, "signed with the old secret too, kept for 24 h after rotation");
          assert.equal(receiver.verifiedWith(rotated.json<{ secret: string }>().secret).length, 1);
        } finally {
          await app.close();
          await services.close();
        }
      } finally {
        await h.close();
        await receiver.close();
      }
    });

    test("rekey is all or nothing: an endpoint secret that opens with neither key leaves every value where it was", async () => {
      const h = await createHarness(dialect, { ENDPOINT_ALLOW: "127.0.0.1" });
      try {
        const store = await h.store();
        await installPlugin(h, store.id, "pay", SIGNED_PLUGIN);
        const ep = await addEndpoint(h, store.id, "http://127.0.0.1:9/hook");
        const stranger = createSecretBox(randomBytes(32)).seal({ current: "whsec_x" });
        await h.services.db.kysely.updateTable("event_endpoints").set({ secrets: stranger }).where("id", "=", ep.id).execute();
        const before = await h.services.db.kysely.selectFrom("plugin_installations").select("secrets").executeTakeFirstOrThrow();
        await assert.rejects(rekey({ DATABASE_URL: h.databaseUrl, SECRETS_KEY: randomBytes(32).toString("hex") }, ["--from-file", keyFile(h.config.secretsKey!)]), (err: { stdout: string; stderr: string }) => {
          const report = JSON.parse(err.stdout) as { unreadable: { kind: string; id: string }[] };
          assert.deepEqual(report.unreadable.map((u) => [u.kind, u.id]), [["endpoint", ep.id]]);
          assert.match(err.stderr, /nothing was changed/);
          return true;
        });
        const afterwards = await h.services.db.kysely.selectFrom("plugin_installations").select("secrets").executeTakeFirstOrThrow();
        assert.equal(afterwards.secrets, before.secrets, "the plugin's secrets were not moved either");
      } finally {
        await h.close();
      }
    });
  });
}

describe("rekey without SECRETS_KEY (the key file beside an SQLite database)", () => {
  test("moves every sealed value to a fresh key, writes it to data/secrets.key (the old one kept as secrets.key.old), and serve starts with it", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "rekey-file-"));
    const databaseUrl = `sqlite:${path.join(dir, "storefront.db")}`;
    try {
      // The embedded default: no SECRETS_KEY, the key generated into secrets.key beside the database.
      const services = await createServices(loadConfig({ DATABASE_URL: databaseUrl, ADMIN_TOKEN, LOG_LEVEL: "silent", ENDPOINT_ALLOW: "127.0.0.1" }));
      const app = await buildApp(services, { logger: false });
      const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
      const store = (await app.inject({ method: "POST", url: "/api/admin/stores", headers: auth, payload: { name: "File key" } })).json<{ id: string }>();
      expectStatus(await app.inject({ method: "PUT", url: `/api/admin/stores/${store.id}/plugins/pay`, headers: auth, payload: { source: SIGNED_PLUGIN, secrets: { key: "file-key-secret" } } }), 201);
      expectStatus(await app.inject({ method: "POST", url: `/api/admin/stores/${store.id}/endpoints`, headers: auth, payload: { url: "http://127.0.0.1:9/x" } }), 201);
      await app.close();
      await services.close();
      const file = path.join(dir, "secrets.key");
      const oldKey = readFileSync(file, "utf8").trim();

      const report = await rekey({ DATABASE_URL: databaseUrl, SECRETS_KEY: "" }, []);
      assert.equal(report.moved, 2);
      assert.equal(report.keyFile, file);
      const newKey = readFileSync(file, "utf8").trim();
      assert.notEqual(newKey, oldKey);
      assert.equal(parseSecretsKey(newKey).length, 32);
      assert.equal(readFileSync(`${file}.old`, "utf8").trim(), oldKey);

      const server = await startServer({ DATABASE_URL: databaseUrl, SECRETS_KEY: "", ADMIN_TOKEN });
      try {
        const r = await fetch(`${server.url}/api/admin/stores/${store.id}/plugins/pay`, { headers: auth });
        assert.equal(r.status, 200);
      } finally {
        await server.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
