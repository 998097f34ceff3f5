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

// Arguments of the host function (see `decode` in sandbox.prelude.lua).
const ARG_TEXT = 1;
const ARG_POS = 2;
const ARG_WHOLE = 3;
const ARG_NULL = 4;
const ARG_OBJECT_META = 5;
const ARG_ARRAY_META = 6;

export function createJsonDecoder(api: LuaBytes): HostFunction {
  const m = api.m;
  let scratch = new Uint8Array(256);
  let numberBuf = new Uint8Array(64);
  /**
   * Objects and arrays left open by decodes further down the stack: a __newindex runs Lua code inside this
   * reader and may call json.decode again. MAX_DEPTH counts them all, so the reader's recursion (JavaScript
   * frames, whose exhaustion could strike inside Lua's own code) stays as bounded as for a single decode.
   */
  let openBelow = 0;

  return (L) => {
    m._lua_settop(L, ARG_ARRAY_META);
    const text = api.stringRef(L, ARG_TEXT);
    if (text === null) {
      m._lua_pushnil(L);
      m._lua_pushinteger(L, 1n);
      api.pushString(L, `json.decode expects a string, got ${api.typeName(L, ARG_TEXT)}`);
      return 3;
    }
    const base = text.ptr;
    const src = m.HEAPU8.slice(base, base + text.len); // a stable copy: pushing may grow (and move) the heap view
    const end = src.length;
    const whole = m._lua_toboolean(L, ARG_WHOLE) !== 0;
    const hasNull = m._lua_type(L, ARG_NULL) > LuaType.nil;
    const objectMeta = m._lua_type(L, ARG_OBJECT_META) === LuaType.table;
    const arrayMeta = m._lua_type(L, ARG_ARRAY_META) === LuaType.table;
    let i = Math.min(end, Math.max(0, Math.floor(m._lua_tonumberx(L, ARG_POS, 0)) - 1));
    /** Where each open object or array starts, innermost last: an input that ends names the innermost. */
    const open: number[] = [];
    const below = openBelow;

    /** The input ended where more was needed. */
    const ended = (): SyntaxFailure => {
      const opener = open.at(-1);
      if (opener === undefined) return new SyntaxFailure("no valid JSON value (reached the end)", -1, end);
      return new SyntaxFailure(src[opener] === 0x7b ? "unterminated object" : "unterminated array", opener, end);
    };

    const skip = (): void => {
      while (i < end) {
        const c = src[i]!;
        if (c === 0x20 || (c >= 0x09 && c <= 0x0d)) i++; // Lua's %s: space, \t, \n, \v, \f, \r
        else if (c === 0xef && src[i + 1] === 0xbb && src[i + 2] === 0xbf) i += 3; // a byte-order mark, anywhere
        else if (c === 0x2f && src[i + 1] === 0x2f) i = lineEnd(src, i + 2);
        else if (c === 0x2f && src[i + 1] === 0x2a) i = blockCommentEnd(src, i + 2);
        else return;
      }
    };

    const pushString = (): void => {
      const quote = i;
      let j = i + 1;
      while (j < end && src[j] !== 0x22 && src[j] !== 0x5c) j++;
      if (j >= end) throw new SyntaxFailure("unterminated string", quote, end);
      if (src[j] === 0x22) {
        m._lua_pushlstring(L, base + quote + 1, j - quote - 1); // no escape: straight from the source string
        i = j + 1;
        return;
      }
      let n = 0;
      const put = (byte: number): void => {
        if (n === scratch.length) {
          const bigger = new Uint8Array(scratch.length * 2);
          bigger.set(scratch);
          scratch = bigger;
        }
        scratch[n++] = byte;
      };
      for (let k = quote + 1; k < j; k++) put(src[k]!);
      i = j;
      for (;;) {
        if (i >= end) throw new SyntaxFailure("unterminated string", quote, end);
        const c = src[i]!;
        if (c === 0x22) break;
        if (c !== 0x5c) {
          put(c);
          i++;
          continue;
        }
        if (i + 1 >= end) throw new SyntaxFailure("unterminated string", quote, end);
        const e = src[i + 1]!;
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
            let cp = hex4(src, i + 2);
            if (cp < 0) throw new SyntaxFailure("invalid unicode escape", i);
            let used = 6;
            if (cp >= 0xd800 && cp <= 0xdbff && src[i + 6] === 0x5c && src[i + 7] === 0x75) {
              const low = hex4(src, i + 8);
              if (low >= 0xdc00 && low <= 0xdfff) {
                cp = 0x10000 + (cp - 0xd800) * 0x400 + (low - 0xdc00);
                used = 12;
              }
            }
            utf8(cp, put); // a lone surrogate is encoded like utf8.char does
            i += used;
            continue;
          }
          default:
            throw new SyntaxFailure("invalid escape", i);
        }
        i += 2;
      }
      api.pushBytes(L, scratch.subarray(0, n));
      i++;
    };

    const pushNumber = (): void => {
      // JSON's number shape (leading zeros allowed, as dkjson does), converted by Lua's own tonumber;
      // a token of any length is read, as dkjson reads it (a 70-digit amount becomes a float).
      const start = i;
      let j = i;
      if (src[j] === 0x2d) j++;
      const digits = j;
      while (j < end && isDigit(src[j]!)) j++;
      if (j === digits) throw new SyntaxFailure("no valid JSON value", start);
      if (src[j] === 0x2e) j++;
      while (j < end && isDigit(src[j]!)) j++;
      if (src[j] === 0x2e) throw new SyntaxFailure("no valid JSON value", start); // "1.5.5": dkjson refuses the whole token
      if (src[j] === 0x65 || src[j] === 0x45) j++;
      if (src[j] === 0x2b || src[j] === 0x2d) j++;
      while (j < end && isDigit(src[j]!)) j++;
      if (j - start >= numberBuf.length) numberBuf = new Uint8Array(2 * (j - start + 1));
      numberBuf.set(src.subarray(start, j));
      numberBuf[j - start] = 0;
      const ptr = api.put(numberBuf.subarray(0, j - start + 1));
      if (m._lua_stringtonumber(L, ptr) === 0) throw new SyntaxFailure("no valid JSON value", start);
      i = j;
    };

    /** `word` at `at`, not followed by a letter or digit ("truex" is no value, as in dkjson). */
    const literal = (word: readonly number[], at: number): boolean => {
      for (let k = 0; k < word.length; k++) if (src[at + k] !== word[k]) return false;
      const next = src[at + word.length];
      return next === undefined || !isAlnum(next);
    };

    const enter = (at: number): void => {
      if (below + open.length >= MAX_DEPTH) throw new SyntaxFailure("too deeply nested", at);
      if (!m._lua_checkstack(L, 4)) throw new SyntaxFailure("too deeply nested", at);
      open.push(at);
    };

    const pushValue = (): void => {
      const c = src[i];
      if (c === undefined) throw ended();
      if (c === 0x22) return pushString();
      if (c === 0x7b) {
        enter(i);
        m._lua_createtable(L, 0, 4);
        if (objectMeta) {
          m._lua_pushvalue(L, ARG_OBJECT_META);
          m._lua_setmetatable(L, -2);
        }
        i++;
        skip();
        if (src[i] === 0x7d) {
          i++;
          open.pop();
          return;
        }
        for (;;) {
          if (i >= end) throw ended();
          if (src[i] !== 0x22) throw new SyntaxFailure(startsValue(src[i]!) ? "object key is not a string" : "no valid JSON value", i);
          pushString();
          skip();
          if (i >= end) throw ended();
          if (src[i] !== 0x3a) throw new SyntaxFailure("expected ':' after an object key", i);
          i++;
          skip();
          pushValue();
          if (objectMeta) {
            openBelow = below + open.length; // for a json.decode called by __newindex
            m._lua_settable(L, -3); // through the metatable: its __newindex sees each new key
          } else m._lua_rawset(L, -3);
          skip();
          const next = src[i];
          if (next === 0x7d) break;
          if (next === undefined) throw ended();
          if (next !== 0x2c) throw new SyntaxFailure("expected ',' or '}' in object", i);
          i++;
          skip();
        }
        i++;
        open.pop();
        return;
      }
      if (c === 0x5b) {
        enter(i);
        m._lua_createtable(L, 0, 0);
        if (arrayMeta) {
          m._lua_pushvalue(L, ARG_ARRAY_META);
          m._lua_setmetatable(L, -2);
        }
        i++;
        skip();
        if (src[i] === 0x5d) {
          i++;
          open.pop();
          return;
        }
        let n = 0;
        for (;;) {
          pushValue();
          if (arrayMeta) {
            openBelow = below + open.length;
            m._lua_seti(L, -2, BigInt(++n));
          } else m._lua_rawseti(L, -2, BigInt(++n));
          skip();
          const next = src[i];
          if (next === 0x5d) break;
          if (next === undefined) throw ended();
          if (next !== 0x2c) throw new SyntaxFailure("expected ',' or ']' in array", i);
          i++;
          skip();
        }
        i++;
        open.pop();
        return;
      }
      if (c === 0x74 && literal(TRUE, i)) {
        m._lua_pushboolean(L, 1);
        i += 4;
        return;
      }
      if (c === 0x66 && literal(FALSE, i)) {
        m._lua_pushboolean(L, 0);
        i += 5;
        return;
      }
      if (c === 0x6e && literal(NULL, i)) {
        if (hasNull) m._lua_pushvalue(L, ARG_NULL);
        else m._lua_pushnil(L);
        i += 4;
        return;
      }
      if (c === 0x2d || isDigit(c)) return pushNumber();
      throw new SyntaxFailure("no valid JSON value", i);
    };

    let failure: SyntaxFailure;
    try {
      skip();
      pushValue();
      const after = i; // dkjson's second result: the position right after the value
      if (whole) {
        skip();
        if (i < end) throw new SyntaxFailure("unexpected text after the JSON value", i);
      }
      m._lua_pushinteger(L, BigInt(after + 1));
      return 2;
    } catch (err) {
      if (!(err instanceof SyntaxFailure)) throw err; // Lua's own errors (out of memory, a __newindex's) keep unwinding
      failure = err;
    } finally {
      openBelow = below;
    }
    m._lua_settop(L, ARG_ARRAY_META);
    m._lua_pushnil(L);
    m._lua_pushinteger(L, BigInt(failure.pos + 1));
    api.pushString(L, located(src, failure));
    return 3;
  };
}

const TRUE = [0x74, 0x72, 0x75, 0x65];
const FALSE = [0x66, 0x61, 0x6c, 0x73, 0x65];
const NULL = [0x6e, 0x75, 0x6c, 0x6c];

/** Where a // comment starting before `from` ends: at the next line break, or at the end of the input. */
function lineEnd(src: Uint8Array, from: number): number {
  for (let k = from; k < src.length; k++) if (src[k] === 0x0a || src[k] === 0x0d) return k;
  return src.length;
}

/** Just past the "*\/" closing a comment whose body starts at `from`; a comment never closed runs to the end, as in dkjson. */
function blockCommentEnd(src: Uint8Array, from: number): number {
  for (let k = from; k + 1 < src.length; k++) if (src[k] === 0x2a && src[k + 1] === 0x2f) return k + 2;
  return src.length;
}

/** Characters that begin some JSON value other than a string. */
function startsValue(c: number): boolean {
  return isDigit(c) || c === 0x2d || c === 0x7b || c === 0x5b || c === 0x74 || c === 0x66 || c === 0x6e;
}

function isAlnum(c: number): boolean {
  return isDigit(c) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

function hex4(src: Uint8Array, at: number): number {
  let v = 0;
  for (let k = 0; k < 4; k++) {
    const c = src[at + k];
    if (c === undefined) return -1;
    const d = c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : c >= 0x41 && c <= 0x46 ? c - 0x37 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

function utf8(cp: number, put: (byte: number) => void): void {
  if (cp < 0x80) put(cp);
  else if (cp < 0x800) {
    put(0xc0 | (cp >> 6));
    put(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    put(0xe0 | (cp >> 12));
    put(0x80 | ((cp >> 6) & 0x3f));
    put(0x80 | (cp & 0x3f));
  } else {
    put(0xf0 | (cp >> 18));
    put(0x80 | ((cp >> 12) & 0x3f));
    put(0x80 | ((cp >> 6) & 0x3f));
    put(0x80 | (cp & 0x3f));
  }
}
