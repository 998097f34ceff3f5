// `storefront secrets rekey`: moves every plugin's stored secrets from an old SECRETS_KEY to the
// configured one (SECRETS_KEY, or the key file beside the embedded database).
import { readFileSync } from "node:fs";
import type { Command } from "commander";
import { openDatabase } from "../db/database.ts";
import { AppError } from "../errors.ts";
import { rekeySecrets } from "../plugins/secrets-key.service.ts";
import { createSecretBox, parseSecretsKey, resolveSecretsKey } from "../plugins/secrets.ts";
import { cliConfig, printJson } from "./context.ts";

function boxOf(text: string, what: string) {
  const key = parseSecretsKey(text.trim());
  if (key.length !== 32) throw new AppError("invalid_request", `${what} must be 32 bytes, as 64 hex characters or base64`);
  return createSecretBox(key);
}

export function registerSecretsCommands(program: Command): void {
  const secrets = program.command("secrets").description("plugin secrets at rest (AES-256-GCM under SECRETS_KEY)");
  secrets
    .command("rekey")
    .description("re-encrypt every plugin's secrets from an old key to the configured SECRETS_KEY (all or nothing)")
    .option("--from <key>", "the old key (64 hex characters or base64); prefer --from-file, which keeps it out of shell history")
    .option("--from-file <path>", "a file holding the old key")
    .action(async (opts: { from?: string; fromFile?: string }) => {
      if ((opts.from === undefined) === (opts.fromFile === undefined)) throw new AppError("invalid_request", "give the old key with --from-file <path> or --from <key>");
      const old = boxOf(opts.fromFile !== undefined ? readFileSync(opts.fromFile, "utf8") : opts.from!, "the old key");
      const config = cliConfig();
      const db = openDatabase(config.database);
      try {
        await db.migrate();
        const report = await rekeySecrets(db.kysely, old, createSecretBox(resolveSecretsKey(config).key));
        printJson(report);
        if (report.unreadable.length > 0) {
          throw new AppError("conflict", `${report.unreadable.length} installation(s) open with neither key; nothing was changed`);
        }
      } finally {
        await db.close();
      }
    });
}
