// `storefront secrets rekey`: moves every sealed value (the plugins' secrets, the endpoints' signing
// secrets) from an old key to the configured one, all or nothing. With SECRETS_KEY set, that is the new
// key. Without it the key is the file beside the embedded database: rekey then moves everything to a fresh
// key and puts it in that file, so the next start finds the key the secrets are under.
import { readFileSync, rmSync } from "node:fs";
import type { Command } from "commander";
import { openDatabase } from "../platform/db/database.ts";
import { AppError } from "../errors.ts";
import { rekeySecrets, type RekeyReport } from "../platform/crypto/secrets-key.service.ts";
import { createSecretBox, generateSecretsKey, installKeyFile, parseSecretsKey, resolveSecretsKey, stageKeyFile } from "../platform/crypto/secret-box.ts";
import { cliConfig, printJson } from "./context.ts";

function boxOf(text: string, what: string) {
  const key = parseSecretsKey(text.trim());
  if (key.length !== 32) throw new AppError("invalid_request", `${what} must be 32 bytes, as 64 hex characters or base64`);
  return createSecretBox(key);
}

interface RekeyOptions {
  from?: string;
  fromFile?: string;
}

export function registerSecretsCommands(program: Command): void {
  const secrets = program.command("secrets").description("secrets at rest: plugins' secrets and endpoints' signing secrets (AES-256-GCM under SECRETS_KEY)");
  secrets
    .command("rekey")
    .description("re-encrypt every sealed secret from an old key to the configured SECRETS_KEY (all or nothing); without SECRETS_KEY, to a fresh key written to the key file")
    .option("--from <key>", "the old key (64 hex characters or base64); prefer --from-file, which keeps it out of shell history")
    .option("--from-file <path>", "a file holding the old key (without SECRETS_KEY: default, the key file itself)")
    .action(async (opts: RekeyOptions) => {
      if (opts.from !== undefined && opts.fromFile !== undefined) throw new AppError("invalid_request", "give the old key with --from-file <path> or --from <key>, not both");
      const config = cliConfig();
      const current = resolveSecretsKey(config);
      const given = opts.fromFile !== undefined ? readFileSync(opts.fromFile, "utf8") : opts.from;
      if (given === undefined && current.source === "env") throw new AppError("invalid_request", "give the old key with --from-file <path> or --from <key>");
      const old = boxOf(given ?? current.key.toString("hex"), "the old key");
      const db = openDatabase(config.database);
      try {
        await db.migrate();
        const report = current.source === "env" ? await rekeySecrets(db.kysely, old, createSecretBox(current.key)) : await rekeyToNewFileKey(db.kysely, old, current.file!);
        printJson(report);
        if (report.unreadable.length > 0) {
          throw new AppError("conflict", `${report.unreadable.length} sealed value(s) open with neither key; nothing was changed`);
        }
      } finally {
        await db.close();
      }
    });
}

/** Stages a fresh key beside the old file, moves everything to it, and installs it only once the move committed. */
async function rekeyToNewFileKey(db: Parameters<typeof rekeySecrets>[0], old: ReturnType<typeof createSecretBox>, file: string): Promise<RekeyReport & { keyFile?: string; previousKeyFile?: string | null }> {
  const key = generateSecretsKey();
  const staged = stageKeyFile(file, key);
  let report: RekeyReport;
  try {
    report = await rekeySecrets(db, old, createSecretBox(parseSecretsKey(key)));
  } catch (err) {
    rmSync(staged, { force: true });
    throw err;
  }
  if (report.unreadable.length > 0) {
    rmSync(staged, { force: true });
    return report;
  }
  const installed = installKeyFile(file);
  return { ...report, keyFile: installed.file, previousKeyFile: installed.previous };
}
