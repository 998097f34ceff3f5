// What this build is: the release (package.json's version, bumped for each release, see CHANGELOG.md) and
// the schema version (the name of its newest migration). `--version`, start-up logs and error messages
// name both, so an operator can tell which code runs on which database.
import { readFileSync } from "node:fs";
import { SCHEMA_VERSION } from "../db/migrate.ts";

export const RELEASE: string = (JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string }).version;

export { SCHEMA_VERSION };

/** `storefront 0.2.0 (schema 0017_lean_payments)`. */
export function versionLine(): string {
  return `storefront ${RELEASE} (schema ${SCHEMA_VERSION})`;
}
