// One install or update of a plugin, in one transaction: the installation row locked, the version the save
// was based on checked against the current one (a save from a stale editor is refused, never applied over
// another's change), the secrets merged and checked against the catalogue's declared settings, and the
// version the source makes current (a new one, or an earlier one with the same source).
import { createHash } from "node:crypto";
import type { Kysely } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import { AppError } from "../errors.ts";
import { newId } from "../lib/ids.ts";
import { missingRequiredSettings, readCatalogManifest } from "./catalog.ts";
import { catalogBaseOf, type Executor, highestVersion, insertInstallation, insertVersion, isEnabled, lockInstallation, updateInstallation, versionsWithHash } from "./plugins.repository.ts";
import type { SecretBox } from "../platform/crypto/secret-box.ts";

export interface InstallInput {
  source?: string;
  catalog?: string;
  /** Merged into the stored secrets; a null value deletes that secret. */
  secrets?: Record<string, string | null>;
  enabled?: boolean;
  /** The version the editor's source was based on: refused with version_conflict when another is current. */
  baseVersion?: number;
  /** Why this version was saved; kept with a new version. */
  note?: string;
  /** The provider's source ranges (CIDRs); null removes the restriction; undefined leaves it as it is. */
  allowedSources?: string[] | null;
}

/** Source ranges as stored: a JSON array of CIDRs, or null (from anywhere). */
const storedSources = (sources: string[] | null | undefined): string | null => (sources === undefined || sources === null ? null : JSON.stringify(sources.map((r) => r.trim())));

export interface InstallResult {
  name: string;
  version: number;
  enabled: boolean;
  created: boolean;
  /** The source was already an earlier version's, which is current again (no new version was made). */
  reused: boolean;
}

export const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/** Refuses settings that lack a required one of the catalogue plugin's declared settings, naming them. */
export function requireDeclaredSettings(catalog: string | null, secrets: Record<string, string>): void {
  if (catalog === null) return;
  const missing = missingRequiredSettings(readCatalogManifest(catalog), secrets);
  if (missing.length > 0) {
    throw new AppError("invalid_request", `${catalog} needs the setting${missing.length === 1 ? "" : "s"} ${missing.join(", ")}`, { param: "secrets", details: { missing } });
  }
}

/** Opens the stored secrets and merges the given ones; sealed under another key, they can only be replaced whole. */
function mergeSecrets(box: SecretBox, existing: { secrets: string; secret_names: string } | undefined, given: InstallInput["secrets"]): Record<string, string> {
  let secrets: Record<string, string> = {};
  if (existing) {
    const opened = box.open(existing.secrets);
    if (opened === null) {
      const sent = new Set(Object.entries(given ?? {}).filter(([, v]) => v !== null).map(([k]) => k));
      const missing = (existing.secret_names === "" ? [] : existing.secret_names.split(" ")).filter((k) => !sent.has(k));
      if (missing.length > 0) {
        throw new AppError("conflict", `The stored secrets cannot be opened with this SECRETS_KEY; send every secret again (missing: ${missing.join(", ")}), or run storefront secrets rekey`, {
          param: "secrets",
        });
      }
    } else {
      secrets = opened;
    }
  }
  for (const [k, v] of Object.entries(given ?? {})) {
    if (v === null) delete secrets[k];
    else secrets[k] = v;
  }
  return secrets;
}

/**
 * The version an upload of `source` makes current: an existing version with the same source (an
 * identical re-upload, or a rollback by upload, makes no new version), else the next number after the
 * highest (after a rollback, the current version is not the highest).
 */
async function versionFor(tx: Executor, installationId: string, source: string): Promise<{ version: number; isNew: boolean }> {
  const same = await versionsWithHash(tx, installationId, sha256(source));
  const match = same.find((r) => r.source === source);
  if (match) return { version: match.version, isNew: false };
  return { version: (await highestVersion(tx, installationId)) + 1, isNew: true };
}

/** One attempt at an install: reads the installation and writes the change in one transaction. */
export function installOnce(db: Kysely<Database>, box: SecretBox, at: { storeId: string; name: string; t: number }, input: InstallInput, initialSource: string | undefined): Promise<InstallResult> {
  const { storeId, name, t } = at;
  let source = initialSource;
  return db.transaction().execute(async (tx) => {
    // Locks the installation row (PostgreSQL): concurrent uploads of one plugin take turns.
    const existing = await lockInstallation(tx, storeId, name, t);
    if (input.baseVersion !== undefined && existing?.current_version !== input.baseVersion) {
      const current = existing?.current_version ?? null;
      throw new AppError("version_conflict", `This save is based on version ${input.baseVersion}, but ${current === null ? "the plugin is not installed any more" : `version ${current} is current`}: compare your changes with it and save again`, {
        param: "baseVersion",
        details: { baseVersion: input.baseVersion, currentVersion: current },
      });
    }
    if (!existing && source === undefined) throw new AppError("invalid_request", "a new plugin needs source or catalog", { param: "source" });
    const secrets = mergeSecrets(box, existing, input.secrets);
    requireDeclaredSettings(input.catalog ?? (existing ? await catalogBaseOf(tx, existing.id) : null), secrets);
    const sealed = box.seal(secrets);
    const secretNames = Object.keys(secrets).sort().join(" ");
    let id: string;
    let version: number;
    let reused = false;
    if (!existing) {
      id = newId("plg");
      version = 1;
      await insertInstallation(tx, { id, store_id: storeId, name, enabled: input.enabled === false ? 0 : 1, current_version: 1, secrets: sealed, secret_names: secretNames, allowed_sources: storedSources(input.allowedSources), created_at: t, updated_at: t });
    } else {
      id = existing.id;
      const target = source === undefined ? null : await versionFor(tx, id, source);
      await updateInstallation(tx, id, {
        ...(target === null ? {} : { current_version: target.version }),
        secrets: sealed,
        secret_names: secretNames,
        updated_at: t,
        ...(input.enabled === undefined ? {} : { enabled: input.enabled ? 1 : 0 }),
        ...(input.allowedSources === undefined ? {} : { allowed_sources: storedSources(input.allowedSources) }),
      });
      version = target?.version ?? existing.current_version;
      reused = target !== null && !target.isNew;
      if (!target?.isNew) source = undefined;
    }
    if (source !== undefined) {
      await insertVersion(tx, { installation_id: id, version, source, source_sha256: sha256(source), catalog_name: input.catalog ?? null, note: input.note?.trim() || null, created_at: t });
    }
    return { name, version, enabled: await isEnabled(tx, id), created: !existing, reused };
  });
}
