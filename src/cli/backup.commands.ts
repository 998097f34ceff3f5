// `storefront backup FILE` and `storefront restore FILE`: a consistent copy of the live SQLite database with
// its secrets key beside it, and a restore that checks what it restores (SQLite's integrity check, a schema
// this release knows, a key that opens the stored secrets) before it puts anything in place. PostgreSQL is
// backed up with its own tools (docs/operations.md, "Backups").
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Command } from "commander";
import type { Config } from "../config.ts";
import { openDatabase } from "../platform/db/database.ts";
import { MIGRATION_NAMES, SchemaTooNewError } from "../platform/db/migrate.ts";
import { DatabaseInUseError, holdServeLock } from "../platform/db/serve-lock.ts";
import { BackupError, backupSqlite, discardStaged, inspectSqlite, installRestore, stageRestore } from "../platform/db/sqlite-backup.ts";
import { assertSecretsKeyOpensStoredSecrets, SecretsKeyMismatch } from "../platform/crypto/secrets-key.service.ts";
import { createSecretBox, parseSecretsKey } from "../platform/crypto/secret-box.ts";
import { CliError, cliConfig, emit, type JsonOption } from "./context.ts";

const POSTGRES_BACKUP = "PostgreSQL is backed up with pg_dump and restored with pg_restore, with SECRETS_KEY kept beside the dump (docs/operations.md, \"Backups\")";

/** The key file a backup of `file` carries beside it. */
const keyFileOf = (backup: string) => `${backup}.secrets.key`;

export function registerBackupCommands(program: Command): void {
  program
    .command("backup <file>")
    .description("copy the live SQLite database to FILE (consistent while serve runs), with its secrets key beside it as FILE.secrets.key")
    .action(async (file: string, opts: JsonOption) => {
      const config = sqliteConfig();
      const bytes = guard(() => backupSqlite(config.database.file, file));
      const inspection = inspectSqlite(file);
      if (inspection.problems.length > 0) throw new CliError(`the copy ${file} fails SQLite's integrity check (${inspection.problems[0]}): the database itself may be damaged`);
      const key = keyOf(config);
      if (key.source === "file") copyKey(key.file, keyFileOf(file));
      const result = {
        file: path.resolve(file),
        bytes,
        schema: inspection.migrations?.at(-1) ?? null,
        secretsKey: key.source === "file" ? { source: "file", file: path.resolve(keyFileOf(file)) } : { source: key.source },
      };
      emit(opts, result, () => {
        process.stdout.write(`backed up ${config.database.file} to ${file} (${bytes} bytes, schema ${result.schema ?? "none"})\n`);
        process.stdout.write(`${keyNote(key, file)}\n`);
      });
    });

  program
    .command("restore <file>")
    .description("check the SQLite backup FILE (integrity, schema, secrets key) and put it in place of the database; serve must be stopped")
    .option("--check", "check the backup and say what a restore would do, changing nothing")
    .action(async (file: string, opts: JsonOption & { check?: boolean }) => {
      const config = sqliteConfig();
      const target = config.database.file;
      const lock = guard(() => holdServeLock(target));
      try {
        const result = await restore(config, file, opts.check === true);
        emit(opts, result, () => {
          if (result.checked) process.stdout.write(`${file} can be restored: integrity ok, schema ${result.schema}, the secrets key opens its secrets (${result.secretsKey}); nothing was changed\n`);
          else process.stdout.write(`restored ${target} from ${file} (schema ${result.schema}; previous database ${result.previous ?? "none"}); secrets key: ${result.secretsKey}\n`);
        });
      } finally {
        lock.release();
      }
    });
}

interface RestoreResult {
  checked: boolean;
  target: string;
  schema: string;
  /** Migrations this release applied to the restored copy (a backup of an older release). */
  migrated: string[];
  previous: string | null;
  secretsKey: string;
}

async function restore(config: SqliteConfig, file: string, checkOnly: boolean): Promise<RestoreResult> {
  const inspection = guard(() => inspectSqlite(file));
  if (inspection.problems.length > 0) throw new CliError(`${file} fails SQLite's integrity check (${inspection.problems[0]}): not restored`);
  if (inspection.migrations === null) throw new CliError(`${file} is not a storefront database (it has no migrations): not restored`);
  const unknown = inspection.migrations.filter((name) => !MIGRATION_NAMES.includes(name));
  if (unknown.length > 0) throw new CliError(`${file} was taken from a newer release (${unknown.join(", ")}): restore it with that release; not restored`);
  const key = restoreKey(config, file);
  const target = config.database.file;
  const incoming = stageRestore(file, target);
  let migrated: string[];
  try {
    const db = openDatabase({ kind: "sqlite", file: incoming });
    try {
      migrated = (await db.migrate()).map((m) => m.name);
      if (key !== null) await assertSecretsKeyOpensStoredSecrets(db.kysely, createSecretBox(parseSecretsKey(key.text)));
    } finally {
      await db.close();
    }
  } catch (err) {
    discardStaged(incoming);
    if (err instanceof SecretsKeyMismatch) throw new CliError(`the secrets in ${file} do not open with ${key?.label ?? "any key"}: give the key the backup was taken with (SECRETS_KEY, or ${keyFileOf(file)}); not restored`);
    if (err instanceof SchemaTooNewError) throw new CliError(`${file} was taken from a newer release: not restored`);
    throw err;
  }
  const base = { target: path.resolve(target), schema: MIGRATION_NAMES.at(-1)!, migrated, secretsKey: key?.label ?? "none needed (no secrets stored)" };
  if (checkOnly) {
    discardStaged(incoming);
    return { ...base, checked: true, previous: null };
  }
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  const previous = installRestore(incoming, target, stamp);
  if (key?.install) installKey(key.text, path.join(config.dataDir, "secrets.key"), stamp);
  return { ...base, checked: false, previous };
}

interface RestoreKey {
  text: string;
  label: string;
  /** Written to the key file beside the database (the backup's key, when SECRETS_KEY is not set). */
  install: boolean;
}

/** The key the restored secrets must open with: SECRETS_KEY, else the backup's key file, else the key file in place. */
function restoreKey(config: SqliteConfig, file: string): RestoreKey | null {
  if (config.secretsKey !== null) return { text: config.secretsKey, label: "SECRETS_KEY", install: false };
  if (existsSync(keyFileOf(file))) return { text: readFileSync(keyFileOf(file), "utf8").trim(), label: `${keyFileOf(file)}, installed as ${path.join(config.dataDir, "secrets.key")}`, install: true };
  const current = path.join(config.dataDir, "secrets.key");
  if (existsSync(current)) return { text: readFileSync(current, "utf8").trim(), label: current, install: false };
  return null;
}

function installKey(text: string, file: string, stamp: string): void {
  if (existsSync(file)) {
    if (readFileSync(file, "utf8").trim() === text) return;
    renameSync(file, `${file}.before-restore-${stamp}`);
  }
  writeFileSync(file, text + "\n", { mode: 0o600, flag: "wx" });
}

type SqliteConfig = Readonly<Config> & { database: { kind: "sqlite"; file: string } };

function sqliteConfig(): SqliteConfig {
  const config = cliConfig();
  if (config.database.kind !== "sqlite") throw new CliError(POSTGRES_BACKUP);
  if (config.database.file === ":memory:") throw new CliError("an in-memory database has nothing to back up or restore");
  return config as SqliteConfig;
}

type KeySource = { source: "file"; file: string } | { source: "env" } | { source: "none" };

function keyOf(config: Readonly<Config>): KeySource {
  if (config.secretsKey !== null) return { source: "env" };
  const file = path.join(config.dataDir, "secrets.key");
  return existsSync(file) ? { source: "file", file } : { source: "none" };
}

function keyNote(key: KeySource, backup: string): string {
  if (key.source === "file") return `secrets key: ${keyFileOf(backup)} (a copy of ${key.file}); keep it as safe as the backup, which cannot open its secrets without it`;
  if (key.source === "env") return "secrets key: SECRETS_KEY in this environment, not in the backup: keep it with the backup, which cannot open its secrets without it";
  return "secrets key: none yet (no key file beside the database)";
}

/** A key is readable by its owner alone, like the one it copies. */
function copyKey(from: string, to: string): void {
  try {
    writeFileSync(to, readFileSync(from), { mode: 0o600, flag: "wx" });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") throw new CliError(`${to} exists already: name a new backup file`);
    throw err;
  }
}

/** Expected refusals of the database layer as one line. */
function guard<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof BackupError) throw new CliError(err.message);
    if (err instanceof DatabaseInUseError) throw new CliError("a storefront serve is using the database: stop it before restoring (the restore takes its place)");
    throw err;
  }
}
