// Where the server's bundle lives and what it was built from (tools/build-server.js builds it; storefront.js
// runs it while it is fresh). Plain JavaScript: it runs under the Node that runs npm, before any check.
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const DIST_DIR = path.join(ROOT, "node_modules/.cache/storefront/dist");
/** The bundle's entry points: output name → source, relative to ROOT. */
export const ENTRIES = {
  main: "src/main.ts",
  "sandbox.worker": "src/sandbox/sandbox.worker.ts",
  "readers.worker": "src/readmodel/readers.worker.ts",
};
// What the bundle is made of besides src/: the plugin test runner (`plugins test`) and the installed
// packages (npm rewrites node_modules/.package-lock.json at every install). package.json is read at run time.
const ALSO = ["tools/plugin-test", "node_modules/.package-lock.json"];

/**
 * The sources' fingerprint: every file's path, size and modification time (no content is read: a start
 * pays a few milliseconds for it). Any edit, checkout or install changes it.
 */
export function sourceStamp() {
  const parts = [];
  const visit = (relative) => {
    const full = path.join(ROOT, relative);
    const stat = statSync(full, { throwIfNoEntry: false });
    if (stat === undefined) return;
    if (!stat.isDirectory()) {
      parts.push(`${relative}:${stat.size}:${Math.trunc(stat.mtimeMs)}`);
      return;
    }
    for (const name of readdirSync(full).sort()) visit(path.join(relative, name));
  };
  for (const relative of ["src", ...ALSO]) visit(relative);
  return parts.join("\n");
}

/** The bundle's main entry when it was built from the sources as they are now, else undefined. */
export function freshBundle() {
  try {
    if (readFileSync(path.join(DIST_DIR, "stamp.json"), "utf8") !== JSON.stringify(sourceStamp())) return undefined;
    return path.join(DIST_DIR, "main.mjs");
  } catch {
    return undefined;
  }
}
