// The console's browser code, bundled by esbuild from console-ui/src/main.ts into memory once per process
// (no build step, nothing written to disk), named by content hash and compressed ahead of time (brotli,
// gzip) so every request is a lookup. The first console request builds it (a second or two, once), and
// esbuild's child process is stopped as soon as it is built: a service nobody opens the console on never
// starts it.
import { createHash } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { brotliCompressSync, constants as zlib, gzipSync } from "node:zlib";
import type * as EsbuildModule from "esbuild";

type Esbuild = typeof EsbuildModule;

export interface ConsoleAsset {
  /** Content-hashed by esbuild: `app-<hash>.js`, `chunk-<hash>.js`, `app-<hash>.css`. */
  name: string;
  contentType: string;
  etag: string;
  identity: Buffer;
  br: Buffer;
  gzip: Buffer;
}

export interface ConsoleBundle {
  /** The entry's script and style, which the HTML shell names. */
  script: string;
  style: string;
  byName: Map<string, ConsoleAsset>;
}

export const CONSOLE_UI_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../console-ui");

let building: Promise<ConsoleBundle> | null = null;

/** The bundle, built on the first call (the same promise afterwards). */
export function consoleBundle(): Promise<ConsoleBundle> {
  building ??= buildBundle().catch((err: unknown) => {
    building = null; // a later request tries again (and reports the same error if it persists)
    throw err;
  });
  return building;
}

const CONTENT_TYPES: Record<string, string> = { ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8" };

async function buildBundle(): Promise<ConsoleBundle> {
  const esbuild = await import("esbuild");
  try {
    return await bundleWith(esbuild);
  } finally {
    // esbuild builds in a child process that would otherwise live as long as this one: the bundle is
    // built once, so the child goes as soon as it is done.
    await esbuild.stop();
  }
}

async function bundleWith(esbuild: Esbuild): Promise<ConsoleBundle> {
  // Split: the editor (CodeMirror) is a chunk of its own, loaded when a plugin page opens, so the
  // first page a merchant sees loads only the shell.
  const result = await esbuild.build({
    entryPoints: { app: path.join(CONSOLE_UI_ROOT, "src/main.ts") },
    bundle: true,
    splitting: true,
    write: false,
    minify: true,
    format: "esm",
    target: "es2022",
    outdir: "/console-out",
    entryNames: "[name]-[hash]",
    chunkNames: "chunk-[hash]",
    legalComments: "none",
    logLevel: "silent",
    metafile: true,
    tsconfig: path.join(CONSOLE_UI_ROOT, "tsconfig.json"),
  });
  const byName = new Map<string, ConsoleAsset>();
  for (const file of result.outputFiles) {
    const name = path.basename(file.path);
    const type = CONTENT_TYPES[path.extname(name)];
    if (type === undefined) continue;
    byName.set(name, compress(name, type, Buffer.from(file.contents)));
  }
  const entry = Object.entries(result.metafile.outputs).find(([, o]) => o.entryPoint !== undefined);
  if (!entry) throw new Error("esbuild produced no entry script for the console");
  const script = path.basename(entry[0]);
  const style = entry[1].cssBundle === undefined ? null : path.basename(entry[1].cssBundle);
  if (style === null) throw new Error("esbuild produced no style sheet for the console");
  return { script, style, byName };
}

function compress(name: string, contentType: string, identity: Buffer): ConsoleAsset {
  const hash = createHash("sha256").update(identity).digest("base64url").slice(0, 16);
  return {
    name,
    contentType,
    etag: `"${hash}"`,
    identity,
    br: brotliCompressSync(identity, { params: { [zlib.BROTLI_PARAM_QUALITY]: 11, [zlib.BROTLI_PARAM_SIZE_HINT]: identity.length } }),
    gzip: gzipSync(identity, { level: 9 }),
  };
}
