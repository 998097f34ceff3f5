// Stores and their API keys. A key is random, shown once, stored only as its SHA-256 (a 256-bit random
// secret needs no slow hash), belongs to exactly one store, carries scopes, and can be revoked.
import { createHash, randomBytes } from "node:crypto";
import type { Kysely } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import { AppError } from "../errors.ts";
import { newId } from "../lib/ids.ts";
import { versionToRemember } from "../versioning/registry.ts";
import type { KeyCache } from "./key-cache.ts";
import { type ApiKeyRow, createStoresRepository, type StoreRow } from "./stores.repository.ts";

export const SCOPES = ["customers:read", "invoices:read", "events:read"] as const;
export type Scope = (typeof SCOPES)[number];

export interface Store {
  id: string;
  name: string;
  createdAt: string;
}

export interface ApiKeyInfo {
  id: string;
  storeId: string;
  name: string | null;
  prefix: string;
  scopes: Scope[];
  createdAt: string;
  revokedAt: string | null;
  /** The API version the key is answered in unless a request pins another. */
  version: string;
}

export interface AuthenticatedKey {
  keyId: string;
  storeId: string;
  scopes: ReadonlySet<string>;
  version: string;
}

const KEY_PREFIX = "sk_";

export const hashApiKey = (key: string): string => createHash("sha256").update(key).digest("hex");

export interface StoresService {
  createStore(name: string): Promise<Store>;
  listStores(): Promise<Store[]>;
  getStore(id: string): Promise<Store | null>;
  requireStore(id: string): Promise<Store>;
  /** A new key remembers the current API version unless given another known one. */
  createKey(
    storeId: string,
    options?: { scopes?: readonly string[]; name?: string; version?: string },
  ): Promise<{ id: string; key: string; scopes: Scope[]; version: string }>;
  listKeys(storeId: string): Promise<ApiKeyInfo[]>;
  /** Moves a key to another known API version. */
  setKeyVersion(storeId: string, keyId: string, version: string): Promise<ApiKeyInfo>;
  revokeKey(storeId: string, keyId: string): Promise<void>;
  /** The key's store and scopes, or null for an unknown or revoked key. */
  authenticate(key: string): Promise<AuthenticatedKey | null>;
}

/**
 * `keys` remembers authenticated keys between requests (key-cache.ts); every change to a key made here
 * clears it, as a change made elsewhere does through the database.
 */
export function createStoresService(db: Kysely<Database>, now: () => number = Date.now, keys: KeyCache<AuthenticatedKey> | null = null): StoresService {
  const repo = createStoresRepository(db);
  const toStore = (r: StoreRow): Store => ({
    id: r.id,
    name: r.name,
    createdAt: new Date(r.created_at).toISOString(),
  });

  const toKeyInfo = (r: ApiKeyRow): ApiKeyInfo => ({
    id: r.id,
    storeId: r.store_id,
    name: r.name,
    prefix: r.key_prefix,
    scopes: r.scopes.split(" ") as Scope[],
    createdAt: new Date(r.created_at).toISOString(),
    revokedAt: r.revoked_at === null ? null : new Date(r.revoked_at).toISOString(),
    version: r.api_version,
  });

  async function getStore(id: string): Promise<Store | null> {
    const row = await repo.getStore(id);
    return row ? toStore(row) : null;
  }
  async function requireStore(id: string): Promise<Store> {
    const store = await getStore(id);
    if (!store) throw new AppError("store_not_found", `No store ${id}`, { param: "storeId" });
    return store;
  }

  return {
    async createStore(name) {
      const row = { id: newId("st"), name, created_at: now() };
      await repo.insertStore(row);
      return toStore(row);
    },
    async listStores() {
      return (await repo.listStores()).map(toStore);
    },
    getStore,
    requireStore,
    async createKey(storeId, options = {}) {
      await requireStore(storeId);
      const scopes = options.scopes ?? SCOPES;
      const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
      if (unknown.length > 0 || scopes.length === 0) {
        throw new AppError("invalid_request", `scopes must be a non-empty list of ${SCOPES.join(", ")}`, { param: "scopes" });
      }
      const version = versionToRemember(options.version);
      const key = KEY_PREFIX + randomBytes(32).toString("base64url");
      const id = newId("key");
      const unique = [...new Set(scopes)] as Scope[];
      await repo.insertKey({
        id,
        store_id: storeId,
        key_hash: hashApiKey(key),
        key_prefix: key.slice(0, 10),
        name: options.name ?? null,
        scopes: unique.join(" "),
        created_at: now(),
        revoked_at: null,
        api_version: version,
      });
      return { id, key, scopes: unique, version };
    },
    async listKeys(storeId) {
      await requireStore(storeId);
      return (await repo.listKeys(storeId)).map(toKeyInfo);
    },
    async setKeyVersion(storeId, keyId, version) {
      const row = await repo.setKeyVersion(storeId, keyId, versionToRemember(version));
      keys?.clear();
      if (!row) throw new AppError("key_not_found", `No key ${keyId} in store ${storeId}`, { param: "keyId" });
      return toKeyInfo(row);
    },
    async revokeKey(storeId, keyId) {
      const revoked = await repo.revokeKey(storeId, keyId, now());
      keys?.clear();
      if (!revoked && !(await repo.keyExists(storeId, keyId))) throw new AppError("key_not_found", `No key ${keyId} in store ${storeId}`, { param: "keyId" });
    },
    async authenticate(key) {
      if (!key.startsWith(KEY_PREFIX) || key.length > 100) return null;
      const hash = hashApiKey(key);
      const known = keys?.get(hash);
      if (known !== undefined) return known;
      const remember = keys?.begin();
      const row = await repo.findKeyByHash(hash);
      if (!row || row.revoked_at !== null) return null;
      const authenticated: AuthenticatedKey = { keyId: row.id, storeId: row.store_id, scopes: new Set(row.scopes.split(" ")), version: row.api_version };
      remember?.(hash, authenticated);
      return authenticated;
    },
  };
}
