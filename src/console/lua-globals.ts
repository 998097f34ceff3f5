// The sandbox's globals for the console editor's completion, read from the one source that also serves
// LuaLS: plugins-catalog/types/storefront.lua. Its `---` doc comments, `---@class`/`---@field`,
// `---@type` and `function name(args) end` lines become completion entries.
import { readFileSync } from "node:fs";
import path from "node:path";
import { CATALOG_DIR } from "../plugins/catalog.ts";

export interface LuaGlobal {
  /** `request`, `json.encode`, `request.headers` */
  label: string;
  type: "function" | "variable" | "namespace" | "property";
  /** `(key, data, hash, encoding)` for functions, the Lua type for the rest. */
  detail: string;
  info: string;
}

export const LUA_DEFINITIONS = path.join(CATALOG_DIR, "types/storefront.lua");

export function parseLuaDefinitions(text: string): LuaGlobal[] {
  const out: LuaGlobal[] = [];
  const classes = new Map<string, { name: string; type: string; info: string }[]>();
  let doc: string[] = [];
  let currentClass: string | null = null;
  let pendingType: string | null = null;
  for (const raw of text.split("\n")) {
    const line = raw.trimEnd();
    let m: RegExpExecArray | null;
    if ((m = /^---@class\s+([\w.]+)/.exec(line))) {
      currentClass = m[1]!;
      classes.set(currentClass, []);
      continue;
    }
    if ((m = /^---@field\s+([\w]+)\??\s+(\S+)\s*(.*)$/.exec(line)) && currentClass !== null) {
      classes.get(currentClass)!.push({ name: m[1]!, type: m[2]!, info: m[3]! });
      continue;
    }
    if ((m = /^---@type\s+(.+)$/.exec(line))) {
      pendingType = m[1]!.trim();
      continue;
    }
    if (line.startsWith("---@")) continue;
    if (line.startsWith("---")) {
      doc.push(line.slice(3).trim());
      continue;
    }
    if ((m = /^function\s+([\w.]+)\s*\(([^)]*)\)/.exec(line))) {
      out.push({ label: m[1]!, type: "function", detail: `(${m[2]!})`, info: doc.join(" ") });
    } else if ((m = /^([\w]+)\s*=\s*\{\}/.exec(line))) {
      const name = m[1]!;
      const type = pendingType ?? currentClass ?? "table";
      out.push({ label: name, type: classes.has(type) || currentClass !== null ? "namespace" : "variable", detail: type, info: doc.join(" ") });
      for (const field of classes.get(type) ?? []) out.push({ label: `${name}.${field.name}`, type: "property", detail: field.type, info: field.info });
    }
    if (line === "" || !line.startsWith("--")) {
      doc = line === "" ? [] : doc;
      if (line !== "") {
        doc = [];
        pendingType = null;
        currentClass = null;
      }
    }
  }
  const seen = new Set<string>();
  return out.filter((g) => !seen.has(g.label) && seen.add(g.label));
}

let cached: LuaGlobal[] | null = null;
export function luaGlobals(): LuaGlobal[] {
  return (cached ??= parseLuaDefinitions(readFileSync(LUA_DEFINITIONS, "utf8")));
}
