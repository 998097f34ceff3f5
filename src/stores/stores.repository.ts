// Stores and their API keys as rows: every statement the stores service sends. Keys are found by the
// SHA-256 of the key (the key itself is never stored).
import type { Insertable, Kysely, Selectable } from "kysely";
import type { ApiKeysTable, Database, StoresTable } from "../platform/db/schema.ts";

export type StoreRow = Selectable<StoresTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
/** What authentication needs of a key. */
export type KeyByHash = Pick<ApiKeyRow, "id" | "store_id" | "scopes" | "revoked_at" | "api_version">;

export interface StoresRepository {
  insertStore(row: Insertable<StoresTable>): Promise<void>;
  /** Every store, oldest first. */
  listStores(): Promise<StoreRow[]>;
  getStore(id: string): Promise<StoreRow | null>;
  /** Whether the store exists (its id only is read). */
  storeExists(id: string): Promise<boolean>;
  insertKey(row: Insertable<ApiKeysTable>): Promise<void>;
  /** The store's keys, oldest first, revoked ones included. */
  listKeys(storeId: string): Promise<ApiKeyRow[]>;
  /** The key moved to `version`, or null when the store has no such key. */
  setKeyVersion(storeId: string, keyId: string, version: string): Promise<ApiKeyRow | null>;
  /** Revokes the key unless it already is; false when nothing was revoked (unknown or already revoked). */
  revokeKey(storeId: string, keyId: string, at: number): Promise<boolean>;
  keyExists(storeId: string, keyId: string): Promise<boolean>;
  findKeyByHash(hash: string): Promise<KeyByHash | null>;
}

export function createStoresRepository(db: Kysely<Database>): StoresRepository {
  return {
    async insertStore(row) {
      await db.insertInto("stores").values(row).execute();
    },
    async listStores() {
      return db.selectFrom("stores").selectAll().orderBy("created_at").orderBy("id").execute();
    },
    async getStore(id) {
      return (await db.selectFrom("stores").selectAll().where("id", "=", id).executeTakeFirst()) ?? null;
    },
    async storeExists(id) {
      return (await db.selectFrom("stores").select("id").where("id", "=", id).executeTakeFirst()) !== undefined;
    },
    async insertKey(row) {
      await db.insertInto("api_keys").values(row).execute();
    },
    async listKeys(storeId) {
      return db.selectFrom("api_keys").selectAll().where("store_id", "=", storeId).orderBy("created_at").orderBy("id").execute();
    },
    async setKeyVersion(storeId, keyId, version) {
      const row = await db.updateTable("api_keys").set({ api_version: version }).where("id", "=", keyId).where("store_id", "=", storeId).returningAll().executeTakeFirst();
      return row ?? null;
    },
    async revokeKey(storeId, keyId, at) {
      const result = await db.updateTable("api_keys").set({ revoked_at: at }).where("id", "=", keyId).where("store_id", "=", storeId).where("revoked_at", "is", null).executeTakeFirst();
      return Number(result.numUpdatedRows) > 0;
    },
    async keyExists(storeId, keyId) {
      return (await db.selectFrom("api_keys").select("id").where("id", "=", keyId).where("store_id", "=", storeId).executeTakeFirst()) !== undefined;
    },
    async findKeyByHash(hash) {
      return (await db.selectFrom("api_keys").select(["id", "store_id", "scopes", "revoked_at", "api_version"]).where("key_hash", "=", hash).executeTakeFirst()) ?? null;
    },
  };
}
