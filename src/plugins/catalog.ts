// The catalogue of reference plugins shipped in plugins-catalog/: `<name>.lua`, installable by name.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const CATALOG_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../plugins-catalog");

const NAME = /^[a-z0-9][a-z0-9-]{0,63}$/;

export interface CatalogEntry {
  name: string;
  /** The first comment line of the script. */
  summary: string;
}

export function listCatalog(dir = CATALOG_DIR): CatalogEntry[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".lua") && NAME.test(f.slice(0, -4)))
    .sort()
    .map((f) => {
      const source = readFileSync(path.join(dir, f), "utf8");
      const first = /^--+\s*(.*)$/m.exec(source);
      return { name: f.slice(0, -4), summary: first?.[1]?.trim() ?? "" };
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
