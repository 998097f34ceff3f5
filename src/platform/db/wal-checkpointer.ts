// SQLite's write-ahead log is copied back into the database file by checkpoints. Left to SQLite, the
// connection whose commit takes the log past 1,000 pages runs one inside that commit: a thousand page
// writes and two fsyncs on the main thread, a pause for every request in flight (commits of a payment's
// transaction took 7-10 ms at the 99th percentile, against 0.4-0.9 ms otherwise). Under writes, a thread
// of its own, with its own connection, runs passive checkpoints instead (they never wait on the writer nor
// block it), and the main connection checkpoints only past a far larger log, should that thread fall
// behind. The thread starts at the first durable commit and leaves once the log has been quiet for a while,
// so an idle service holds no thread for it.
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import type SQLite from "better-sqlite3";

/** SQLite's own threshold, pages (the main connection's, while no checkpoint thread runs). */
const DEFAULT_AUTOCHECKPOINT = 1_000;
/**
 * The main connection's threshold while the thread runs: a backstop, not the rule. Under payments the log
 * grows by a few thousand pages a second and is restarted once the thread has copied it and no reader still
 * reads from it, so it reaches about 10,000 pages between restarts: a backstop there made the main connection
 * run a checkpoint inside a payment's commit every few seconds (thousands of page copies and a sync of the
 * database file on the thread that answers webhooks), and each was a pause for every request in flight
 * (bench/README.md, eleventh pass). The log file is left its size (journal_size_limit's cut, an ftruncate
 * on this thread, paused it 20-130 ms each time).
 */
const BACKSTOP_AUTOCHECKPOINT = 100_000;

export interface WalCheckpointerOptions {
  /** How often the thread checkpoints. */
  intervalMs?: number;
  /** How long the thread stays once nothing new reached the log. */
  idleMs?: number;
}

export interface WalCheckpointer {
  /** After a commit: starts the checkpoint thread unless it runs. */
  wake(): void;
  /** Whether the checkpoint thread runs (tests, footprint). */
  readonly running: boolean;
  /** Stops the thread (its connection closed) before the database closes. */
  close(): Promise<void>;
}

/** The thread's code: CommonJS, evaluated (a file of its own would be one more entry of the server's bundle). */
function workerSource(driver: string, file: string, intervalMs: number, idleMs: number): string {
  return `
const { parentPort } = require("node:worker_threads");
const Database = require(${JSON.stringify(driver)});
const db = new Database(${JSON.stringify(file)});
db.pragma("synchronous = NORMAL");
let lastLog = -1;
let quietSince = Date.now();
const stop = () => { clearInterval(timer); db.close(); parentPort.close(); };
const timer = setInterval(() => {
  // [{ busy, log, checkpointed }]: frames in the log, and how many of them are in the database file now.
  const [row] = db.pragma("wal_checkpoint(PASSIVE)");
  if (row.log !== lastLog || row.checkpointed < row.log) quietSince = Date.now();
  lastLog = row.log;
  if (Date.now() - quietSince >= ${idleMs}) stop();
}, ${intervalMs});
parentPort.on("message", stop);
`;
}

export function walCheckpointer(handle: SQLite.Database, file: string, options: WalCheckpointerOptions = {}): WalCheckpointer {
  const intervalMs = options.intervalMs ?? 100;
  const idleMs = options.idleMs ?? 30_000;
  const driver = createRequire(import.meta.url).resolve("better-sqlite3");
  let worker: Worker | null = null;
  let exited: Promise<void> = Promise.resolve();
  let failed = false;
  let closed = false;

  const autocheckpoint = (pages: number) => {
    if (handle.open) handle.pragma(`wal_autocheckpoint = ${pages}`);
  };

  return {
    wake() {
      if (worker !== null || failed || closed) return;
      const started = new Worker(workerSource(driver, file, intervalMs, idleMs), { eval: true, name: "storefront-wal-checkpoints" });
      worker = started;
      autocheckpoint(BACKSTOP_AUTOCHECKPOINT);
      // Not a reason to keep the process alive: a process that exits has its log checkpointed by SQLite.
      started.unref();
      exited = new Promise<void>((resolve) => {
        started.once("error", () => {
          // The main connection checkpoints as SQLite does by default; no new thread is tried.
          failed = true;
        });
        started.once("exit", () => {
          if (worker === started) worker = null;
          autocheckpoint(DEFAULT_AUTOCHECKPOINT);
          resolve();
        });
      });
    },
    get running() {
      return worker !== null;
    },
    async close() {
      closed = true;
      // Held alive until the thread is gone: a command that closes its database last would otherwise end
      // while awaiting this (an unref'd thread does not keep the event loop running).
      worker?.ref();
      worker?.postMessage("stop");
      await exited;
    },
  };
}
