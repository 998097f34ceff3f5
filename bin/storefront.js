#!/usr/bin/env node
// The `storefront` command: Node 24 runs the TypeScript sources directly (type stripping), no build step.
// Older Node cannot read .ts files: say so in one line instead of ERR_UNKNOWN_FILE_EXTENSION.
/* global process */
const major = Number(process.versions.node.split(".")[0]);
if (major < 24) {
  process.stderr.write(
    `storefront needs Node.js 24 or newer, this is ${process.version}: run it as \`npx storefront\` or \`npm start\` after \`npm ci\` (they use the Node 24 that npm installs), or install Node 24\n`,
  );
  process.exit(1);
}
const { runCli } = await import("../src/main.ts");
await runCli(process.argv);
