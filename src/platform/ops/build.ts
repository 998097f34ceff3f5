// What this build is, for storefront_build_info: the release (package.json's version) and the schema
// version it migrates a database to (its last migration).
import { readFileSync } from "node:fs";
import { latestMigration } from "../db/migrate.ts";

export interface BuildInfo {
  release: string;
  schema: string;
}

export function buildInfo(): BuildInfo {
  const { version } = JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string };
  return { release: version, schema: latestMigration() };
}
