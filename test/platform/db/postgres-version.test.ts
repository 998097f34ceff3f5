// The oldest PostgreSQL a release runs on: a server older than that is refused before any migration runs,
// in one line naming its version (the read model's documents are built with functions 13 added).
import assert from "node:assert/strict";
import { test } from "node:test";
import { checkPostgresVersion, DatabaseTooOldError, OLDEST_POSTGRES } from "../../../src/platform/db/migrate.ts";

test("a PostgreSQL server older than 13 is refused, naming its version; 13 and newer are taken", () => {
  assert.throws(() => checkPostgresVersion(120017, "12.17"), (err: unknown) => err instanceof DatabaseTooOldError && /^PostgreSQL 12\.17 is older .* \(13 or newer\)$/.test(err.message));
  assert.throws(() => checkPostgresVersion(Number(undefined), "of unknown version"), DatabaseTooOldError, "a version it cannot read is refused too");
  for (const version of [OLDEST_POSTGRES, 150020, 180000]) assert.doesNotThrow(() => checkPostgresVersion(version, String(version)));
});
