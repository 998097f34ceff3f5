// A small, fast, seeded pseudo-random generator (sfc32) for the seed: the same seed gives the same stream,
// so the same ids and data. Not for secrets: API keys stay crypto-random.

// The alphabet of src/lib/ids.ts, so seeded ids look like the service's own (`cus_` + 20 base32 characters).
const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";
// Every pair of base32 characters, indexed by 10 bits: an id costs four draws and ten concatenations.
const PAIRS: string[] = Array.from({ length: 1024 }, (_, i) => ALPHABET[i >> 5]! + ALPHABET[i & 31]!);

/** FNV-1a over a string: turns a (seed, label) pair into 32 bits of PRNG state. */
function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export class Prng {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  /** A stream named by `label` under `seed`: different labels give independent streams. */
  constructor(seed: number, label = "") {
    this.#a = hash32(`${seed}:${label}:a`);
    this.#b = hash32(`${seed}:${label}:b`);
    this.#c = hash32(`${seed}:${label}:c`);
    this.#d = hash32(`${seed}:${label}:d`) | 1;
    for (let i = 0; i < 16; i++) this.next();
  }

  /** A uniform 32-bit unsigned integer. */
  next(): number {
    const t = (((this.#a + this.#b) | 0) + this.#d) | 0;
    this.#d = (this.#d + 1) | 0;
    this.#a = this.#b ^ (this.#b >>> 9);
    this.#b = (this.#c + (this.#c << 3)) | 0;
    this.#c = (this.#c << 21) | (this.#c >>> 11);
    this.#c = (this.#c + t) | 0;
    return t >>> 0;
  }

  /** Uniform in [0, 1). */
  float(): number {
    return this.next() / 4294967296;
  }

  /** Uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.float() * n);
  }

  /** Uniform integer in [min, max]. */
  between(min: number, max: number): number {
    return min + Math.floor(this.float() * (max - min + 1));
  }

  chance(p: number): boolean {
    return this.float() < p;
  }

  pick<T>(values: readonly T[]): T {
    return values[Math.floor(this.float() * values.length)]!;
  }

  /** Geometric count (0, 1, 2, …) with the given mean: many small values, a long tail. */
  geometric(mean: number): number {
    const q = mean / (mean + 1);
    return Math.floor(Math.log(1 - this.float()) / Math.log(q));
  }

  /** `prefix_` + 20 base32 characters (100 bits), the shape of src/lib/ids.ts. */
  id(prefix: string): string {
    const a = this.next();
    const b = this.next();
    const c = this.next();
    const d = this.next();
    return (
      prefix +
      "_" +
      PAIRS[a & 1023]! +
      PAIRS[(a >>> 10) & 1023]! +
      PAIRS[(a >>> 20) & 1023]! +
      PAIRS[b & 1023]! +
      PAIRS[(b >>> 10) & 1023]! +
      PAIRS[(b >>> 20) & 1023]! +
      PAIRS[c & 1023]! +
      PAIRS[(c >>> 10) & 1023]! +
      PAIRS[(c >>> 20) & 1023]! +
      PAIRS[d & 1023]!
    );
  }

  /** `n` decimal digits, the first one non-zero (chat-account snowflakes, card digits). */
  digits(n: number): string {
    let out = String(1 + this.int(9));
    while (out.length < n) out += String(this.next() % 1_000_000_000).padStart(9, "0");
    return out.slice(0, n);
  }
}

/** Picks from values with fixed weights in O(log n): cumulative weights and a binary search. */
export class WeightedPool<T> {
  readonly values: readonly T[];
  readonly #cumulative: Float64Array;

  constructor(entries: readonly (readonly [T, number])[]) {
    if (entries.length === 0) throw new Error("WeightedPool needs at least one value");
    this.values = entries.map(([v]) => v);
    this.#cumulative = new Float64Array(entries.length);
    let sum = 0;
    entries.forEach(([, w], i) => {
      sum += w;
      this.#cumulative[i] = sum;
    });
  }

  draw(rng: Prng): T {
    const target = rng.float() * this.#cumulative[this.#cumulative.length - 1]!;
    let lo = 0;
    let hi = this.#cumulative.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#cumulative[mid]! <= target) lo = mid + 1;
      else hi = mid;
    }
    return this.values[lo]!;
  }
}
