// The events command line on a local SQLite database: add an endpoint (secret printed once, private URLs
// refused), list events, re-send one, list attempts and rotate the secret, as docs/events.md shows.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { test } from "node:test";
import { freshDatabase } from "../helpers/harness.ts";

const MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../src/main.ts");
const run = promisify(execFile);

test("storefront endpoints and events commands", async () => {
  const db = await freshDatabase("sqlite");
  const env = { ...process.env, DATABASE_URL: db.url, SECRETS_KEY: randomBytes(32).toString("hex"), LOG_LEVEL: "silent", ENDPOINT_ALLOW: "127.0.0.1" };
  const cli = async (...args: string[]) => (await run(process.execPath, [MAIN, ...args], { env })).stdout;
  try {
    const store = JSON.parse(await cli("stores", "create", "cli shop")) as { id: string };
    const endpoint = JSON.parse(await cli("endpoints", "add", "--store", store.id, "--url", "http://127.0.0.1:9/hooks", "--types", "invoice.created")) as { id: string; secret: string; types: string[] };
    assert.match(endpoint.secret, /^whsec_/);
    assert.deepEqual(endpoint.types, ["invoice.created"]);
    await assert.rejects(cli("endpoints", "add", "--store", store.id, "--url", "http://10.0.0.1/hooks"), (err: { code: number; stderr: string }) => {
      assert.equal(err.code, 1);
      assert.match(err.stderr, /private or reserved/);
      return true;
    });
    const listed = await cli("endpoints", "list", "--store", store.id);
    assert.match(listed, new RegExp(endpoint.id));
    assert.equal(listed.includes(endpoint.secret), false, "the secret is never listed");

    const customer = JSON.parse(await cli("customers", "create", "--store", store.id, "--email", "c@example.com")) as { id: string };
    await cli("checkout", "--store", store.id, "--customer", customer.id, "--item", "v:1:5");
    const events = await cli("events", "list", "--store", store.id);
    const eventId = /(evt_\w+)\s+invoice\.created/.exec(events)?.[1];
    assert.ok(eventId, events);
    assert.match(events, /next cursor: \S+/);
    const resent = JSON.parse(await cli("events", "resend", eventId, "--store", store.id)) as { deliveries: { endpointId: string }[] };
    assert.deepEqual(resent.deliveries.map((d) => d.endpointId), [endpoint.id]);
    const shown = JSON.parse(await cli("events", "show", eventId, "--store", store.id)) as { type: string; data: { invoice: { status: string } } };
    assert.equal(shown.data.invoice.status, "pending");
    assert.match(await cli("endpoints", "attempts", endpoint.id, "--store", store.id), /\(none\)/, "no attempt yet: serve sends");
    const rotated = JSON.parse(await cli("endpoints", "rotate-secret", endpoint.id, "--store", store.id)) as { secret: string };
    assert.notEqual(rotated.secret, endpoint.secret);
    const disabled = JSON.parse(await cli("endpoints", "update", endpoint.id, "--store", store.id, "--disable")) as { enabled: boolean };
    assert.equal(disabled.enabled, false);
    assert.match(await cli("endpoints", "remove", endpoint.id, "--store", store.id), /removed/);
  } finally {
    await db.drop();
  }
});
