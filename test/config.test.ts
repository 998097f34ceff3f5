// Configuration is checked once: defaults with nothing set, and every bad value named in one error.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ConfigError, loadConfig } from "../src/config.ts";
import { parseIsoDate } from "../src/lib/list-query.ts";

test("with no configuration at all the embedded SQLite default and documented defaults apply", () => {
  const c = loadConfig({});
  assert.equal(c.port, 3000);
  assert.equal(c.host, "127.0.0.1");
  assert.deepEqual(c.database, { kind: "sqlite", file: "./data/storefront.db" });
  assert.equal(c.apiNamespace, "service");
  assert.equal(c.adminToken, null);
  assert.equal(c.plugin.cpuMs, 250);
  assert.equal(c.plugin.wallMs, 10_000);
  assert.equal(c.plugin.memoryBytes, 32 * 1024 * 1024);
  assert.equal(c.plugin.maxFetches, 10);
  assert.equal(c.plugin.maxResultBytes, 64 * 1024);
  assert.ok(Object.isFrozen(c) && Object.isFrozen(c.plugin), "config is frozen");
});

test("postgres:// selects PostgreSQL and API_NAMESPACE moves the list operations", () => {
  const c = loadConfig({ DATABASE_URL: "postgres://u@h:5432/db", API_NAMESPACE: "shop" });
  assert.deepEqual(c.database, { kind: "postgres", url: "postgres://u@h:5432/db" });
  assert.equal(c.apiNamespace, "shop");
});

test("a PostgreSQL Unix socket is a host parameter; the URL without a host is refused with that form", () => {
  const socket = "postgres://u@localhost/db?host=/var/run/postgresql";
  assert.deepEqual(loadConfig({ DATABASE_URL: socket }).database, { kind: "postgres", url: socket });
  assert.throws(
    () => loadConfig({ DATABASE_URL: "postgres://u@/db?host=/var/run/postgresql" }),
    (err: unknown) => err instanceof ConfigError && err.problems.length === 1 && /^DATABASE_URL is not a valid URL.*postgres:\/\/user@localhost\/storefront\?host=\/var\/run\/postgresql/.test(err.problems[0]!),
  );
});

test("every bad variable is reported at once, each by name", () => {
  try {
    loadConfig({ PORT: "http", DATABASE_URL: "mysql://x", LOG_LEVEL: "loud", PLUGIN_CPU_MS: "-5", SECRETS_KEY: "short", API_NAMESPACE: "a/b", ADMIN_TOKEN: "x" });
    assert.fail("expected ConfigError");
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    for (const name of ["PORT", "DATABASE_URL", "LOG_LEVEL", "PLUGIN_CPU_MS", "SECRETS_KEY", "API_NAMESPACE", "ADMIN_TOKEN"]) {
      assert.ok(err.problems.some((p) => p.startsWith(name)), `${name} is named: ${err.message}`);
    }
  }
});

test("ISO dates: offsets, fractions, bare dates as whole UTC days; impossible dates refused", () => {
  assert.equal(parseIsoDate("2023-06-15T14:30:00Z", false), Date.parse("2023-06-15T14:30:00.000Z"));
  assert.equal(parseIsoDate("2023-06-15T16:30:00+02:00", false), Date.parse("2023-06-15T14:30:00.000Z"));
  assert.equal(parseIsoDate("2023-06-15T14:30:00.123456Z", false), Date.parse("2023-06-15T14:30:00.123Z"));
  assert.equal(parseIsoDate("2023-06-15", false), Date.parse("2023-06-15T00:00:00.000Z"));
  assert.equal(parseIsoDate("2023-06-15", true), Date.parse("2023-06-15T23:59:59.999Z"));
  assert.equal(parseIsoDate("2024-02-29", false), Date.parse("2024-02-29T00:00:00.000Z"));
  for (const bad of ["2023-02-29", "2023-06-15T14:30:00", "2023-06-15T24:00:00Z", "15/06/2023", "2023-6-15", "", "2023-06-15T14:30:00+25:00"]) {
    assert.equal(parseIsoDate(bad, false), null, bad);
  }
});

test("console streams default to a quarter of HTTP_MAX_CONNECTIONS and may take at most half of it", () => {
  assert.deepEqual(loadConfig({ HTTP_MAX_CONNECTIONS: "100" }).consoleStreams, { perSession: 4, max: 25 });
  assert.deepEqual(loadConfig({ HTTP_MAX_CONNECTIONS: "1" }).consoleStreams.max, 1);
  assert.throws(
    () => loadConfig({ HTTP_MAX_CONNECTIONS: "100", CONSOLE_STREAMS_MAX: "51" }),
    (err: unknown) => err instanceof ConfigError && err.problems.some((p) => p.startsWith("CONSOLE_STREAMS_MAX") && p.includes("HTTP_MAX_CONNECTIONS")),
  );
});

test("TRUST_PROXY takes addresses, ranges and names or a hop count; true is refused with the accepted forms", () => {
  assert.deepEqual(loadConfig({}).trustProxy, { kind: "none" });
  assert.deepEqual(loadConfig({ TRUST_PROXY: "false" }).trustProxy, { kind: "none" });
  assert.deepEqual(loadConfig({ TRUST_PROXY: "1" }).trustProxy, { kind: "hops", hops: 1 });
  assert.deepEqual(loadConfig({ TRUST_PROXY: "loopback, 10.0.0.0/8,fd00::/8" }).trustProxy, { kind: "addresses", entries: ["loopback", "10.0.0.0/8", "fd00::/8"] });
  for (const value of ["true", "TRUE", "yes", "on"]) {
    assert.throws(
      () => loadConfig({ TRUST_PROXY: value }),
      (err: unknown) => err instanceof ConfigError && err.problems.length === 1 && /^TRUST_PROXY=\w+ would let every client choose its own address.*TRUST_PROXY=1.*10\.0\.0\.0\/8/.test(err.problems[0]!),
      value,
    );
  }
  for (const value of ["10.0.0.0/33", "proxy.internal", "17"]) {
    assert.throws(() => loadConfig({ TRUST_PROXY: value }), (err: unknown) => err instanceof ConfigError && err.problems[0]!.startsWith("TRUST_PROXY"), value);
  }
});
