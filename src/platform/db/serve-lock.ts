// One `serve` per SQLite file. The embedded database is for one service process (several processes are
// PostgreSQL's job: docs/deploy.md), so a second `serve` on the same file is refused before it touches
// anything. The lock is SQLite's own: an exclusive transaction on a small file beside the database, held
// for as long as `serve` runs. The operating system drops it when the process ends, however it ends (a
// crash or SIGKILL leaves no stale lock). Commands (`stores list`, `seed`, …) do not take it and run beside
// the server as before. The file stays in place: deleting it could let two processes lock two files.
import { mkdirSync } from "node:fs";
import path from "node:path";
import SQLite from "better-sqlite3";

export class DatabaseInUseError extends Error {
  constructor(file: string) {
    super(
      `another storefront serve is using the SQLite database ${file}: one serve per SQLite file (commands may run beside it); ` +
        "stop the other one first, or use PostgreSQL to run several processes (docs/deploy.md)",
    );
    this.name = "DatabaseInUseError";
  }
}

export interface ServeLock {
  release(): void;
}

/** Takes the lock of the SQLite database `file` for this process, or throws DatabaseInUseError. */
export function holdServeLock(file: string): ServeLock {
  if (file === ":memory:") return { release: () => {} };
  mkdirSync(path.dirname(path.resolve(file)), { recursive: true }); // a first start creates the database's directory
  const lock = new SQLite(`${file}.lock`, { timeout: 0 });
  try {
    lock.exec("BEGIN EXCLUSIVE");
  } catch (err) {
    lock.close();
    if ((err as { code?: unknown }).code === "SQLITE_BUSY") throw new DatabaseInUseError(file);
    throw err;
  }
  return {
    release: () => {
      if (lock.open) lock.close(); // closing ends the transaction and drops the lock
    },
  };
}
