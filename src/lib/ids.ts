// Identifiers: a short type prefix and 20 random base32 characters (100 bits), e.g. `cus_4k2m…`.
import { randomBytes } from "node:crypto";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

export function randomBase32(length: number): string {
  const bytes = randomBytes(length);
  let out = "";
  for (let i = 0; i < length; i++) out += ALPHABET[bytes[i]! & 31];
  return out;
}

export type IdPrefix = "st" | "key" | "cus" | "inv" | "rev" | "ses" | "dlv" | "plg" | "evt" | "ep" | "edl" | "att" | "cu";

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBase32(20)}`;
}
