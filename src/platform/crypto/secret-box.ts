// Plugin secrets at rest: AES-256-GCM under SECRETS_KEY. Without SECRETS_KEY the embedded default
// generates a key on first start and keeps it in `secrets.key` beside the database (mode 0600).
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { closeSync, copyFileSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";

const VERSION = "v1";

export interface SecretBox {
  seal(secrets: Record<string, string>): string;
  /** The secrets, or null when the sealed text was made with another key or tampered with. */
  open(sealed: string): Record<string, string> | null;
}

export function parseSecretsKey(value: string): Buffer {
  return /^[0-9a-f]{64}$/i.test(value) ? Buffer.from(value, "hex") : Buffer.from(value, "base64");
}

/** The configured key, or the one kept beside the embedded database (created on first use). */
export function resolveSecretsKey(config: { secretsKey: string | null; dataDir: string }): { key: Buffer; source: "env" | "file"; file?: string } {
  if (config.secretsKey !== null) return { key: parseSecretsKey(config.secretsKey), source: "env" };
  const file = path.join(config.dataDir, "secrets.key");
  if (!existsSync(file)) {
    mkdirSync(config.dataDir, { recursive: true });
    // "wx": if another process created it first, fail and read theirs instead of overwriting it.
    try {
      writeFileSync(file, randomBytes(32).toString("hex") + "\n", { mode: 0o600, flag: "wx" });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
  }
  return { key: parseSecretsKey(readFileSync(file, "utf8").trim()), source: "file", file };
}

/** A new random key, in the key file's format. */
export const generateSecretsKey = (): string => randomBytes(32).toString("hex");

/**
 * Writes `key` to `<file>.next` and makes sure it is on disk, before the database moves to it: if the move
 * is interrupted after its commit, the new key is not lost (installKeyFile then puts it in place).
 */
export function stageKeyFile(file: string, key: string): string {
  const next = `${file}.next`;
  writeFileSync(next, key + "\n", { mode: 0o600 });
  const fd = openSync(next, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return next;
}

/** Makes the staged key the key file; the one it replaces is kept as `<file>.old` (restores of older backups need it). */
export function installKeyFile(file: string): { file: string; previous: string | null } {
  const previous = existsSync(file) ? `${file}.old` : null;
  if (previous !== null) copyFileSync(file, previous);
  renameSync(`${file}.next`, file);
  return { file, previous };
}

export function createSecretBox(key: Buffer): SecretBox {
  if (key.length !== 32) throw new Error("secrets key must be 32 bytes");
  return {
    seal(secrets) {
      if (Object.keys(secrets).length === 0) return "";
      const iv = randomBytes(12);
      const cipher = createCipheriv("aes-256-gcm", key, iv);
      const ct = Buffer.concat([cipher.update(JSON.stringify(secrets), "utf8"), cipher.final()]);
      return `${VERSION}:${iv.toString("base64")}:${cipher.getAuthTag().toString("base64")}:${ct.toString("base64")}`;
    },
    open(sealed) {
      if (sealed === "") return {};
      const [version, iv, tag, ct] = sealed.split(":");
      if (version !== VERSION || iv === undefined || tag === undefined || ct === undefined) return null;
      try {
        const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(iv, "base64"));
        decipher.setAuthTag(Buffer.from(tag, "base64"));
        const text = Buffer.concat([decipher.update(Buffer.from(ct, "base64")), decipher.final()]).toString("utf8");
        return JSON.parse(text) as Record<string, string>;
      } catch {
        return null;
      }
    },
  };
}
