// Pools of realistic values built once per seed with @faker-js/faker: names, e-mail domains, user agents,
// countries, a catalogue of products with variants and prices, coupons, review texts, field values.
// Faker costs microseconds per call; the row generator draws from these pools with the seeded PRNG instead.
import { Faker, base, en } from "@faker-js/faker";
import { Prng, WeightedPool } from "./prng.ts";

export interface Variant {
  id: string;
  productId: string;
  priceCents: number;
}

export interface Coupon {
  id: string;
  percentOff: number;
}

export interface FieldTemplate {
  key: string;
  type: string;
  value: (rng: Prng, email: string) => string;
}

export interface SeedPools {
  firstNames: string[];
  lastNames: string[];
  emailDomains: WeightedPool<string>;
  userAgents: string[];
  countries: WeightedPool<string>;
  /** Products reviewed: popular ones more often. */
  products: WeightedPool<string>;
  /** Variants bought: a long tail of popularity, like a real catalogue. */
  variants: WeightedPool<Variant>;
  coupons: Coupon[];
  /** Review texts by rating (index 1–5). */
  reviewTexts: string[][];
  usernames: string[];
  notes: string[];
  fieldTemplates: FieldTemplate[];
  companyName: string;
}

const MAIL_PROVIDERS: [string, number][] = [
  ["gmail.com", 40],
  ["outlook.com", 10],
  ["hotmail.com", 8],
  ["yahoo.com", 8],
  ["icloud.com", 7],
  ["proton.me", 4],
  ["gmx.de", 3],
  ["web.de", 2],
];

// Where buyers of digital goods come from: a few big markets and a long tail (filled from faker below).
const BIG_MARKETS: [string, number][] = [
  ["US", 30],
  ["GB", 8],
  ["DE", 7],
  ["CA", 5],
  ["FR", 5],
  ["BR", 4],
  ["PL", 3],
  ["NL", 3],
  ["AU", 3],
  ["SE", 2],
];

const REVIEW_OPENERS: string[][] = [
  [],
  ["Did not work for me.", "Waste of money.", "Never received a working key.", "Support never answered.", "Broken after one day."],
  ["Not great.", "Took far too long to arrive.", "Works, but barely.", "Expected more for the price.", "Setup was a pain."],
  ["It's okay.", "Does the job.", "Average experience.", "Fine, nothing special.", "Decent once it was set up."],
  ["Good product.", "Works well.", "Quick delivery.", "Happy with it.", "Solid value."],
  ["Excellent!", "Instant delivery, works perfectly.", "Best purchase this year.", "Five stars, would buy again.", "Flawless."],
];

const REVIEW_DETAILS = [
  "Delivery came within minutes.",
  "The seller answered my question quickly.",
  "Had to ask support for a new key.",
  "Installation instructions were clear.",
  "Price is fair for what you get.",
  "Will recommend it to my friends.",
  "The Discord role was assigned automatically.",
  "Checkout was smooth.",
  "",
  "",
];

/** Builds the pools for a seed. Deterministic: the same seed gives the same pools. */
export function buildPools(seed: number): SeedPools {
  const faker = new Faker({ locale: [en, base] });
  faker.seed(seed);
  const rng = new Prng(seed, "pools");

  const firstNames = Array.from({ length: 600 }, () => faker.person.firstName());
  const lastNames = Array.from({ length: 600 }, () => faker.person.lastName());

  const domains: [string, number][] = [...MAIL_PROVIDERS, ...Array.from({ length: 40 }, (): [string, number] => [faker.internet.domainName(), 0.4])];
  const userAgents = Array.from({ length: 400 }, () => faker.internet.userAgent());

  const countries: [string, number][] = [...BIG_MARKETS, ...Array.from({ length: 120 }, (): [string, number] => [faker.location.countryCode("alpha-2"), 0.2])];

  // A catalogue: products with 1–4 variants each; popularity falls off like 1/rank (Zipf).
  const productIds: string[] = [];
  const variants: [Variant, number][] = [];
  for (let p = 0; p < 80; p++) {
    const productId = rng.id("prod");
    productIds.push(productId);
    const basePrice = Math.round(Number(faker.commerce.price({ min: 2, max: 120, dec: 2 })) * 100);
    const variantCount = rng.between(1, 4);
    for (let v = 0; v < variantCount; v++) {
      // Variants of a product: the base tier and pricier tiers (e.g. lifetime vs. monthly).
      variants.push([{ id: rng.id("var"), productId, priceCents: Math.max(99, basePrice * (v + 1) - 1) }, 1 / (variants.length + 1)]);
    }
  }
  const products = new WeightedPool(productIds.map((id, rank) => [id, 1 / (rank + 1)] as const));

  const couponCodes = new Set<string>();
  while (couponCodes.size < 30) couponCodes.add(`${faker.word.adjective().toUpperCase().replace(/[^A-Z]/g, "")}${rng.pick([5, 10, 15, 20, 25, 30, 50])}`);
  const coupons = [...couponCodes].map((id) => ({ id, percentOff: Number(/\d+$/.exec(id)![0]) }));

  const reviewTexts = REVIEW_OPENERS.map((openers) => {
    const out: string[] = [];
    for (const opener of openers) {
      for (const detail of REVIEW_DETAILS) out.push(detail === "" ? opener : `${opener} ${detail}`);
      out.push(`${opener} ${faker.commerce.productAdjective()} ${faker.commerce.product().toLowerCase()}.`);
    }
    return out;
  });

  const usernames = Array.from({ length: 2000 }, () => faker.internet.username());
  const notes = Array.from({ length: 200 }, () => faker.lorem.sentence({ min: 3, max: 10 }));

  const fieldTemplates: FieldTemplate[] = [
    { key: "Discord username", type: "text", value: (r) => r.pick(usernames).toLowerCase() },
    { key: "Delivery e-mail", type: "email", value: (_r, email) => email },
    { key: "Accept the terms of service", type: "checkbox", value: () => "true" },
    { key: "Minecraft username", type: "text", value: (r) => r.pick(usernames) },
    { key: "Number of seats", type: "number", value: (r) => String(r.between(1, 25)) },
    { key: "Order notes", type: "textarea", value: (r) => r.pick(notes) },
  ];

  return {
    firstNames,
    lastNames,
    emailDomains: new WeightedPool(domains),
    userAgents,
    countries: new WeightedPool(countries),
    products,
    variants: new WeightedPool(variants),
    coupons,
    reviewTexts,
    usernames,
    notes,
    fieldTemplates,
    companyName: faker.company.name(),
  };
}
