// Parsers for the command line's option values and input files: repeatable options, `name: value` headers,
// `NAME=value` pairs and secrets files, positive whole numbers, checkout items. Each names what is wrong.
import { InvalidArgumentError } from "commander";
import { CliError, readInput } from "./context.ts";

/** For a repeatable option: every value given, in order. */
export const collect = (value: string, previous: string[]) => [...previous, value];

export function parseHeaders(lines: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(":");
    if (i <= 0) throw new CliError(`header "${line}" is not "name: value"`);
    out[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return out;
}

export function parsePairs(pairs: string[], what: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of pairs) {
    const i = pair.indexOf("=");
    if (i <= 0) throw new CliError(`${what} "${pair}" is not NAME=value`);
    out[pair.slice(0, i)] = pair.slice(i + 1);
  }
  return out;
}

/**
 * Secrets from a file or standard input, so they stay out of shell history and `ps`: a JSON object of
 * strings, or `NAME=value` lines (the value is everything after the first `=`, as is; blank lines and
 * lines starting with # are skipped).
 */
export function parseSecretsFile(text: string, file: string): Record<string, string> {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(trimmed);
    } catch (err) {
      throw new CliError(`--secrets-file ${file} is not valid JSON: ${(err as Error).message}`);
    }
    const entries = Object.entries(parsed as Record<string, unknown>);
    const bad = entries.find(([, v]) => typeof v !== "string");
    if (bad) throw new CliError(`--secrets-file ${file}: the value of "${bad[0]}" must be a string`);
    return Object.fromEntries(entries) as Record<string, string>;
  }
  const out: Record<string, string> = {};
  for (const [n, raw] of text.split("\n").entries()) {
    const line = raw.replace(/\r$/, "");
    if (line.trim() === "" || line.trimStart().startsWith("#")) continue;
    const i = line.indexOf("=");
    if (i <= 0) throw new CliError(`--secrets-file ${file} line ${n + 1} is not NAME=value`);
    out[line.slice(0, i).trim()] = line.slice(i + 1);
  }
  return out;
}

/** `--secrets-file` then `--secret`: the pairs given on the command line win. */
export function secretsOf(opts: { secret: string[]; secretsFile?: string }): Record<string, string> {
  return {
    ...(opts.secretsFile === undefined ? {} : parseSecretsFile(readInput(opts.secretsFile, "--secrets-file").toString("utf8"), opts.secretsFile)),
    ...parsePairs(opts.secret, "secret"),
  };
}

export const positiveInt = (v: string) => {
  const n = Number(v);
  if (!/^\d+$/.test(v.trim()) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError("must be a positive whole number");
  return n;
};

/** `variant:quantity:price[:coupon]` → a checkout item, or a CliError naming the part that is wrong. */
export function parseItem(spec: string): { productVariantId: string; quantity: number; price: number; couponId?: string } {
  const parts = spec.split(":");
  const [productVariantId, quantity, price, couponId] = parts;
  const usage = `item "${spec}" is not variant:quantity:price[:coupon] (for example ebook-pdf:1:49.99)`;
  if (parts.length < 3 || parts.length > 4 || !productVariantId || !quantity || !price) throw new CliError(usage);
  if (!/^\d+$/.test(quantity) || Number(quantity) < 1 || !Number.isSafeInteger(Number(quantity))) throw new CliError(`${usage}: quantity "${quantity}" must be a whole number of at least 1`);
  if (!/^\d+(\.\d{1,2})?$/.test(price)) throw new CliError(`${usage}: price "${price}" must be US dollars with at most two decimals`);
  return { productVariantId, quantity: Number(quantity), price: Number(price), ...(couponId ? { couponId } : {}) };
}
