// One Lua 5.4 state inside one sandbox worker, reused from run to run for speed.
// Isolation between runs does not depend on cleaning up after a script: every run gets a new
// environment built by the trusted prelude (prelude/*.lua: fresh copies of every library table), the string
// metatable is locked, finalizers are refused, and anything that could leave the state
// inconsistent (a panic, a WebAssembly trap, a host bug) retires the worker.
// There is deliberately no instruction-count hook: with any hook set, Lua 5.4 calls
// luaG_traceexec before every instruction (about 40% slower here), and a hook can neither stop a
// slow C function nor survive an xpcall handler. The CPU budget is enforced from outside: the
// pool terminates the worker thread (pool/sandbox.pool.ts).
import { readFileSync } from "node:fs";
import { createHostFunctions, type HostBridge } from "./lua.host.ts";
import { LUA_REGISTRYINDEX, LuaBytes, LuaStatus, loadLuaModule, type EmscriptenLua } from "./lua.api.ts";
import type { RunJob, WorkerResult } from "../sandbox.protocol.ts";
import type { SandboxLimits } from "../sandbox.types.ts";

/**
 * The trusted prelude (prelude/*.lua), in the order its modules load. Each is its own chunk, so an error
 * inside one names its file and line; each is called with the host functions and the table of what the
 * modules before it export, and the last returns the runner.
 */
const PRELUDE = ["base", "json", "os", "math", "env", "runner"].map((name) => ({
  chunkname: `=[sandbox/${name}.lua]`,
  source: readFileSync(new URL(`./prelude/${name}.lua`, import.meta.url)),
}));
const CHUNK_CACHE_SIZE = 64;
/** Garbage left by earlier runs above which the state is collected between runs. */
const GC_SLACK_BYTES = 4 * 1024 * 1024;
const PLUGIN_CHUNK = "=[plugin]";
/** A run's clock may be any time a JavaScript Date can hold. */
const MAX_CLOCK_MS = 8.64e15;

class LuaPanic extends Error {}

export type CompileResult = { ok: true; ref: number } | { ok: false; message: string; line: number | null; outOfMemory: boolean };

export interface RunResult {
  result: WorkerResult;
  /** The state can no longer be trusted; the worker must be replaced. */
  retire: boolean;
}

export function errorLine(message: string): number | null {
  const match = /^\[plugin\]:(\d+):/.exec(message);
  return match ? Number(match[1]) : null;
}

export class LuaRuntime {
  private readonly m: EmscriptenLua;
  private readonly api: LuaBytes;
  private readonly L: number;
  private readonly limits: SandboxLimits;
  private readonly runRef: number;
  private readonly gcRef: number;
  private readonly chunks = new Map<number, CompileResult>();
  private readonly seeds = new Uint32Array(512);
  private seedAt = this.seeds.length;

  // Memory accounting of the allocator.
  private used = 0;
  private limit = Number.POSITIVE_INFINITY;
  private allocFailed = false;
  private baseline = 0;

  static async create(limits: SandboxLimits, bridge: HostBridge): Promise<LuaRuntime> {
    return new LuaRuntime(await loadLuaModule(), limits, bridge);
  }

  private constructor(m: EmscriptenLua, limits: SandboxLimits, bridge: HostBridge) {
    this.m = m;
    this.api = new LuaBytes(m);
    this.limits = limits;

    const alloc = m.addFunction((_ud: number, ptr: number, osize: number, nsize: number) => {
      osize >>>= 0;
      nsize >>>= 0;
      if (nsize === 0) {
        if (ptr) {
          this.used -= osize;
          m._free(ptr);
        }
        return 0;
      }
      const delta = ptr ? nsize - osize : nsize; // with ptr NULL, osize is a type tag, not a size
      if (delta > 0 && this.used + delta > this.limit) {
        this.allocFailed = true;
        return 0;
      }
      const out = m._realloc(ptr, nsize);
      if (out) this.used += delta;
      else this.allocFailed = true;
      return out;
    }, "iiiii");
    const L = m._lua_newstate(alloc, 0);
    if (!L) throw new Error("lua_newstate failed");
    this.L = L;
    // Lua's default panic handler calls abort(); throwing instead unwinds to run(), which retires the worker.
    m._lua_atpanic(L, m.addFunction(() => {
      throw new LuaPanic("unprotected error in the Lua runtime");
    }, "ii"));

    m._luaopen_base(L);
    m._lua_settop(L, 0);
    const libs: [string, (L: number) => number][] = [
      ["string", m._luaopen_string],
      ["table", m._luaopen_table],
      ["math", m._luaopen_math],
      ["utf8", m._luaopen_utf8],
      ["coroutine", m._luaopen_coroutine],
      ["os", m._luaopen_os],
      ["debug", m._luaopen_debug],
    ];
    for (const [name, open] of libs) {
      open.call(m, L);
      m._lua_setglobal(L, this.api.cstr(name));
    }

    const host = createHostFunctions(this.api, bridge);
    m._lua_createtable(L, 0, Object.keys(host).length); // 1: the host functions
    for (const [name, fn] of Object.entries(host)) {
      m._lua_pushcclosure(L, m.addFunction(fn, "ii"), 0);
      m._lua_setfield(L, -2, this.api.cstr(name));
    }
    m._lua_createtable(L, 0, 32); // 2: what the prelude's modules export to the ones after them
    for (const { chunkname, source } of PRELUDE) {
      m._lua_settop(L, 2);
      const ptr = this.api.put(source);
      if (m._luaL_loadbufferx(L, ptr, source.length, this.api.cstr(chunkname), this.api.cstr("t")) !== LuaStatus.ok) {
        throw new Error(`sandbox prelude does not compile: ${this.api.toString(L, -1)}`);
      }
      m._lua_pushvalue(L, 1);
      m._lua_pushvalue(L, 2);
      if (m._lua_pcallk(L, 2, 1, 0, 0, 0) !== LuaStatus.ok) throw new Error(`sandbox prelude failed: ${this.api.toString(L, -1)}`);
    }
    m._lua_getfield(L, -1, this.api.cstr("run"));
    this.runRef = m._luaL_ref(L, LUA_REGISTRYINDEX);
    m._lua_getfield(L, -1, this.api.cstr("gc"));
    this.gcRef = m._luaL_ref(L, LUA_REGISTRYINDEX);
    m._lua_settop(L, 0);
    this.collect();
  }

  private nextSeed(): bigint {
    if (this.seedAt >= this.seeds.length) {
      crypto.getRandomValues(this.seeds);
      this.seedAt = 0;
    }
    return BigInt(this.seeds[this.seedAt++]!);
  }

  /** Compiles plugin source in text mode only (binary chunks are refused by the loader itself). */
  compile(source: string): CompileResult {
    const { m, api, L } = this;
    const bytes = Buffer.from(source, "utf8");
    const ptr = api.put(bytes);
    this.allocFailed = false;
    this.limit = this.used + this.limits.memoryBytes;
    const status = m._luaL_loadbufferx(L, ptr, bytes.length, api.cstr(PLUGIN_CHUNK), api.cstr("t"));
    this.limit = Number.POSITIVE_INFINITY;
    if (status !== LuaStatus.ok) {
      const message = api.toString(L, -1) ?? `the plugin does not compile (status ${status})`;
      m._lua_settop(L, 0);
      return { ok: false, message, line: errorLine(message), outOfMemory: status === LuaStatus.errmem };
    }
    return { ok: true, ref: m._luaL_ref(L, LUA_REGISTRYINDEX) };
  }

  /** Compiles and forgets: the upload check. */
  check(source: string): CompileResult {
    const compiled = this.compile(source);
    if (compiled.ok) this.m._luaL_unref(this.L, LUA_REGISTRYINDEX, compiled.ref);
    return compiled;
  }

  /** The compiled chunk of a source the pool numbered; compiled once, then kept (least recently used first out). */
  private chunk(sourceId: number, source: string): CompileResult {
    const cached = this.chunks.get(sourceId);
    if (cached !== undefined) {
      this.chunks.delete(sourceId);
      this.chunks.set(sourceId, cached);
      return cached;
    }
    const compiled = this.compile(source);
    this.chunks.set(sourceId, compiled);
    if (this.chunks.size > CHUNK_CACHE_SIZE) {
      const [oldest, old] = this.chunks.entries().next().value as [number, CompileResult];
      this.chunks.delete(oldest);
      if (old.ok) this.m._luaL_unref(this.L, LUA_REGISTRYINDEX, old.ref);
    }
    return compiled;
  }

  run(job: RunJob): RunResult {
    const { m, api, L, limits } = this;
    if (job.clockMs !== null && !(typeof job.clockMs === "number" && Math.abs(job.clockMs) <= MAX_CLOCK_MS)) {
      return { result: { kind: "killed", message: "invalid run input: clockMs must be epoch milliseconds", line: null, cpuMs: 0 }, retire: false };
    }
    const chunk = this.chunk(job.sourceId, job.source);
    if (!chunk.ok) {
      const kind = chunk.outOfMemory ? "memory_limit" : "script_error";
      return { result: { kind, message: chunk.message, line: chunk.line, cpuMs: 0 }, retire: false };
    }

    m._lua_settop(L, 0);
    m._lua_rawgeti(L, LUA_REGISTRYINDEX, BigInt(this.runRef));
    m._lua_rawgeti(L, LUA_REGISTRYINDEX, BigInt(chunk.ref));
    api.pushString(L, job.method);
    api.pushBytes(L, job.body);
    api.pushStringMap(L, job.headers);
    api.pushStringMap(L, job.query);
    api.pushString(L, job.storeId);
    api.pushString(L, job.pluginName);
    m._lua_pushinteger(L, BigInt(job.pluginVersion));
    api.pushStringMap(L, job.secrets);
    m._lua_pushinteger(L, BigInt(limits.maxResultBytes));
    m._lua_pushinteger(L, BigInt(limits.maxLogLines));
    m._lua_pushinteger(L, this.nextSeed());
    m._lua_pushinteger(L, this.nextSeed());
    // The run's clock in whole seconds (what os.time() returns), or nil for the real time.
    if (job.clockMs === null) m._lua_pushnil(L);
    else m._lua_pushinteger(L, BigInt(Math.floor(job.clockMs / 1000)));

    this.allocFailed = false;
    this.limit = this.used + limits.memoryBytes;
    let status: number;
    try {
      status = m._lua_pcallk(L, 14, 4, 0, 0, 0);
    } catch (err) {
      // A JavaScript exception crossed the WebAssembly stack (panic, trap, stack exhaustion):
      // the Lua state is mid-operation and must not be used again.
      this.limit = Number.POSITIVE_INFINITY;
      const what = err instanceof Error ? err.message : String(err);
      return { result: { kind: "killed", message: `the Lua runtime failed: ${what}`, line: null, cpuMs: 0 }, retire: true };
    }
    this.limit = Number.POSITIVE_INFINITY;

    let result: WorkerResult;
    if (status !== LuaStatus.ok) {
      // The runner itself failed: out of memory while building the environment, or an error a check re-raised.
      const message = api.toString(L, -1) ?? `Lua error (status ${status})`;
      result = this.failure(message, status === LuaStatus.errmem);
    } else {
      const kind = api.toString(L, 1);
      const a = api.toString(L, 2) ?? "";
      if (kind === "ok") {
        result = { kind: "ok", status: a as "pushInvoice" | "disputeInvoice" | "ignore", invoiceId: api.toString(L, 3), eventId: api.toString(L, 4), cpuMs: 0 };
      } else if (kind === "rejected" || kind === "invalid_result") {
        result = { kind, message: a, line: null, cpuMs: 0 };
      } else {
        result = this.failure(a, false);
      }
    }
    m._lua_settop(L, 0);
    if (this.used > this.baseline + GC_SLACK_BYTES) this.collect();
    return { result, retire: false };
  }

  private failure(message: string, outOfMemory: boolean): WorkerResult {
    if (outOfMemory || (this.allocFailed && /not enough memory$/.test(message))) {
      return { kind: "memory_limit", message: `the script used more than its memory limit of ${this.limits.memoryBytes} bytes`, line: errorLine(message), cpuMs: 0 };
    }
    return { kind: "script_error", message, line: errorLine(message), cpuMs: 0 };
  }

  private collect(): void {
    const { m, L } = this;
    m._lua_rawgeti(L, LUA_REGISTRYINDEX, BigInt(this.gcRef));
    m._lua_pcallk(L, 0, 0, 0, 0, 0);
    m._lua_settop(L, 0);
    this.baseline = this.used;
  }

  memoryUsed(): number {
    return this.used;
  }
}
