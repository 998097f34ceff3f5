// Backups of the embedded SQLite database, taken while the service runs, and putting one back.
//
// A copy of the file with `cp` misses what is still in the write-ahead log (the payment just answered).
// `VACUUM INTO` reads the database as one transaction sees it, log included, and writes a compact copy
// that is a whole database on its own; in WAL mode it holds up no writer, and unlike the page-by-page
// backup API it never starts over when the service commits meanwhile. The copy is written beside its
// destination, synced, and renamed into place, so a backup file is either complete or absent.
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, statSync, copyFileSync } from "node:fs";
import path from "node:path";
import SQLite from "better-sqlite3";

/** A backup or restore that cannot go ahead, with what to do; nothing was changed. */
export class BackupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BackupError";
  }
}

/** Copies the live database `source` to `dest` (which must not exist yet); returns its size in bytes. */
export function backupSqlite(source: string, dest: string): number {
  if (!existsSync(source)) throw new BackupError(`there is no SQLite database at ${source} (DATABASE_URL)`);
  if (existsSync(dest)) throw new BackupError(`${dest} exists already: name a new file (backups are never overwritten)`);
  mkdirSync(path.dirname(path.resolve(dest)), { recursive: true });
  const partial = `${dest}.partial-${process.pid}`;
  rmSync(partial, { force: true });
  const db = new SQLite(source, { readonly: true, fileMustExist: true, timeout: 5000 });
  try {
    db.prepare("VACUUM INTO ?").run(partial);
  } catch (err) {
    rmSync(partial, { force: true });
    throw err;
  } finally {
    db.close();
  }
  syncFile(partial);
  if (existsSync(dest)) {
    rmSync(partial, { force: true });
    throw new BackupError(`${dest} appeared while the backup was written: name a new file`);
  }
  renameSync(partial, dest);
  syncDirectory(dest);
  return statSync(dest).size;
}

export interface SqliteInspection {
  /** What `PRAGMA integrity_check` found wrong (empty: the file is sound). */
  problems: string[];
  /** The migrations recorded in the file's `kysely_migration` (null: not a storefront database). */
  migrations: string[] | null;
}

/** Opens `file` read-only and checks it: SQLite's integrity check, and which migrations it holds. */
export function inspectSqlite(file: string): SqliteInspection {
  if (!existsSync(file)) throw new BackupError(`there is no file ${file}`);
  let db: SQLite.Database;
  try {
    db = new SQLite(file, { readonly: true, fileMustExist: true });
  } catch (err) {
    throw new BackupError(`${file} cannot be opened as an SQLite database: ${(err as Error).message}`);
  }
  try {
    const rows = db.pragma("integrity_check") as { integrity_check: string }[];
    const problems = rows.map((r) => r.integrity_check).filter((line) => line !== "ok");
    const table = db.prepare("select name from sqlite_master where type = 'table' and name = 'kysely_migration'").get();
    const migrations = table === undefined ? null : (db.prepare("select name from kysely_migration order by name").pluck().all() as string[]);
    return { problems, migrations };
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === "SQLITE_NOTADB" || code === "SQLITE_CORRUPT") return { problems: [`${String(code)}: ${(err as Error).message}`], migrations: null };
    throw err;
  } finally {
    db.close();
  }
}

/** A copy of the backup beside the database it will replace, to be checked (and migrated) before it is put in place. */
export function stageRestore(backup: string, target: string): string {
  mkdirSync(path.dirname(path.resolve(target)), { recursive: true });
  const incoming = `${target}.restoring-${process.pid}`;
  discardStaged(incoming);
  copyFileSync(backup, incoming);
  return incoming;
}

/** Removes a staged copy that will not be put in place (a check only, or a check that failed). */
export function discardStaged(incoming: string): void {
  for (const suffix of ["", "-wal", "-shm", "-journal"]) rmSync(incoming + suffix, { force: true });
}

/**
 * Puts the staged copy in place of the database `target`. The database there (with its write-ahead log) is
 * moved aside, never deleted, and returned so the operator can go back; null when there was none.
 */
export function installRestore(incoming: string, target: string, stamp: string): string | null {
  syncFile(incoming);
  let aside: string | null = null;
  if (existsSync(target)) {
    aside = `${target}.before-restore-${stamp}`;
    // The log and shared-memory files belong to the database being replaced: they go with it.
    for (const suffix of ["-wal", "-shm"]) if (existsSync(target + suffix)) renameSync(target + suffix, aside + suffix);
    renameSync(target, aside);
  } else {
    for (const suffix of ["-wal", "-shm"]) rmSync(target + suffix, { force: true });
  }
  renameSync(incoming, target);
  syncDirectory(target);
  return aside;
}

function syncFile(file: string): void {
  const fd = openSync(file, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** The rename itself on disk: its directory synced. */
function syncDirectory(file: string): void {
  const fd = openSync(path.dirname(path.resolve(file)), "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
