// Identifiers: a short type prefix and 20 random base32 characters (100 bits), e.g. `cus_4k2m…`.
//
// The random bytes come from the CSPRNG a pool at a time (as Node's randomUUID does): one call to
// randomBytes per id cost a few microseconds, a payment makes several ids, and every one of them is on the
// thread that answers webhooks.
import { randomFillSync } from "node:crypto";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";
const POOL_BYTES = 4096;
const pool = Buffer.alloc(POOL_BYTES);
let used = POOL_BYTES;

export function randomBase32(length: number): string {
  if (length > POOL_BYTES) throw new RangeError(`at most ${POOL_BYTES} random characters at once`);
  if (used + length > POOL_BYTES) {
    randomFillSync(pool);
    used = 0;
  }
  let out = "";
  for (let i = 0; i < length; i++) out += ALPHABET[pool[used + i]! & 31];
  // No byte is used twice: the pool is filled again before it runs out.
  used += length;
  return out;
}

export type IdPrefix = "st" | "key" | "cus" | "inv" | "rev" | "ses" | "dlv" | "plg" | "evt" | "ep" | "edl" | "att" | "cu";

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBase32(20)}`;
}
