#!/usr/bin/env node
// The `storefront` command: Node 24 runs the TypeScript sources directly (type stripping), or their bundle.
// Older Node cannot read .ts files: say so in one line instead of ERR_UNKNOWN_FILE_EXTENSION.
/* global process */
import module from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { freshBundle } from "./bundle-stamp.js";

const major = Number(process.versions.node.split(".")[0]);
if (major < 24) {
  process.stderr.write(
    `storefront needs Node.js 24 or newer, this is ${process.version}: run it as \`npx storefront\` or \`npm start\` after \`npm ci\` (they use the Node 24 that npm installs), or install Node 24\n`,
  );
  process.exit(1);
}
// Node's compile cache keeps each source's stripped JavaScript and compiled code, keyed by its content: from
// the second start on, no thread loads the TypeScript stripper (about 18 MB each) and start-up is faster.
// Kept in node_modules (the install's own directory, not a shared /tmp); the environment variable carries it
// to the worker threads. A directory that cannot be written only means no cache.
if (process.env.NODE_COMPILE_CACHE === undefined) {
  process.env.NODE_COMPILE_CACHE = path.join(path.dirname(fileURLToPath(import.meta.url)), "../node_modules/.cache/storefront/compile");
}
module.enableCompileCache?.(process.env.NODE_COMPILE_CACHE);
// The server's bundle (built at install by tools/build-server.js) when it was built from these very sources:
// a few files to load instead of ~2,000, most of the start-up time. Otherwise, or with STOREFRONT_SOURCES=1,
// the sources themselves.
const bundle = process.env.STOREFRONT_SOURCES === "1" ? undefined : freshBundle();
const { runCli } = await import(bundle === undefined ? "../src/main.ts" : pathToFileURL(bundle).href);
await runCli(process.argv);
