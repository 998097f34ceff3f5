// A thin, byte-exact layer over the Lua 5.4 C API that wasmoon compiles to WebAssembly.
// wasmoon's own value bridge converts strings through NUL-terminated UTF-8 (a webhook body is bytes)
// and proxies JS objects into Lua (which let scripts write through to host prototypes), so the
// sandbox uses only the raw exports and moves strings as (pointer, length) pairs.
import { createRequire } from "node:module";

export interface EmscriptenLua {
  HEAPU8: Uint8Array;
  HEAP32: Int32Array;
  _malloc(size: number): number;
  _free(ptr: number): void;
  _realloc(ptr: number, size: number): number;
  addFunction(fn: (...args: number[]) => number | void, signature: string): number;
  removeFunction(ptr: number): void;

  _lua_newstate(alloc: number, ud: number): number;
  _lua_close(L: number): void;
  _lua_atpanic(L: number, fn: number): number;
  _lua_sethook(L: number, fn: number, mask: number, count: number): void;
  _luaL_loadbufferx(L: number, buf: number, size: number, name: number, mode: number): number;
  _lua_pcallk(L: number, nargs: number, nresults: number, errfunc: number, ctx: number, k: number): number;
  _lua_gettop(L: number): number;
  _lua_settop(L: number, idx: number): void;
  _lua_type(L: number, idx: number): number;
  _lua_tolstring(L: number, idx: number, lenPtr: number): number;
  _lua_toboolean(L: number, idx: number): number;
  _lua_tonumberx(L: number, idx: number, isnum: number): number;
  _lua_isinteger(L: number, idx: number): number;
  _lua_tointegerx(L: number, idx: number, isnum: number): bigint;
  _lua_pushnil(L: number): void;
  _lua_pushboolean(L: number, b: number): void;
  _lua_pushinteger(L: number, n: bigint): void;
  _lua_pushnumber(L: number, n: number): void;
  _lua_pushlstring(L: number, ptr: number, len: number): number;
  _lua_pushcclosure(L: number, fn: number, n: number): void;
  _lua_pushvalue(L: number, idx: number): void;
  _lua_setmetatable(L: number, idx: number): number;
  _lua_rawseti(L: number, idx: number, n: bigint): void;
  _lua_checkstack(L: number, n: number): number;
  _lua_stringtonumber(L: number, s: number): number;
  _lua_createtable(L: number, narr: number, nrec: number): void;
  _lua_rawset(L: number, idx: number): void;
  _lua_settable(L: number, idx: number): void;
  _lua_seti(L: number, idx: number, n: bigint): void;
  _lua_rawgeti(L: number, idx: number, n: bigint): number;
  _lua_getfield(L: number, idx: number, k: number): number;
  _lua_setfield(L: number, idx: number, k: number): void;
  _lua_setglobal(L: number, name: number): void;
  _lua_concat(L: number, n: number): void;
  _lua_error(L: number): number;
  _luaL_where(L: number, level: number): void;
  _luaL_ref(L: number, t: number): number;
  _luaL_unref(L: number, t: number, ref: number): void;
  _luaopen_base(L: number): number;
  _luaopen_string(L: number): number;
  _luaopen_table(L: number): number;
  _luaopen_math(L: number): number;
  _luaopen_utf8(L: number): number;
  _luaopen_coroutine(L: number): number;
  _luaopen_os(L: number): number;
  _luaopen_debug(L: number): number;
}

export const LUA_REGISTRYINDEX = -1_000_000 - 1000;
export const LUA_MULTRET = -1;
export const LUA_MASKCOUNT = 8;
export const LuaStatus = { ok: 0, yield: 1, errrun: 2, errsyntax: 3, errmem: 4, errerr: 5 } as const;
export const LuaType = { none: -1, nil: 0, boolean: 1, lightuserdata: 2, number: 3, string: 4, table: 5, function: 6, userdata: 7, thread: 8 } as const;
const TYPE_NAMES = ["nil", "boolean", "userdata", "number", "string", "table", "function", "userdata", "thread"];

/**
 * Loads a fresh instance of the Lua WebAssembly module: its own memory, its own (unused) file system.
 * Emscripten wraps every export in an assertion shim (a property lookup and an apply per call); the
 * sandbox calls the C API tens of times per run, so it captures the instance's raw exports while the
 * glue instantiates it (only this worker thread's WebAssembly.instantiate is wrapped, and only for
 * the duration of the load) and calls those directly.
 */
export async function loadLuaModule(): Promise<EmscriptenLua> {
  // wasmoon is a UMD bundle; require() gives the CommonJS exports regardless of how Node sees ESM interop.
  const require = createRequire(import.meta.url);
  const wasmoon = require("wasmoon") as { LuaFactory: new () => { getLuaModule(): Promise<{ module: unknown }> } };
  // The WebAssembly namespace is not in this project's TypeScript lib: describe the little that is used.
  type Instantiate = (source: unknown, imports?: unknown) => Promise<{ instance?: { exports: Record<string, unknown> }; exports?: Record<string, unknown> }>;
  const wasm = (globalThis as unknown as { WebAssembly: { instantiate: Instantiate } }).WebAssembly;
  let exports: Record<string, unknown> | undefined;
  const instantiate = wasm.instantiate;
  wasm.instantiate = async (source, imports) => {
    const result = await instantiate(source, imports);
    exports = result.instance?.exports ?? result.exports;
    return result;
  };
  let glue: EmscriptenLua;
  try {
    glue = (await new wasmoon.LuaFactory().getLuaModule()).module as EmscriptenLua;
  } finally {
    wasm.instantiate = instantiate;
  }
  if (exports === undefined || typeof exports.lua_settop !== "function") return glue; // a different wasmoon build: use its shims
  const fast: Record<string, unknown> = {
    get HEAPU8() {
      return glue.HEAPU8; // the glue replaces its views when the memory grows
    },
    get HEAP32() {
      return glue.HEAP32;
    },
    addFunction: glue.addFunction.bind(glue),
    removeFunction: glue.removeFunction.bind(glue),
  };
  for (const [name, value] of Object.entries(exports)) if (typeof value === "function") fast[`_${name}`] = value;
  return fast as unknown as EmscriptenLua;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Byte-exact string traffic between JavaScript and one Lua module instance. */
export class LuaBytes {
  readonly m: EmscriptenLua;
  private scratch = 0;
  private scratchSize = 0;
  private readonly lenPtr: number;
  private readonly cstrings = new Map<string, number>();

  constructor(m: EmscriptenLua) {
    this.m = m;
    this.lenPtr = m._malloc(8);
    this.ensure(64 * 1024);
  }

  /** A NUL-terminated copy of `s` that lives as long as the module (for chunk names, field names, modes). */
  cstr(s: string): number {
    let ptr = this.cstrings.get(s);
    if (ptr === undefined) {
      const bytes = encoder.encode(`${s}\0`);
      ptr = this.m._malloc(bytes.length);
      this.m.HEAPU8.set(bytes, ptr);
      this.cstrings.set(s, ptr);
    }
    return ptr;
  }

  private ensure(size: number): number {
    if (size > this.scratchSize) {
      if (this.scratch) this.m._free(this.scratch);
      this.scratchSize = Math.max(size, this.scratchSize * 2);
      this.scratch = this.m._malloc(this.scratchSize);
      if (!this.scratch) throw new Error("the Lua module could not allocate a scratch buffer");
    }
    return this.scratch;
  }

  /** Copies bytes into module memory; the pointer is valid until the next call. */
  put(bytes: Uint8Array): number {
    const ptr = this.ensure(bytes.length + 1);
    this.m.HEAPU8.set(bytes, ptr);
    this.m.HEAPU8[ptr + bytes.length] = 0;
    return ptr;
  }

  pushBytes(L: number, bytes: Uint8Array): void {
    const ptr = this.put(bytes);
    this.m._lua_pushlstring(L, ptr, bytes.length);
  }

  pushString(L: number, s: string): void {
    if (s.length < 256 && isAscii(s)) {
      const ptr = this.ensure(s.length + 1);
      const heap = this.m.HEAPU8;
      for (let i = 0; i < s.length; i++) heap[ptr + i] = s.charCodeAt(i);
      this.m._lua_pushlstring(L, ptr, s.length);
      return;
    }
    const max = s.length * 3 + 1;
    const ptr = this.ensure(max);
    const { written } = encoder.encodeInto(s, this.m.HEAPU8.subarray(ptr, ptr + max));
    this.m._lua_pushlstring(L, ptr, written);
  }

  /** The bytes of the string (or number, converted in place as Lua does) at `idx`, or null for other types. */
  toBytes(L: number, idx: number): Uint8Array | null {
    const t = this.m._lua_type(L, idx);
    if (t !== LuaType.string && t !== LuaType.number) return null;
    const ptr = this.m._lua_tolstring(L, idx, this.lenPtr);
    const len = this.m.HEAP32[this.lenPtr >> 2]!;
    return this.m.HEAPU8.slice(ptr, ptr + len);
  }

  /** Where the bytes of the string at `idx` live in module memory; valid while the value stays on the stack. */
  stringRef(L: number, idx: number): { ptr: number; len: number } | null {
    if (this.m._lua_type(L, idx) !== LuaType.string) return null;
    const ptr = this.m._lua_tolstring(L, idx, this.lenPtr);
    return { ptr, len: this.m.HEAP32[this.lenPtr >> 2]! };
  }

  toString(L: number, idx: number): string | null {
    const t = this.m._lua_type(L, idx);
    if (t !== LuaType.string && t !== LuaType.number) return null;
    const ptr = this.m._lua_tolstring(L, idx, this.lenPtr);
    const len = this.m.HEAP32[this.lenPtr >> 2]!;
    return decoder.decode(this.m.HEAPU8.subarray(ptr, ptr + len));
  }

  typeName(L: number, idx: number): string {
    const t = this.m._lua_type(L, idx);
    return t < 0 ? "no value" : (TYPE_NAMES[t] ?? "unknown");
  }

  /** Pushes a Lua table with string keys and string values. */
  pushStringMap(L: number, entries: readonly (readonly [string, string])[]): void {
    this.m._lua_createtable(L, 0, entries.length);
    for (const [k, v] of entries) {
      this.pushString(L, k);
      this.pushString(L, v);
      this.m._lua_rawset(L, -3);
    }
  }

  /**
   * Raises a Lua error from inside a host function, prefixed with the caller's position like luaL_error.
   * Emscripten implements the longjmp as a thrown value, so this never returns.
   */
  raise(L: number, message: string): never {
    this.m._luaL_where(L, 1);
    this.pushString(L, message);
    this.m._lua_concat(L, 2);
    this.m._lua_error(L);
    throw new Error("lua_error returned");
  }
}

function isAscii(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7e) return false;
  return true;
}
