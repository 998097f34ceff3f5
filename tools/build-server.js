#!/usr/bin/env node
// Bundles the server for a fast start: one ES module for the main thread (src/main.ts and what `serve`
// loads) and one per worker thread, in node_modules/.cache/storefront/dist, with a stamp of the sources it
// was built from. bin/storefront.js runs the bundle while the stamp matches the sources and runs the
// sources otherwise (tests, a checkout being edited). Node loads ~2,000 files from the sources at each
// start; from the bundle a handful, which is most of the start-up time (bench/README.md, issue 30).
//
// Runs at install (`postinstall`), under whatever Node runs npm (20 on some machines): plain JavaScript,
// esbuild only. Never fails the install: without a bundle the service runs from its sources.
//   node tools/build-server.js [--quiet]
/* global process, console, URL */
import { mkdirSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { DIST_DIR, ENTRIES, ROOT, sourceStamp } from "../bin/bundle-stamp.js";

// Packages that must stay files of their own: native code (better-sqlite3, esbuild), WebAssembly read from
// beside their JavaScript (wasmoon), code that starts threads from its own files (pino's transports:
// thread-stream, pino-pretty). The PostgreSQL drivers, cli-progress and faker are loaded only when used, by
// require() at run time: they stay out of the bundle too.
const EXTERNAL = ["better-sqlite3", "esbuild", "wasmoon", "pino", "pino-pretty", "thread-stream", "pg", "pg-connection-string", "postgres", "cli-progress", "@faker-js/faker"];

/**
 * Sources find files next to themselves (`new URL("./prelude/x.lua", import.meta.url)`). In the bundle
 * `import.meta.url` is the bundle's, so each source's own is replaced by its address relative to the
 * bundle; a URL that names another entry point (a worker's) becomes that entry's bundle instead.
 */
const OWN = "__storefront_source_url__";
/** Defined at the top of every output file (the banner): a path relative to that file, as a file name. */
const FILE_OF = "__storefrontFile";

function importMetaPlugin(outdir) {
  const entryOut = new Map(Object.entries(ENTRIES).map(([out, src]) => [pathToFileURL(path.join(ROOT, src)).href, `./${out}.mjs`]));
  return {
    name: "import-meta-of-sources",
    setup(build) {
      build.onLoad({ filter: /\.ts$/ }, (args) => {
        if (args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
        const own = pathToFileURL(args.path).href;
        const relative = path.relative(outdir, args.path).split(path.sep).join("/");
        const ownExpr = `new URL(${JSON.stringify(relative)}, import.meta.url).href`;
        const source = readFileSync(args.path, "utf8");
        if (/\bimport\.meta\.(dirname|filename)\b/.test(source)) {
          throw new Error(`${relative}: import.meta.dirname/filename are not rewritten for the bundle; use import.meta.url`);
        }
        const code = source
          .replace(/\bimport\.meta\.url\b/g, OWN)
          .replace(new RegExp(`new URL\\(\\s*("[^"]+"|'[^']+'),\\s*${OWN}\\s*\\)`, "g"), (whole, literal) => {
            const bundled = entryOut.get(new URL(literal.slice(1, -1), own).href);
            return bundled === undefined ? whole : `new URL(${JSON.stringify(bundled)}, import.meta.url)`;
          })
          .replaceAll(OWN, `(${ownExpr})`)
          .replace(/\bimport\.meta\.main\b/g, "false");
        return { contents: code, loader: "ts" };
      });
      // CommonJS packages that find files beside themselves (swagger-ui's static files) get their own
      // __dirname and __filename, as Node gives them; esbuild wraps each such module in a function.
      build.onLoad({ filter: /[\\/]node_modules[\\/].*\.c?js$/ }, (args) => {
        const source = readFileSync(args.path, "utf8");
        if (!/\b__(dirname|filename)\b/.test(source)) return undefined;
        const file = JSON.stringify(path.relative(outdir, args.path).split(path.sep).join("/"));
        const dir = JSON.stringify(path.relative(outdir, path.dirname(args.path)).split(path.sep).join("/") + "/");
        return { contents: `var __filename = ${FILE_OF}(${file}), __dirname = ${FILE_OF}(${dir}).replace(/[\\/]$/, "");\n${source}`, loader: "js" };
      });
    },
  };
}

export async function buildServer({ quiet = false } = {}) {
  const esbuild = await import("esbuild");
  const staging = `${DIST_DIR}.tmp-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  const stamp = sourceStamp(); // taken before reading: an edit during the build makes the bundle stale, not wrong
  await esbuild.build({
    entryPoints: Object.fromEntries(Object.entries(ENTRIES).map(([out, src]) => [out, path.join(ROOT, src)])),
    outdir: staging,
    outExtension: { ".js": ".mjs" },
    bundle: true,
    splitting: true,
    // Chunks beside the entries: a source's address is made relative to the folder it lands in.
    chunkNames: "[name]-[hash]",
    format: "esm",
    platform: "node",
    target: "node24",
    external: EXTERNAL,
    // CommonJS packages inside the bundle require Node's built-ins (esbuild's require shim calls `require`).
    banner: {
      js: [
        'import { createRequire as __storefrontRequire } from "node:module";',
        'import { fileURLToPath as __storefrontPath } from "node:url";',
        "const require = __storefrontRequire(import.meta.url);",
        `const ${FILE_OF} = (relative) => __storefrontPath(new URL(relative, import.meta.url));`,
      ].join("\n"),
    },
    // Node runs the bundle from its real path (node_modules may be a link): addresses are relative to that.
    plugins: [importMetaPlugin(path.join(realpathSync(path.dirname(DIST_DIR)), path.basename(DIST_DIR)))],
    logLevel: quiet ? "error" : "warning",
    legalComments: "none",
  });
  writeFileSync(path.join(staging, "stamp.json"), JSON.stringify(stamp));
  rmSync(DIST_DIR, { recursive: true, force: true });
  renameSync(staging, DIST_DIR);
  if (!quiet) console.log(`storefront: server bundled into ${path.relative(process.cwd(), DIST_DIR) || DIST_DIR}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await buildServer({ quiet: process.argv.includes("--quiet") }).catch((error) => {
    console.warn(`storefront: no server bundle (${error.message.split("\n")[0]}); the service will run from its sources`);
  });
}
