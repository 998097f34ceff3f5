// Plugin installations per store and name: each upload of source is a new version (old ones stay
// readable), secrets are sealed with the SecretBox and never shown (only their names), and a plugin can
// be enabled or disabled. Uploads that do not compile are refused with the line number. An installation can
// be removed (its deliveries stay), rolled back to an earlier version, and two versions compared.
import type { Kysely } from "kysely";
import { isUniqueViolation } from "../platform/db/db-errors.ts";
import type { Database } from "../platform/db/schema.ts";
import { AppError } from "../errors.ts";
import { diffLines, unifiedDiff } from "../lib/line-diff.ts";
import type { CompileCheck } from "../sandbox/index.ts";
import { readCatalogPlugin } from "./catalog.ts";
import { sourceRangesProblem } from "./source-ranges.ts";
import { type InstallInput, type InstallResult, installOnce, requireDeclaredSettings } from "./plugins.install.ts";
import { createPluginsRepository, type InstallationRow } from "./plugins.repository.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";
import type { KeyCache } from "../stores/key-cache.ts";
import { createStoresRepository } from "../stores/stores.repository.ts";

export const PLUGIN_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
/** Versions are PostgreSQL integers. */
export const MAX_VERSION = 2_147_483_647;
export const MAX_SOURCE_BYTES = 256 * 1024;
/** A secret's name is a Lua identifier (`secrets.name` in a plugin), at most 64 characters; names are stored space-separated. */
export const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
export const MAX_SECRET_BYTES = 8192;

export type { InstallInput, InstallResult } from "./plugins.install.ts";

export interface PluginInfo {
  name: string;
  version: number;
  enabled: boolean;
  secretNames: string[];
  /** The provider's source ranges (CIDRs) deliveries must come from; null: from anywhere. */
  allowedSources: string[] | null;
  catalog: string | null;
  /** The catalogue plugin it was installed from, also after its source was edited: its declared settings apply. */
  catalogBase: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface PluginVersionInfo {
  version: number;
  sha256: string;
  catalog: string | null;
  note: string | null;
  createdAt: string;
  current: boolean;
}

export interface RunnablePlugin {
  storeId: string;
  name: string;
  version: number;
  enabled: boolean;
  source: string;
  secrets: Record<string, string>;
  /** The provider's source ranges deliveries must come from; null: from anywhere. */
  allowedSources: string[] | null;
}

/** What the webhook needs to know before any work: whether there is an enabled plugin to run, and from where. */
export interface DeliveryTarget {
  /** The store exists and has the plugin installed and enabled. */
  runnable: boolean;
  allowedSources: string[] | null;
}

export interface PluginDiff {
  name: string;
  from: { version: number; sha256: string };
  to: { version: number; sha256: string };
  identical: boolean;
  added: number;
  removed: number;
  /** Unified diff (`diff -u`) of the sources; "" when they are identical. */
  diff: string;
}

export interface PluginsService {
  install(storeId: string, name: string, input: InstallInput): Promise<InstallResult>;
  /** Replaces the plugin's settings whole (but for the stored ones named in `keep`); its code and version are untouched. */
  replaceSecrets(storeId: string, name: string, secrets: Record<string, string>, keep?: string[]): Promise<PluginInfo>;
  list(storeId: string): Promise<PluginInfo[]>;
  get(storeId: string, name: string): Promise<PluginInfo & { source: string }>;
  versions(storeId: string, name: string): Promise<PluginVersionInfo[]>;
  versionSource(storeId: string, name: string, version: number): Promise<string>;
  setEnabled(storeId: string, name: string, enabled: boolean): Promise<PluginInfo>;
  /** Removes the installation with its versions and secrets; its deliveries stay in the log. */
  remove(storeId: string, name: string): Promise<void>;
  /** Makes an existing version current again (no new version is made). */
  rollback(storeId: string, name: string, version: number): Promise<PluginInfo>;
  /** Differences between two versions' sources; `to` defaults to the current version, `from` to the one before `to`. */
  diff(storeId: string, name: string, versions: { from?: number; to?: number }): Promise<PluginDiff>;
  /**
   * What a delivery or simulation runs: the given version (default: current) with decrypted secrets.
   * Throws store_not_found / plugin_not_found; a disabled plugin is returned with enabled=false.
   */
  loadForRun(storeId: string, name: string, version?: number): Promise<RunnablePlugin>;
  /** One lookup, no secrets opened: see DeliveryTarget. */
  deliveryTarget(storeId: string, name: string): Promise<DeliveryTarget>;
}

export interface PluginCompiler {
  check(source: string): Promise<CompileCheck> | CompileCheck;
}

/** Stored source ranges: a JSON array of CIDRs, or null (from anywhere). */
const parseSources = (stored: string | null): string[] | null => (stored === null ? null : (JSON.parse(stored) as string[]));

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * `remembered` keeps the current version of the plugins payments run, with their opened secrets, between
 * deliveries (a payment then reads nothing before its own transaction); every change made here forgets
 * them all, as a change made elsewhere does through the database (src/stores/key-cache.ts).
 */
export function createPluginsService(db: Kysely<Database>, box: SecretBox, compiler: PluginCompiler, now: () => number = Date.now, remembered: KeyCache<RunnablePlugin> | null = null): PluginsService {
  const repo = createPluginsRepository(db);
  const stores = createStoresRepository(db);
  /** Forgets the remembered plugins once a change of this process has committed (and before it answers). */
  const changed = async <T>(work: Promise<T>): Promise<T> => {
    try {
      return await work;
    } finally {
      remembered?.clear();
    }
  };
  async function requireStore(storeId: string) {
    if (!(await stores.storeExists(storeId))) throw new AppError("store_not_found", `No store ${storeId}`, { param: "storeId" });
  }

  async function requireInstallation(storeId: string, name: string) {
    await requireStore(storeId);
    const row = await repo.installation(storeId, name);
    if (!row) throw new AppError("plugin_not_found", `No plugin ${name} in store ${storeId}`, { param: "pluginName" });
    return row;
  }

  const toInfo = (r: InstallationRow): PluginInfo => ({
    name: r.name,
    version: r.current_version,
    enabled: r.enabled !== 0,
    secretNames: r.secret_names === "" ? [] : r.secret_names.split(" "),
    allowedSources: parseSources(r.allowed_sources),
    catalog: r.catalog_name,
    catalogBase: r.catalog_base,
    createdAt: iso(r.created_at),
    updatedAt: iso(r.updated_at),
  });

  /** Changes the installation's row, then answers with it as it now is. */
  async function update(storeId: string, name: string, installationId: string, changes: Parameters<typeof repo.updateInstallation>[1]): Promise<PluginInfo> {
    await changed(repo.updateInstallation(installationId, changes));
    return toInfo(await requireInstallation(storeId, name));
  }

  /** The source to install: the given one or the catalogue's, refused when it is too large or does not compile. */
  async function checkedSource(input: InstallInput): Promise<string | undefined> {
    let source = input.source;
    if (input.catalog !== undefined) {
      const fromCatalog = readCatalogPlugin(input.catalog);
      if (fromCatalog === null) throw new AppError("plugin_not_found", `No catalogue plugin ${input.catalog}`, { param: "catalog" });
      source = fromCatalog;
    }
    if (source === undefined) return undefined;
    if (Buffer.byteLength(source) > MAX_SOURCE_BYTES) throw new AppError("invalid_plugin", `source is larger than ${MAX_SOURCE_BYTES} bytes`, { param: "source" });
    const check = await compiler.check(source);
    if (!check.ok) {
      throw new AppError("invalid_plugin", `The plugin does not compile${check.line === null ? "" : ` (line ${check.line})`}: ${check.message}`, {
        param: "source",
        details: { line: check.line },
      });
    }
    return source;
  }

  async function loadForRun(storeId: string, name: string, version?: number): Promise<RunnablePlugin> {
    if (version !== undefined || remembered === null) return loadFromDatabase(storeId, name, version);
    const key = `${storeId}\u0000${name}`;
    const known = remembered.get(key);
    if (known !== undefined) return known;
    const remember = remembered.begin();
    const plugin = await loadFromDatabase(storeId, name, undefined);
    remember(key, plugin);
    return plugin;
  }

  async function loadFromDatabase(storeId: string, name: string, version: number | undefined): Promise<RunnablePlugin> {
    // One query: store, installation and the version's source together.
    const row = await repo.runnable(storeId, name, version);
    if (!row) throw new AppError("store_not_found", `No store ${storeId}`, { param: "storeId" });
    if (row.installation_id === null) throw new AppError("plugin_not_found", `No plugin ${name} installed in store ${storeId}`, { param: "pluginName" });
    if (row.version === null || row.source === null) throw new AppError("plugin_not_found", `Plugin ${name} has no version ${version ?? "current"}`, { param: "version" });
    const secrets = box.open(row.secrets ?? "");
    if (secrets === null) throw new AppError("secrets_unavailable", `The secrets of plugin ${name} in store ${storeId} cannot be opened: SECRETS_KEY differs from the key they were stored with`);
    return { storeId, name, version: row.version, enabled: row.enabled !== 0, source: row.source, secrets, allowedSources: parseSources(row.allowed_sources) };
  }

  /** The delivery target read alone (no secrets opened): for a plugin whose secrets this key cannot open. */
  async function targetFromDatabase(storeId: string, name: string): Promise<DeliveryTarget> {
    const row = await repo.deliveryTarget(storeId, name);
    return { runnable: row?.enabled === 1, allowedSources: parseSources(row?.allowed_sources ?? null) };
  }

  async function versionRow(installationId: string, name: string, version: number) {
    const row = await repo.version(installationId, version);
    if (!row) throw new AppError("plugin_not_found", `Plugin ${name} has no version ${version}`, { param: "version" });
    return row;
  }

  return {
    async install(storeId, name, input) {
      if (!PLUGIN_NAME.test(name)) {
        throw new AppError("invalid_request", "plugin name must be 1-64 letters, digits, _ or -, starting with a letter or digit", { param: "name" });
      }
      const badName = Object.keys(input.secrets ?? {}).find((k) => !SECRET_NAME.test(k));
      if (badName !== undefined) {
        throw new AppError("invalid_request", `secret name "${badName.slice(0, 64)}" is not 1-64 letters, digits or _ starting with a letter or _`, { param: "secrets" });
      }
      if (input.allowedSources !== undefined && input.allowedSources !== null) {
        const problem = sourceRangesProblem(input.allowedSources);
        if (problem !== null) throw new AppError("invalid_request", problem, { param: "allowedSources" });
      }
      if (input.source !== undefined && input.catalog !== undefined) {
        throw new AppError("invalid_request", "give either source or catalog, not both", { param: "catalog" });
      }
      const source = await checkedSource(input);
      await requireStore(storeId);
      const t = now();
      // Two first installs of one name at once (PostgreSQL): the loser's insert hits the unique
      // constraint; run it again, and it becomes an update of the installation the winner created.
      for (let attempt = 1; ; attempt++) {
        try {
          return await changed(installOnce(db, box, { storeId, name, t }, input, source));
        } catch (err) {
          if (attempt >= 3 || !isUniqueViolation(err)) throw err;
        }
      }
    },

    async list(storeId) {
      await requireStore(storeId);
      return (await repo.installations(storeId)).map(toInfo);
    },

    async get(storeId, name) {
      const row = await requireInstallation(storeId, name);
      return { ...toInfo(row), source: row.source };
    },

    async versions(storeId, name) {
      const inst = await requireInstallation(storeId, name);
      const rows = await repo.versions(inst.id);
      return rows.map((r) => ({ version: r.version, sha256: r.source_sha256, catalog: r.catalog_name, note: r.note, createdAt: iso(r.created_at), current: r.version === inst.current_version }));
    },

    async versionSource(storeId, name, version) {
      const inst = await requireInstallation(storeId, name);
      return (await versionRow(inst.id, name, version)).source;
    },

    async replaceSecrets(storeId, name, given, keep = []) {
      const inst = await requireInstallation(storeId, name);
      let secrets = given;
      if (keep.length > 0) {
        const stored = box.open(inst.secrets);
        if (stored === null) throw new AppError("conflict", "The stored settings cannot be opened with this SECRETS_KEY, so none can be kept: send every one", { param: "keep" });
        secrets = { ...Object.fromEntries(keep.filter((k) => k in stored).map((k) => [k, stored[k]!])), ...given };
      }
      requireDeclaredSettings(inst.catalog_base, secrets);
      const secretNames = Object.keys(secrets).sort().join(" ");
      return update(storeId, name, inst.id, { secrets: box.seal(secrets), secret_names: secretNames, updated_at: now() });
    },

    async setEnabled(storeId, name, enabled) {
      const inst = await requireInstallation(storeId, name);
      return update(storeId, name, inst.id, { enabled: enabled ? 1 : 0, updated_at: now() });
    },

    async remove(storeId, name) {
      const inst = await requireInstallation(storeId, name);
      await changed(repo.removeInstallation(inst.id));
    },

    async rollback(storeId, name, version) {
      const inst = await requireInstallation(storeId, name);
      await versionRow(inst.id, name, version);
      return update(storeId, name, inst.id, { current_version: version, updated_at: now() });
    },

    async diff(storeId, name, versions) {
      const inst = await requireInstallation(storeId, name);
      const toVersion = versions.to ?? inst.current_version;
      const fromVersion = versions.from ?? toVersion - 1;
      if (fromVersion < 1) throw new AppError("invalid_request", `version ${toVersion} has no version before it: give the version to compare with (from)`, { param: "from" });
      const [from, to] = [await versionRow(inst.id, name, fromVersion), await versionRow(inst.id, name, toVersion)];
      const lines = diffLines(from.source, to.source);
      return {
        name,
        from: { version: from.version, sha256: from.source_sha256 },
        to: { version: to.version, sha256: to.source_sha256 },
        identical: from.source === to.source,
        added: lines.added,
        removed: lines.removed,
        diff: unifiedDiff(lines, { from: `${name} v${from.version}`, to: `${name} v${to.version}` }),
      };
    },

    loadForRun,

    async deliveryTarget(storeId, name) {
      // The plugin the delivery will run, remembered: the check before the body costs no statement.
      try {
        const plugin = await loadForRun(storeId, name);
        return { runnable: plugin.enabled, allowedSources: plugin.allowedSources };
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        if (err.code === "store_not_found" || err.code === "plugin_not_found") return { runnable: false, allowedSources: null };
        if (err.code === "secrets_unavailable") return targetFromDatabase(storeId, name);
        throw err;
      }
    },
  };
}
