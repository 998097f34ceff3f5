// What the code relies on is written down in the repository itself: code, tests and the changelog cite the
// README and docs/, never a document the repository does not have, and every docs/ file they name exists.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { REPO } from "./helpers/cli.ts";

function files(dir: string): string[] {
  return readdirSync(path.join(REPO, dir)).flatMap((name) => {
    const rel = path.join(dir, name);
    if (statSync(path.join(REPO, rel)).isDirectory()) return name === "results" ? [] : files(rel);
    return /\.(ts|js|lua|md)$/.test(name) ? [rel] : [];
  });
}

const SOURCES = [...files("src"), ...files("test"), ...files("bench"), ...files("bin"), "CHANGELOG.md"];

test("code, tests and the changelog cite no document outside the repository (no CONTRACT §n)", () => {
  const citing = SOURCES.filter((file) => /\bCONTRACT\b/.test(readFileSync(path.join(REPO, file), "utf8")) && !file.endsWith("docs.test.ts"));
  assert.deepEqual(citing, []);
});

test("every docs/ file the code and the changelog name exists", () => {
  const missing = new Set<string>();
  for (const file of SOURCES) {
    for (const [doc] of readFileSync(path.join(REPO, file), "utf8").matchAll(/\bdocs\/[\w./-]+\.md\b/g)) if (!existsSync(path.join(REPO, doc))) missing.add(`${file}: ${doc}`);
  }
  assert.deepEqual([...missing], []);
});
