// The reader threads reach PostgreSQL through postgres.js (their rows are bytes), the rest of the service
// through pg: both must connect where DATABASE_URL says and as it says. pg's own parser reads the URL and
// its settings are handed to postgres.js (src/platform/db/database.ts, postgresJsOptions).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { postgresJsOptions } from "../../../src/platform/db/database.ts";

test("host, port, database, user, password, options and application_name come from the URL; generic plans are added to its options", () => {
  const url = "postgres://shop:s%40cret@db.internal:6432/storefront?options=-c%20search_path%3Dtenant_a&application_name=shop-api";
  const o = postgresJsOptions(url, true);
  assert.equal(o.host, "db.internal");
  assert.equal(o.port, 6432);
  assert.equal(o.database, "storefront");
  assert.equal(o.user, "shop");
  assert.equal(o.pass, "s@cret");
  assert.equal(o.ssl, false);
  assert.deepEqual(o.connection, { application_name: "shop-api", options: "-c search_path=tenant_a -c plan_cache_mode=force_generic_plan" });
  assert.deepEqual(postgresJsOptions("postgres://u@h/d", false).connection, { application_name: "storefront reader" });
});

test("TLS: sslmode asks for it with the certificate checked, no-verify does not check, disable turns it off, sslrootcert is read", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-tls-"));
  try {
    const ca = path.join(dir, "root.crt");
    writeFileSync(ca, "-----BEGIN CERTIFICATE-----\nnot a real one\n-----END CERTIFICATE-----\n");
    const verified = postgresJsOptions("postgres://u@h/d?sslmode=verify-full", false).ssl;
    assert.ok(typeof verified === "object" && verified !== null, "TLS on");
    assert.notEqual((verified as { rejectUnauthorized?: boolean }).rejectUnauthorized, false, "the certificate is checked");
    const unchecked = postgresJsOptions("postgres://u@h/d?sslmode=no-verify", false).ssl as { rejectUnauthorized?: boolean };
    assert.equal(unchecked.rejectUnauthorized, false);
    assert.equal(postgresJsOptions("postgres://u@h/d?sslmode=disable", false).ssl, false);
    assert.deepEqual(postgresJsOptions("postgres://u@h/d?ssl=true", false).ssl, {});
    const withCa = postgresJsOptions(`postgres://u@h/d?sslmode=verify-full&sslrootcert=${encodeURIComponent(ca)}`, false).ssl as { ca?: string };
    assert.match(withCa.ca ?? "", /not a real one/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a Unix socket directory as host", () => {
  const o = postgresJsOptions("postgres://u@%2Fvar%2Frun%2Fpostgresql/storefront", false);
  assert.equal(o.host, "/var/run/postgresql");
  assert.equal(o.database, "storefront");
});
