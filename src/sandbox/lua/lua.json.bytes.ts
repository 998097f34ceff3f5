// Byte-level helpers of the JSON reader (lua.json.ts): the literals it matches, where comments end,
// which bytes begin a value, hex digits of a \u escape and the UTF-8 bytes of a code point.
export const TRUE = [0x74, 0x72, 0x75, 0x65];
export const FALSE = [0x66, 0x61, 0x6c, 0x73, 0x65];
export const NULL = [0x6e, 0x75, 0x6c, 0x6c];

/** Where a // comment starting before `from` ends: at the next line break, or at the end of the input. */
export function lineEnd(src: Uint8Array, from: number): number {
  for (let k = from; k < src.length; k++) if (src[k] === 0x0a || src[k] === 0x0d) return k;
  return src.length;
}

/** Just past the "*\/" closing a comment whose body starts at `from`; a comment never closed runs to the end, as in dkjson. */
export function blockCommentEnd(src: Uint8Array, from: number): number {
  for (let k = from; k + 1 < src.length; k++) if (src[k] === 0x2a && src[k + 1] === 0x2f) return k + 2;
  return src.length;
}

/** Characters that begin some JSON value other than a string. */
export function startsValue(c: number): boolean {
  return isDigit(c) || c === 0x2d || c === 0x7b || c === 0x5b || c === 0x74 || c === 0x66 || c === 0x6e;
}

export function isAlnum(c: number): boolean {
  return isDigit(c) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
}

export function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

export function hex4(src: Uint8Array, at: number): number {
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

export function utf8(cp: number, put: (byte: number) => void): void {
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
