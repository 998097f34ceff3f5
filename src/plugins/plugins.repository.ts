// Plugin installations and their versions as rows: every statement the plugins service sends. The
// statements of one install (plugins.install.ts) run in the caller's transaction and take it.
import type { Insertable, Kysely, Transaction, Updateable } from "kysely";
import type { Database, PluginInstallationsTable, PluginVersionsTable } from "../platform/db/schema.ts";

/** The connection or the transaction a statement runs in. */
export type Executor = Kysely<Database> | Transaction<Database>;

/** An installation with its current version's source and catalogue name, and the catalogue plugin it came from. */
export interface InstallationRow {
  id: string;
  name: string;
  enabled: number;
  current_version: number;
  secret_names: string;
  secrets: string;
  allowed_sources: string | null;
  created_at: number;
  updated_at: number;
  catalog_name: string | null;
  source: string;
  /** The newest version's catalogue name among those installed from the catalogue (the settings that apply). */
  catalog_base: string | null;
}

export interface VersionRow {
  version: number;
  source_sha256: string;
  catalog_name: string | null;
  note: string | null;
  created_at: number;
}

/** Store, installation and version together: what a run needs, nulls where one is missing. */
export interface RunnableRow {
  installation_id: string | null;
  enabled: number | null;
  secrets: string | null;
  allowed_sources: string | null;
  version: number | null;
  source: string | null;
}

export interface PluginsRepository {
  /** A store's installations, by name. */
  installations(storeId: string): Promise<InstallationRow[]>;
  installation(storeId: string, name: string): Promise<InstallationRow | null>;
  /** An installation's versions, newest first (sources left out). */
  versions(installationId: string): Promise<VersionRow[]>;
  version(installationId: string, version: number): Promise<{ version: number; source: string; source_sha256: string } | null>;
  updateInstallation(installationId: string, changes: Updateable<PluginInstallationsTable>): Promise<void>;
  /** Deletes the installation with its versions, in one transaction; its deliveries stay. */
  removeInstallation(installationId: string): Promise<void>;
  /**
   * One statement: the store (null when there is none), its installation of `name` and the given version
   * (default: the current one), each null when missing.
   */
  runnable(storeId: string, name: string, version: number | undefined): Promise<RunnableRow | null>;
  /** Whether the store's installation of `name` is enabled, and its source ranges; no secrets read. */
  deliveryTarget(storeId: string, name: string): Promise<{ enabled: number | null; allowed_sources: string | null } | null>;
}

export function createPluginsRepository(db: Kysely<Database>): PluginsRepository {
  /** A store's installations with their current version's source and catalogue name. */
  function installationsOf(storeId: string) {
    return db
      .selectFrom("plugin_installations as p")
      .innerJoin("plugin_versions as v", (j) => j.onRef("v.installation_id", "=", "p.id").onRef("v.version", "=", "p.current_version"))
      .select(["p.id", "p.name", "p.enabled", "p.current_version", "p.secret_names", "p.secrets", "p.allowed_sources", "p.created_at", "p.updated_at", "v.catalog_name", "v.source"])
      // The catalogue plugin it came from: the newest version installed from the catalogue.
      .select((eb) =>
        eb
          .selectFrom("plugin_versions as b")
          .select("b.catalog_name")
          .whereRef("b.installation_id", "=", "p.id")
          .where("b.catalog_name", "is not", null)
          .orderBy("b.version", "desc")
          .limit(1)
          .as("catalog_base"),
      )
      .where("p.store_id", "=", storeId);
  }

  return {
    async installations(storeId) {
      return installationsOf(storeId).orderBy("p.name").execute();
    },
    async installation(storeId, name) {
      return (await installationsOf(storeId).where("p.name", "=", name).executeTakeFirst()) ?? null;
    },
    async versions(installationId) {
      return db.selectFrom("plugin_versions").select(["version", "source_sha256", "catalog_name", "note", "created_at"]).where("installation_id", "=", installationId).orderBy("version", "desc").execute();
    },
    async version(installationId, version) {
      return (await db.selectFrom("plugin_versions").select(["version", "source", "source_sha256"]).where("installation_id", "=", installationId).where("version", "=", version).executeTakeFirst()) ?? null;
    },
    updateInstallation: (installationId, changes) => updateInstallation(db, installationId, changes),
    async removeInstallation(installationId) {
      await db.transaction().execute(async (tx) => {
        await tx.deleteFrom("plugin_versions").where("installation_id", "=", installationId).execute();
        await tx.deleteFrom("plugin_installations").where("id", "=", installationId).execute();
      });
    },
    async runnable(storeId, name, version) {
      const row = await db
        .selectFrom("stores as s")
        .leftJoin("plugin_installations as p", (j) => j.onRef("p.store_id", "=", "s.id").on("p.name", "=", name))
        .leftJoin("plugin_versions as v", (j) =>
          version === undefined ? j.onRef("v.installation_id", "=", "p.id").onRef("v.version", "=", "p.current_version") : j.onRef("v.installation_id", "=", "p.id").on("v.version", "=", version),
        )
        .select(["p.id as installation_id", "p.enabled", "p.secrets", "p.allowed_sources", "v.version", "v.source"])
        .where("s.id", "=", storeId)
        .executeTakeFirst();
      return row ?? null;
    },
    async deliveryTarget(storeId, name) {
      const row = await db
        .selectFrom("stores as s")
        .leftJoin("plugin_installations as p", (j) => j.onRef("p.store_id", "=", "s.id").on("p.name", "=", name))
        .select(["p.enabled", "p.allowed_sources"])
        .where("s.id", "=", storeId)
        .executeTakeFirst();
      return row ?? null;
    },
  };
}

/**
 * Touches the installation (updated_at) and returns what an install reads of it, or undefined when there
 * is none. An UPDATE, not a SELECT: on PostgreSQL it locks the row, so concurrent uploads of one plugin
 * take turns and each reads the secrets and versions the other committed.
 */
export function lockInstallation(tx: Executor, storeId: string, name: string, at: number) {
  return tx
    .updateTable("plugin_installations")
    .set({ updated_at: at })
    .where("store_id", "=", storeId)
    .where("name", "=", name)
    .returning(["id", "secrets", "secret_names", "current_version"])
    .executeTakeFirst();
}

/** The catalogue plugin an installation came from: the newest version installed from the catalogue. */
export async function catalogBaseOf(tx: Executor, installationId: string): Promise<string | null> {
  const row = await tx
    .selectFrom("plugin_versions")
    .select("catalog_name")
    .where("installation_id", "=", installationId)
    .where("catalog_name", "is not", null)
    .orderBy("version", "desc")
    .limit(1)
    .executeTakeFirst();
  return row?.catalog_name ?? null;
}

/** The installation's versions whose source has this SHA-256, newest first. */
export function versionsWithHash(tx: Executor, installationId: string, sha256: string) {
  return tx.selectFrom("plugin_versions").select(["version", "source"]).where("installation_id", "=", installationId).where("source_sha256", "=", sha256).orderBy("version", "desc").execute();
}

/** The installation's highest version number, 0 when it has none. */
export async function highestVersion(tx: Executor, installationId: string): Promise<number> {
  const top = await tx.selectFrom("plugin_versions").select((eb) => eb.fn.max("version").as("max")).where("installation_id", "=", installationId).executeTakeFirst();
  return Number(top?.max ?? 0);
}

export async function insertInstallation(tx: Executor, row: Insertable<PluginInstallationsTable>): Promise<void> {
  await tx.insertInto("plugin_installations").values(row).execute();
}

export async function updateInstallation(tx: Executor, installationId: string, changes: Updateable<PluginInstallationsTable>): Promise<void> {
  await tx.updateTable("plugin_installations").set(changes).where("id", "=", installationId).execute();
}

export async function insertVersion(tx: Executor, row: Insertable<PluginVersionsTable>): Promise<void> {
  await tx.insertInto("plugin_versions").values(row).execute();
}

/** Whether the installation is enabled, as written in this transaction. */
export async function isEnabled(tx: Executor, installationId: string): Promise<boolean> {
  const row = await tx.selectFrom("plugin_installations").select("enabled").where("id", "=", installationId).executeTakeFirstOrThrow();
  return row.enabled !== 0;
}
