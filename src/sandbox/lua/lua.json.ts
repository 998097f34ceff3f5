// json.decode (and request.json) for plugins: a JSON reader written in JavaScript that walks the
// bytes of the Lua string and builds the Lua tables directly through the C API. Decoding in Lua cost
// about 140 µs for a 2 KB webhook body, most of a run; this takes a fraction of that. It keeps the
// semantics of dkjson's reader: strings are the exact bytes (invalid UTF-8 included, pushed straight
// from the source string when they hold no escape), numbers of any length are converted by Lua itself
// (lua_stringtonumber, so 42 is an integer and 42.0 a float), \u escapes become UTF-8 with surrogate
// pairs joined, objects and arrays get the metatables the caller passes and are filled through them (a
// __newindex is called, as dkjson's assignments call it), null becomes `nullval`. Whitespace is what
// dkjson skips: Lua's %s (\f and \v too), byte-order marks and // or /* */ comments.
// Bad input gives dkjson's shape, `nil, position, message`, with dkjson's wording ("unterminated
// array at line 1, column 1") wherever dkjson refuses the input too.
import type { LuaBytes } from "./lua.api.ts";
import { LuaType } from "./lua.api.ts";
import type { HostFunction } from "./lua.host.ts";
import { blockCommentEnd, FALSE, hex4, isAlnum, isDigit, lineEnd, NULL, startsValue, TRUE, utf8 } from "./lua.json.bytes.ts";

const MAX_DEPTH = 1000;

/** A refusal: `reason`, where it is (`at`, an index, or -1 when no place is named) and the position returned (`pos`, an index). */
class SyntaxFailure {
  readonly reason: string;
  readonly at: number;
  readonly pos: number;
  constructor(reason: string, at: number, pos = at) {
    this.reason = reason;
    this.at = at;
    this.pos = pos;
  }
}

/** dkjson's "at line L, column C": lines are counted by "\n" alone, columns in bytes from 1. */
function located(src: Uint8Array, failure: SyntaxFailure): string {
  if (failure.at < 0) return failure.reason;
  let line = 1;
  let lineStart = 0;
  for (let k = 0; k < failure.at && k < src.length; k++) {
    if (src[k] === 0x0a) {
      line++;
      lineStart = k + 1;
    }
  }
  return `${failure.reason} at line ${line}, column ${failure.at - lineStart + 1}`;
}


// Arguments of the host function (see `decode` in prelude/json.lua).
const ARG_TEXT = 1;
const ARG_POS = 2;
const ARG_WHOLE = 3;
const ARG_NULL = 4;
const ARG_OBJECT_META = 5;
const ARG_ARRAY_META = 6;

/** What every decode on one Lua state shares: growable buffers, and the nesting of decodes further down the stack. */
interface DecoderState {
  scratch: Uint8Array;
  numberBuf: Uint8Array;
  /**
   * Objects and arrays left open by decodes further down the stack: a __newindex runs Lua code inside this
   * reader and may call json.decode again. MAX_DEPTH counts them all, so the reader's recursion (JavaScript
   * frames, whose exhaustion could strike inside Lua's own code) stays as bounded as for a single decode.
   */
  openBelow: number;
}

export function createJsonDecoder(api: LuaBytes): HostFunction {
  const state: DecoderState = { scratch: new Uint8Array(256), numberBuf: new Uint8Array(64), openBelow: 0 };
  return (L) => decode(api, state, L);
}

/** The host function: `value, next position` or dkjson's `nil, position, message`. */
function decode(api: LuaBytes, state: DecoderState, L: number): number {
  const m = api.m;
  m._lua_settop(L, ARG_ARRAY_META);
  const text = api.stringRef(L, ARG_TEXT);
  if (text === null) {
    m._lua_pushnil(L);
    m._lua_pushinteger(L, 1n);
    api.pushString(L, `json.decode expects a string, got ${api.typeName(L, ARG_TEXT)}`);
    return 3;
  }
  const reader = new JsonReader(api, state, L, text.ptr, text.len);
  const whole = m._lua_toboolean(L, ARG_WHOLE) !== 0;
  let failure: SyntaxFailure;
  try {
    reader.skip();
    reader.pushValue();
    const after = reader.i; // dkjson's second result: the position right after the value
    if (whole) {
      reader.skip();
      if (reader.i < reader.end) throw new SyntaxFailure("unexpected text after the JSON value", reader.i);
    }
    m._lua_pushinteger(L, BigInt(after + 1));
    return 2;
  } catch (err) {
    if (!(err instanceof SyntaxFailure)) throw err; // Lua's own errors (out of memory, a __newindex's) keep unwinding
    failure = err;
  } finally {
    state.openBelow = reader.below;
  }
  m._lua_settop(L, ARG_ARRAY_META);
  m._lua_pushnil(L);
  m._lua_pushinteger(L, BigInt(failure.pos + 1));
  api.pushString(L, located(reader.src, failure));
  return 3;
}

/** One decode: walks the bytes from position `i` and pushes what it reads onto the Lua stack. */
class JsonReader {
  private readonly api: LuaBytes;
  private readonly m: LuaBytes["m"];
  private readonly state: DecoderState;
  private readonly L: number;
  private readonly base: number;
  readonly src: Uint8Array;
  readonly end: number;
  private readonly hasNull: boolean;
  private readonly objectMeta: boolean;
  private readonly arrayMeta: boolean;
  i: number;
  /** Where each open object or array starts, innermost last: an input that ends names the innermost. */
  private readonly open: number[] = [];
  readonly below: number;

  constructor(api: LuaBytes, state: DecoderState, L: number, base: number, len: number) {
    const m = api.m;
    this.api = api;
    this.m = m;
    this.state = state;
    this.L = L;
    this.base = base;
    this.src = m.HEAPU8.slice(base, base + len); // a stable copy: pushing may grow (and move) the heap view
    this.end = this.src.length;
    this.hasNull = m._lua_type(L, ARG_NULL) > LuaType.nil;
    this.objectMeta = m._lua_type(L, ARG_OBJECT_META) === LuaType.table;
    this.arrayMeta = m._lua_type(L, ARG_ARRAY_META) === LuaType.table;
    this.i = Math.min(this.end, Math.max(0, Math.floor(m._lua_tonumberx(L, ARG_POS, 0)) - 1));
    this.below = state.openBelow;
  }
  /** The input ended where more was needed. */
  private ended(): SyntaxFailure {
    const opener = this.open.at(-1);
    if (opener === undefined) return new SyntaxFailure("no valid JSON value (reached the end)", -1, this.end);
    return new SyntaxFailure(this.src[opener] === 0x7b ? "unterminated object" : "unterminated array", opener, this.end);
  }

  skip(): void {
    while (this.i < this.end) {
      const c = this.src[this.i]!;
      if (c === 0x20 || (c >= 0x09 && c <= 0x0d)) this.i++; // Lua's %s: space, \t, \n, \v, \f, \r
      else if (c === 0xef && this.src[this.i + 1] === 0xbb && this.src[this.i + 2] === 0xbf) this.i += 3; // a byte-order mark, anywhere
      else if (c === 0x2f && this.src[this.i + 1] === 0x2f) this.i = lineEnd(this.src, this.i + 2);
      else if (c === 0x2f && this.src[this.i + 1] === 0x2a) this.i = blockCommentEnd(this.src, this.i + 2);
      else return;
    }
  }

  private pushString(): void {
    const quote = this.i;
    let j = this.i + 1;
    while (j < this.end && this.src[j] !== 0x22 && this.src[j] !== 0x5c) j++;
    if (j >= this.end) throw new SyntaxFailure("unterminated string", quote, this.end);
    if (this.src[j] === 0x22) {
      this.m._lua_pushlstring(this.L, this.base + quote + 1, j - quote - 1); // no escape: straight from the source string
      this.i = j + 1;
      return;
    }
    let n = 0;
    const put = (byte: number): void => {
      if (n === this.state.scratch.length) {
        const bigger = new Uint8Array(this.state.scratch.length * 2);
        bigger.set(this.state.scratch);
        this.state.scratch = bigger;
      }
      this.state.scratch[n++] = byte;
    };
    for (let k = quote + 1; k < j; k++) put(this.src[k]!);
    this.i = j;
    for (;;) {
      if (this.i >= this.end) throw new SyntaxFailure("unterminated string", quote, this.end);
      const c = this.src[this.i]!;
      if (c === 0x22) break;
      if (c !== 0x5c) {
        put(c);
        this.i++;
        continue;
      }
      if (this.i + 1 >= this.end) throw new SyntaxFailure("unterminated string", quote, this.end);
      const e = this.src[this.i + 1]!;
      switch (e) {
        case 0x22: put(0x22); break;
        case 0x5c: put(0x5c); break;
        case 0x2f: put(0x2f); break;
        case 0x62: put(0x08); break;
        case 0x66: put(0x0c); break;
        case 0x6e: put(0x0a); break;
        case 0x72: put(0x0d); break;
        case 0x74: put(0x09); break;
        case 0x75: {
          let cp = hex4(this.src, this.i + 2);
          if (cp < 0) throw new SyntaxFailure("invalid unicode escape", this.i);
          let used = 6;
          if (cp >= 0xd800 && cp <= 0xdbff && this.src[this.i + 6] === 0x5c && this.src[this.i + 7] === 0x75) {
            const low = hex4(this.src, this.i + 8);
            if (low >= 0xdc00 && low <= 0xdfff) {
              cp = 0x10000 + (cp - 0xd800) * 0x400 + (low - 0xdc00);
              used = 12;
            }
          }
          utf8(cp, put); // a lone surrogate is encoded like utf8.char does
          this.i += used;
          continue;
        }
        default:
          throw new SyntaxFailure("invalid escape", this.i);
      }
      this.i += 2;
    }
    this.api.pushBytes(this.L, this.state.scratch.subarray(0, n));
    this.i++;
  }

  private pushNumber(): void {
    // JSON's number shape (leading zeros allowed, as dkjson does), converted by Lua's own tonumber;
    // a token of any length is read, as dkjson reads it (a 70-digit amount becomes a float).
    const start = this.i;
    let j = this.i;
    if (this.src[j] === 0x2d) j++;
    const digits = j;
    while (j < this.end && isDigit(this.src[j]!)) j++;
    if (j === digits) throw new SyntaxFailure("no valid JSON value", start);
    if (this.src[j] === 0x2e) j++;
    while (j < this.end && isDigit(this.src[j]!)) j++;
    if (this.src[j] === 0x2e) throw new SyntaxFailure("no valid JSON value", start); // "1.5.5": dkjson refuses the whole token
    if (this.src[j] === 0x65 || this.src[j] === 0x45) j++;
    if (this.src[j] === 0x2b || this.src[j] === 0x2d) j++;
    while (j < this.end && isDigit(this.src[j]!)) j++;
    if (j - start >= this.state.numberBuf.length) this.state.numberBuf = new Uint8Array(2 * (j - start + 1));
    this.state.numberBuf.set(this.src.subarray(start, j));
    this.state.numberBuf[j - start] = 0;
    const ptr = this.api.put(this.state.numberBuf.subarray(0, j - start + 1));
    if (this.m._lua_stringtonumber(this.L, ptr) === 0) throw new SyntaxFailure("no valid JSON value", start);
    this.i = j;
  }

  /** `word` at `at`, not followed by a letter or digit ("truex" is no value, as in dkjson). */
  private literal(word: readonly number[], at: number): boolean {
    for (let k = 0; k < word.length; k++) if (this.src[at + k] !== word[k]) return false;
    const next = this.src[at + word.length];
    return next === undefined || !isAlnum(next);
  }

  private enter(at: number): void {
    if (this.below + this.open.length >= MAX_DEPTH) throw new SyntaxFailure("too deeply nested", at);
    if (!this.m._lua_checkstack(this.L, 4)) throw new SyntaxFailure("too deeply nested", at);
    this.open.push(at);
  }

  pushValue(): void {
    const c = this.src[this.i];
    if (c === undefined) throw this.ended();
    if (c === 0x22) return this.pushString();
    if (c === 0x7b) return this.pushObject();
    if (c === 0x5b) return this.pushArray();
    if (c === 0x74 && this.literal(TRUE, this.i)) {
      this.m._lua_pushboolean(this.L, 1);
      this.i += 4;
      return;
    }
    if (c === 0x66 && this.literal(FALSE, this.i)) {
      this.m._lua_pushboolean(this.L, 0);
      this.i += 5;
      return;
    }
    if (c === 0x6e && this.literal(NULL, this.i)) {
      if (this.hasNull) this.m._lua_pushvalue(this.L, ARG_NULL);
      else this.m._lua_pushnil(this.L);
      this.i += 4;
      return;
    }
    if (c === 0x2d || isDigit(c)) return this.pushNumber();
    throw new SyntaxFailure("no valid JSON value", this.i);
  }

  /** An object at `i`: its table, filled key by key (through the caller's metatable, when given). */
  private pushObject(): void {
    this.enter(this.i);
    this.m._lua_createtable(this.L, 0, 4);
    if (this.objectMeta) {
      this.m._lua_pushvalue(this.L, ARG_OBJECT_META);
      this.m._lua_setmetatable(this.L, -2);
    }
    this.i++;
    this.skip();
    if (this.src[this.i] === 0x7d) {
      this.i++;
      this.open.pop();
      return;
    }
    for (;;) {
      if (this.i >= this.end) throw this.ended();
      if (this.src[this.i] !== 0x22) throw new SyntaxFailure(startsValue(this.src[this.i]!) ? "object key is not a string" : "no valid JSON value", this.i);
      this.pushString();
      this.skip();
      if (this.i >= this.end) throw this.ended();
      if (this.src[this.i] !== 0x3a) throw new SyntaxFailure("expected ':' after an object key", this.i);
      this.i++;
      this.skip();
      this.pushValue();
      if (this.objectMeta) {
        this.state.openBelow = this.below + this.open.length; // for a json.decode called by __newindex
        this.m._lua_settable(this.L, -3); // through the metatable: its __newindex sees each new key
      } else this.m._lua_rawset(this.L, -3);
      this.skip();
      const next = this.src[this.i];
      if (next === 0x7d) break;
      if (next === undefined) throw this.ended();
      if (next !== 0x2c) throw new SyntaxFailure("expected ',' or '}' in object", this.i);
      this.i++;
      this.skip();
    }
    this.i++;
    this.open.pop();
  }

  /** An array at `i`: its table, filled index by index (through the caller's metatable, when given). */
  private pushArray(): void {
    this.enter(this.i);
    this.m._lua_createtable(this.L, 0, 0);
    if (this.arrayMeta) {
      this.m._lua_pushvalue(this.L, ARG_ARRAY_META);
      this.m._lua_setmetatable(this.L, -2);
    }
    this.i++;
    this.skip();
    if (this.src[this.i] === 0x5d) {
      this.i++;
      this.open.pop();
      return;
    }
    let n = 0;
    for (;;) {
      this.pushValue();
      if (this.arrayMeta) {
        this.state.openBelow = this.below + this.open.length;
        this.m._lua_seti(this.L, -2, BigInt(++n));
      } else this.m._lua_rawseti(this.L, -2, BigInt(++n));
      this.skip();
      const next = this.src[this.i];
      if (next === 0x5d) break;
      if (next === undefined) throw this.ended();
      if (next !== 0x2c) throw new SyntaxFailure("expected ',' or ']' in array", this.i);
      this.i++;
      this.skip();
    }
    this.i++;
    this.open.pop();
  }
}
