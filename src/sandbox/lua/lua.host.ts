// The host functions a plugin calls (hmacShaSign, sha, base64, timingSafeEqual) and the raw entry
// points the prelude wraps (log, getInvoice, fetch). Each is a plain C function of the Lua state:
// no upvalues, no state of its own, so one set serves every run. Blocking calls (getInvoice, fetch)
// go through the HostBridge, which parks the worker until the main thread answers.
import crypto from "node:crypto";
import type { LuaBytes } from "./lua.api.ts";
import { LuaType } from "./lua.api.ts";
import { createJsonDecoder } from "./lua.json.ts";
import type { FetchReply, FetchRequest, InvoiceReply } from "../sandbox.protocol.ts";
import type { LogType } from "../sandbox.types.ts";

export interface HostBridge {
  log(description: Uint8Array, type: LogType): void;
  logOverflow(): void;
  invoice(id: string): InvoiceReply;
  fetch(request: FetchRequest): FetchReply;
}

export type HostFunction = (L: number) => number;

const HASHES = new Set(["sha1", "sha256", "sha384", "sha512"]);

/** `sha256`, `SHA256`, `SHA-256`, `sha_256` → `sha256`; anything else → null. */
export function normalizeHash(name: string): string | null {
  const n = name.toLowerCase().replace(/[-_]/g, "");
  return HASHES.has(n) ? n : null;
}

/**
 * createHmac is about four times slower with a byte key than with a string key (measured: 18 µs
 * against 5 µs). A string key is used as UTF-8, so an ASCII key (nearly every webhook secret) can go
 * as a string with exactly the same bytes; any other key goes as bytes.
 */
function hmacKey(key: Uint8Array): Uint8Array | string {
  if (key.length > 256) return key;
  for (let i = 0; i < key.length; i++) if (key[i]! > 0x7f) return key;
  return Buffer.from(key.buffer, key.byteOffset, key.byteLength).toString("latin1");
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Strict base64 (standard or URL-safe alphabet, padding optional, whitespace ignored). */
export function decodeBase64(text: string): Buffer | null {
  const s = text.replace(/\s+/g, "").replace(/-/g, "+").replace(/_/g, "/");
  if (!BASE64.test(s)) return null;
  const unpadded = s.replace(/=+$/, "");
  if (unpadded.length % 4 === 1) return null;
  if (s.length !== unpadded.length && s.length % 4 !== 0) return null;
  return Buffer.from(unpadded, "base64");
}

/**
 * Wraps a host function so that a bug in it becomes a Lua error instead of a JavaScript exception
 * unwinding through the WebAssembly stack (which would leave the Lua state unusable).
 * Lua's own longjmp (a thrown number, how Emscripten implements it) passes through untouched.
 */
function guarded(api: LuaBytes, name: string, fn: HostFunction): HostFunction {
  return (L) => {
    let message: string;
    try {
      return fn(L);
    } catch (err) {
      if (typeof err === "number") throw err;
      message = `${name}: ${err instanceof Error ? err.message : String(err)}`;
    }
    return api.raise(L, message);
  };
}

/** A string argument as bytes, or luaL_checklstring's error. */
function bytesArg(api: LuaBytes, L: number, i: number, fname: string): Uint8Array {
  return api.toBytes(L, i) ?? api.raise(L, `bad argument #${i} to '${fname}' (string expected, got ${api.typeName(L, i)})`);
}

function hashArg(api: LuaBytes, L: number, i: number, fname: string): string {
  const name = api.toString(L, i);
  if (name === null) return api.raise(L, `bad argument #${i} to '${fname}' (hash name expected, got ${api.typeName(L, i)})`);
  return normalizeHash(name) ?? api.raise(L, `${fname}: unsupported hash "${name}" (use sha1, sha256, sha384 or sha512)`);
}

function encodingArg(api: LuaBytes, L: number, i: number, fname: string): "hex" | "base64" {
  if (api.m._lua_type(L, i) <= LuaType.nil) return "hex";
  const enc = api.toString(L, i)?.toLowerCase();
  if (enc === "hex" || enc === "base64") return enc;
  return api.raise(L, `${fname}: unsupported encoding "${enc ?? api.typeName(L, i)}" (use "hex" or "base64")`);
}

/** What a plugin calls directly: hmacShaSign, sha, base64.encode/decode, timingSafeEqual. */
function cryptoFunctions(api: LuaBytes): Record<string, HostFunction> {
  const m = api.m;
  return {
    hmac(L) {
      const key = bytesArg(api, L, 1, "hmacShaSign");
      const data = bytesArg(api, L, 2, "hmacShaSign");
      const hash = hashArg(api, L, 3, "hmacShaSign");
      const encoding = encodingArg(api, L, 4, "hmacShaSign");
      api.pushString(L, crypto.createHmac(hash, hmacKey(key)).update(data).digest(encoding));
      return 1;
    },
    sha(L) {
      const data = bytesArg(api, L, 1, "sha");
      const hash = hashArg(api, L, 2, "sha");
      const encoding = encodingArg(api, L, 3, "sha");
      api.pushString(L, crypto.createHash(hash).update(data).digest(encoding));
      return 1;
    },
    b64encode(L) {
      const data = bytesArg(api, L, 1, "base64.encode");
      api.pushString(L, Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("base64"));
      return 1;
    },
    b64decode(L) {
      const text = api.toString(L, 1) ?? api.raise(L, `bad argument #1 to 'base64.decode' (string expected, got ${api.typeName(L, 1)})`);
      const bytes = decodeBase64(text);
      if (bytes === null) {
        m._lua_pushnil(L);
        api.pushString(L, "invalid base64");
        return 2;
      }
      api.pushBytes(L, bytes);
      return 1;
    },
    timingsafeequal(L) {
      const a = bytesArg(api, L, 1, "timingSafeEqual");
      const b = bytesArg(api, L, 2, "timingSafeEqual");
      // Different lengths are unequal; comparing a with itself keeps the time independent of b's content.
      const equal = a.length === b.length ? crypto.timingSafeEqual(a, b) : !crypto.timingSafeEqual(a, a);
      m._lua_pushboolean(L, equal ? 1 : 0);
      return 1;
    },
  };
}

/** The raw entry points the prelude wraps (log, getInvoice, fetch): each hands over to the bridge. */
function bridgeFunctions(api: LuaBytes, bridge: HostBridge): Record<string, HostFunction> {
  const m = api.m;
  return {
    log(L) {
      const description = bytesArg(api, L, 1, "log");
      const type = api.toString(L, 2);
      bridge.log(description, type === "warning" || type === "error" ? type : "info");
      return 0;
    },
    logoverflow() {
      bridge.logOverflow();
      return 0;
    },
    invoice(L) {
      const id = api.toString(L, 1) ?? "";
      const reply = bridge.invoice(id);
      if (!reply.ok) {
        m._lua_pushnil(L);
        api.pushString(L, reply.error);
        return 2;
      }
      if (reply.json === null) m._lua_pushnil(L);
      else api.pushString(L, reply.json);
      return 1;
    },
    fetch(L) {
      const url = api.toString(L, 1) ?? "";
      const method = api.toString(L, 2) ?? "GET";
      const headersJson = api.toString(L, 3);
      const body = m._lua_type(L, 4) === LuaType.string ? api.toBytes(L, 4) : null;
      const timeoutMs = m._lua_type(L, 5) === LuaType.number ? m._lua_tonumberx(L, 5, 0) : null;
      let headers: Record<string, string> | null = null;
      if (headersJson !== null) {
        headers = Object.create(null) as Record<string, string>;
        for (const [k, v] of Object.entries(JSON.parse(headersJson) as Record<string, unknown>)) headers[k] = String(v);
      }
      const reply = bridge.fetch({ url, method, headers, body, timeoutMs });
      if (!reply.ok) {
        m._lua_pushnil(L);
        api.pushString(L, reply.error);
        return 2;
      }
      m._lua_pushinteger(L, BigInt(reply.status));
      api.pushStringMap(L, reply.headers);
      api.pushBytes(L, reply.body);
      return 3;
    },
  };
}

/** Every host function by the name the prelude reads it under (H.hmac, H.log, ...), each guarded. */
export function createHostFunctions(api: LuaBytes, bridge: HostBridge): Record<string, HostFunction> {
  const functions: Record<string, HostFunction> = {
    ...cryptoFunctions(api),
    ...bridgeFunctions(api, bridge),
    jsondecode: createJsonDecoder(api),
  };
  const names: Record<string, string> = { hmac: "hmacShaSign", b64encode: "base64.encode", b64decode: "base64.decode", timingsafeequal: "timingSafeEqual", jsondecode: "json.decode" };
  return Object.fromEntries(Object.entries(functions).map(([k, fn]) => [k, guarded(api, names[k] ?? k, fn)]));
}
