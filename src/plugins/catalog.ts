// The catalogue of reference plugins shipped in plugins-catalog/: `<name>.lua`, installable by name, with
// `<name>.json` beside it declaring the plugin's settings (the `secrets` it reads: name, required,
// description, default) and how its provider signs a delivery (so the console's bench can sign a body
// with a store's own secret).
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadFixtures } from "./fixtures.ts";

export const CATALOG_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../plugins-catalog");

const NAME = /^[a-z0-9][a-z0-9-]{0,63}$/;

export interface DeclaredSetting {
  name: string;
  required: boolean;
  description: string;
  /** What the plugin uses when the setting is absent (optional settings only). */
  default?: string;
}

export type SigningScheme = "generic-hmac" | "stripe" | "standard-webhooks" | "coinbase-commerce" | "nowpayments";

export interface CatalogManifest {
  secrets: DeclaredSetting[];
  /** How the provider signs a delivery; null when it cannot be signed here (PayPal verifies through its API). */
  signing: { scheme: SigningScheme } | null;
}

export interface CatalogEntry {
  name: string;
  /** The first comment line of the script. */
  summary: string;
  secrets: DeclaredSetting[];
  signable: boolean;
}

export function listCatalog(dir = CATALOG_DIR): CatalogEntry[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".lua") && NAME.test(f.slice(0, -4)))
    .sort()
    .map((f) => {
      const source = readFileSync(path.join(dir, f), "utf8");
      const first = /^--+\s*(.*)$/m.exec(source);
      const name = f.slice(0, -4);
      const manifest = readCatalogManifest(name, dir);
      return { name, summary: first?.[1]?.trim() ?? "", secrets: manifest.secrets, signable: manifest.signing !== null };
    });
}

/** The source of a catalogue plugin, or null when there is none of that name. */
export function readCatalogPlugin(name: string, dir = CATALOG_DIR): string | null {
  if (!NAME.test(name)) return null;
  try {
    return readFileSync(path.join(dir, `${name}.lua`), "utf8");
  } catch {
    return null;
  }
}

/** A catalogue plugin's declared settings and signing scheme; none declared when it has no `<name>.json`. */
export function readCatalogManifest(name: string, dir = CATALOG_DIR): CatalogManifest {
  if (!NAME.test(name)) return { secrets: [], signing: null };
  let text: string;
  try {
    text = readFileSync(path.join(dir, `${name}.json`), "utf8");
  } catch {
    return { secrets: [], signing: null };
  }
  const raw = JSON.parse(text) as Partial<CatalogManifest>;
  return { secrets: raw.secrets ?? [], signing: raw.signing ?? null };
}

/** The required settings that `secrets` lacks (absent or blank), in declaration order. */
export function missingRequiredSettings(manifest: CatalogManifest, secrets: Record<string, string>): string[] {
  return manifest.secrets.filter((s) => s.required && (secrets[s.name] ?? "").trim() === "").map((s) => s.name);
}

export interface CatalogFixture {
  name: string;
  description: string | null;
  request: { method: string; headers: Record<string, string>; query: Record<string, string>; body: string; bodyBase64: string | null };
  receivedAt: string | null;
  expect: unknown;
}

/** A catalogue plugin's fixtures as requests to try (secrets left out), or null when there is no such plugin. */
export function listCatalogFixtures(name: string, dir = CATALOG_DIR): CatalogFixture[] | null {
  if (readCatalogPlugin(name, dir) === null) return null;
  const fixtures = path.join(dir, "fixtures", name);
  if (!statSync(fixtures, { throwIfNoEntry: false })?.isDirectory()) return [];
  return loadFixtures(fixtures, { env: {}, pluginName: name }).flatMap((load) => {
    if (!load.ok) return [];
    const { fixture } = load;
    const body = fixture.request.body;
    const utf8 = body.toString("utf8");
    const text = Buffer.from(utf8, "utf8").equals(body);
    const raw = JSON.parse(readFileSync(fixture.file, "utf8")) as { expect?: unknown };
    return [
      {
        name: fixture.name,
        description: fixture.description,
        request: { method: fixture.request.method, headers: fixture.request.headers, query: fixture.request.query, body: text ? utf8 : "", bodyBase64: text ? null : body.toString("base64") },
        receivedAt: fixture.now === null ? null : new Date(fixture.now * 1000).toISOString(),
        expect: raw.expect ?? null,
      },
    ];
  });
}
