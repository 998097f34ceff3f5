// Entry of one reader thread: its own database connection (SQLite under WAL lets readers run beside the
// writer; PostgreSQL a small pool of its own), the list repositories, and a loop that answers each page
// request with the page's JSON, ready to send. The main thread only checks the key and writes the bytes.
// On SQLite the same entry, started once more as the projector's thread, builds the read model's stale
// documents for the projector, which writes them.
import { readlinkSync } from "node:fs";
import os from "node:os";
import { parentPort, workerData } from "node:worker_threads";
import { openDatabase } from "../platform/db/database.ts";
import { createCustomersRepository } from "./customer-documents.ts";
import { AppError } from "../errors.ts";
import { createInvoicesRepository } from "./invoice-documents.ts";
import { buildBatch } from "./projector.sqlite.ts";
import { encodeCursor } from "../lib/list-query.ts";
import { type PagePiece, concatPieces, pageParts, writePieces } from "./paging.ts";
import { type ReadJob, type ReadReply, type ReaderInit, wallClockMs } from "./readers.protocol.ts";

const init = workerData as ReaderInit;

/**
 * Reader threads run at a lower scheduling priority than the process's other threads (Linux: nice is per
 * thread), READ_THREADS_NICE steps (5 by default) below the main thread's, at most 19: so when the cores
 * are busy the thread that answers webhooks and the sandbox's threads run first and the pages wait: reads
 * yield to payments. Five steps (CFS weights 1024 against 335: a reader gets about a quarter of a core a
 * busy thread shares with it) rather than ten (a tenth): at ten, a page read during a burst of payments
 * waited behind every step of them (its p99 twice that of reads alone at 100 payments/s), while five keeps
 * webhooks under a flood of reads within bench/isolation's targets (bench/README.md, "sixth pass").
 * Relative, so that a service started under `nice` (or systemd's Nice=) keeps its readers below its own
 * main thread. Elsewhere this is skipped.
 */
try {
  const tid = Number(readlinkSync("/proc/thread-self").split("/").pop());
  // On Linux the process id is the main thread's id, and getpriority reads that one thread's nice.
  const lower = Math.min(19, os.getPriority(process.pid) + init.nice);
  if (Number.isSafeInteger(tid) && tid > 0) os.setPriority(tid, Math.max(os.getPriority(tid), lower));
} catch {
  // not Linux, or not allowed: the reader runs at the process's priority
}

const port = parentPort!;
// One PostgreSQL connection per reader: pages queue on it, one server process working on them in turn,
// rather than several busy server processes that the webhook's queries would have to share the cores
// with. Its statements go through postgres.js (OpenOptions.bytes): the documents stay bytes, and the next
// page's query is already sent while this thread copies the last one's rows (pipelining).
const db = openDatabase(init.database, { poolSize: 1, genericPlans: true, bytes: true });
// This connection only reads; a write from here would be a bug.
db.sqlite?.pragma("query_only = ON");
const repos = { customers: createCustomersRepository(db), invoices: createInvoicesRepository(db) };

port.on("message", (job: ReadJob) => {
  void answer(job);
});
port.postMessage({ id: -1, ok: true, ready: true } satisfies ReadReply);

const slotStates = new Int32Array(init.slotStates);
const slotBuffers = Array.from({ length: init.slotCount }, (_, i) => Buffer.from(init.slots, i * init.slotSize, init.slotSize));

/** Writes the page into a free shared slot and returns its number, or null (too large, or none free). */
function intoSlot(parts: readonly PagePiece[]): { slot: number; length: number } | null {
  for (let slot = 0; slot < init.slotCount; slot++) {
    // Taken atomically: the main thread frees a slot (stores 0) when the response that sent it is done.
    if (Atomics.compareExchange(slotStates, slot, 0, 1) !== 0) continue;
    const length = writePieces(parts, slotBuffers[slot]!);
    if (length !== null) return { slot, length };
    // Larger than a slot: this one is free again, and the page goes the other way.
    Atomics.store(slotStates, slot, 0);
    return null;
  }
  return null;
}

/** Bytes that are the whole of their memory (not a view of Buffer's shared pool, which must not be moved). */
const ownsItsMemory = (bytes: Uint8Array) => bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;

async function answer(job: ReadJob): Promise<void> {
  const startedAt = wallClockMs();
  let reply: Exclude<ReadReply, { ready: true }>;
  try {
    if ("build" in job) {
      const built = await buildBatch(db.kysely, job.build);
      // A patched document's bytes have their own memory (customer-patch.ts) and move without a copy.
      const moved = built.flatMap((b) => b.bodies).flatMap(([, body]) => (typeof body !== "string" && ownsItsMemory(body) ? [body.buffer as ArrayBuffer] : []));
      port.postMessage({ id: job.id, ok: true, built } satisfies ReadReply, moved);
      return;
    }
    const page = await repos[job.list].listPage(job.storeId, job.query);
    const parts = pageParts(job.list, page, job.query.limit, encodeCursor);
    const shared = intoSlot(parts);
    const bytes = shared ?? { json: concatPieces(parts) };
    reply = { id: job.id, ok: true, ...bytes, startedAt, doneAt: wallClockMs() };
  } catch (err) {
    const expected = err instanceof AppError;
    reply = {
      id: job.id,
      ok: false,
      error: {
        expected,
        code: expected ? err.code : "internal_error",
        message: err instanceof Error ? err.message : String(err),
        ...(expected && err.param !== undefined ? { param: err.param } : {}),
        ...(typeof (err as { code?: unknown }).code === "string" ? { dbCode: (err as { code: string }).code } : {}),
      },
    };
  }
  // A large page's bytes have their own memory and move to the main thread without a copy; a small one
  // may sit in Buffer's shared pool, which must not be moved, and is copied.
  const json = "json" in reply ? reply.json : null;
  port.postMessage(reply, json !== null && ownsItsMemory(json) ? [json.buffer as ArrayBuffer] : []);
}
