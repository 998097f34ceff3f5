// The list operations' pages, built off the thread that accepts and answers webhooks (decision 0005).
// Reader threads each hold their own database connection and answer with the page's JSON bytes;
// the main thread passes the request in and the bytes out. With no threads (READ_THREADS=0, or an
// in-memory SQLite database that other connections cannot see) the same code runs on the main thread.
import { Worker } from "node:worker_threads";
import type { FastifyReply } from "fastify";
import type { Config } from "../config.ts";
import type { CustomersRepository } from "./customer-documents.ts";
import { AppError } from "../errors.ts";
import type { InvoicesRepository } from "./invoice-documents.ts";
import { type ListQuery, encodeCursor } from "../lib/list-query.ts";
import { pageJson } from "./paging.ts";
import type { PriorityGate } from "./priority-gate.ts";
import type { BuildRequest } from "./projector.batch.ts";
import type { BatchBuilder, BuiltBatch } from "./projector.sqlite.ts";
import { type BuildJob, type ListName, type PageJob, type PageTimes, type ReadJob, type ReadReply, type ReaderInit, wallClockMs } from "./readers.protocol.ts";

const WORKER_URL = new URL("./readers.worker.ts", import.meta.url);

/** A page's bytes, and how to give their memory back once the response that sent them is done. */
export interface PageBytes {
  body: Buffer;
  /**
   * Call when the response is done with `body` (its "close": sent, or the connection gone). The bytes may
   * sit in memory shared with a reader thread, which writes another page there once released: never
   * before the socket is done with them.
   */
  release(): void;
}

/**
 * Sends a list page. The bytes may be memory shared with the reader thread: given back once the response is
 * done with them ("close" comes after the last byte is handed to the socket, or when the connection is
 * gone; a client that reset the connection while the page was built has had its "close" already). The
 * serializer passes the bytes through: Fastify sends a Buffer over shared memory as it does any Buffer, but
 * would otherwise take it for an object to serialize with the response schema.
 */
export function sendPage(reply: FastifyReply, page: PageBytes): FastifyReply {
  if (reply.raw.closed) page.release();
  else reply.raw.once("close", page.release);
  return reply.type("application/json; charset=utf-8").serializer(passBytes).send(page.body);
}

const passBytes = (bytes: unknown): string => bytes as string;

export interface ReadsService {
  /** The page as the list operations send it, as UTF-8 bytes. */
  page(list: ListName, storeId: string, q: ListQuery): Promise<PageBytes>;
  /** Reader threads running (0 when pages are built on this thread). */
  readonly threads: number;
  /**
   * SQLite: builds a batch of the read model's stale documents on a thread of its own, for the projector
   * to write; null when there are no reader threads (the projector builds on the main thread).
   */
  readonly builder: BatchBuilder | null;
  /** Shared page slots holding a page whose response is not done yet. */
  slotsInUse(): number;
  close(): Promise<void>;
}

/**
 * Where a list page's time went (storefront_read_page_seconds): `held` by the payments-first gate, before
 * its queries and before it is written; `queued`, posted and not yet taken up by a reader thread (the thread
 * busy with other pages, or waiting for a core); `built`, its queries and JSON on the reader thread (on the
 * main thread when there are none); `returned`, built and not yet taken back by the main thread (busy with
 * other work, or waiting for a core).
 */
export type PageStage = "held" | "queued" | "built" | "returned";
export type PageTimer = (stage: PageStage, seconds: number) => void;

export interface ReadsDeps {
  database: Config["database"];
  threads: number;
  /** Nice value of the reader threads (Linux). */
  nice: number;
  repos: { customers: CustomersRepository; invoices: InvoicesRepository };
  /** Finished pages wait here while a payment webhook is in flight (bounded), ... */
  gate: PriorityGate;
  /**
   * ... when at least this many pages are in flight, the waiting one included (1: any page): a few pages
   * cost the main thread little (see createReadsService).
   */
  holdFrom: number;
  /** Told each page's time stage by stage. */
  timer?: PageTimer;
}

export function createReadsService(deps: ReadsDeps): ReadsService {
  const inMemory = deps.database.kind === "sqlite" && deps.database.file === ":memory:";
  const timer = deps.timer ?? (() => {});
  /** Pages asked for and not yet returned. */
  let inFlight = 0;
  /**
   * Waits for the payments-first gate, when reads are many enough to matter to payments; the milliseconds
   * waited. The gate is for a flood of reads (bench/isolation: 16 readers flat out), whose pages, written
   * out one after another, would take the main thread from the webhooks. A lone page beside payments takes
   * it for a fraction of a millisecond; held, it waited up to the bound twice (before its queries and
   * before its write) whenever the thread had been busy, and the pages let go together when the payment
   * left met the next one: on PostgreSQL at 100 payments/s, not holding them gave the reads a lower median
   * and the payments a shorter tail (bench/README.md, thirty-fourth pass).
   */
  const hold = async (): Promise<number> => {
    if (inFlight < deps.holdFrom) return 0;
    const from = performance.now();
    await deps.gate.whenIdle();
    return performance.now() - from;
  };
  const counted =
    (page: ReadsService["page"]): ReadsService["page"] =>
    async (list, storeId, q) => {
      inFlight++;
      try {
        return await page(list, storeId, q);
      } finally {
        inFlight--;
      }
    };
  if (deps.threads === 0 || inMemory) {
    return {
      threads: 0,
      builder: null,
      page: counted(async (list, storeId, q) => {
        const from = performance.now();
        const body = pageJson(list, await deps.repos[list].listPage(storeId, q), q.limit, encodeCursor);
        timer("built", seconds(performance.now() - from));
        // A built page is written out only when no payment webhook is in flight (or after a bounded wait).
        timer("held", seconds(await hold()));
        return { body, release: NO_RELEASE };
      }),
      slotsInUse: () => 0,
      close: async () => {},
    };
  }
  const pool = new ReaderPool({ database: deps.database, nice: deps.nice }, deps.threads, "storefront-reader");
  // The projector's batches on a thread of their own (started by the first one), so a page never waits
  // behind the build of a customer of thousands of invoices.
  const builders = deps.database.kind === "sqlite" ? new ReaderPool({ database: deps.database, nice: deps.nice }, 1, "storefront-projector") : null;
  return {
    threads: deps.threads,
    builder: builders === null ? null : (requests) => builders.build(requests),
    // Also started only when no payment is in flight (while reads pour in): the page's queries would compete
    // with the webhook's for the database (on PostgreSQL, server processes whose priority the client cannot lower).
    page: counted(async (list, storeId, q) => {
      let heldMs = await hold();
      const page = await pool.page({ list, storeId, query: q }, timer);
      // Written out only when no payment webhook is in flight (or after a bounded wait).
      heldMs += await hold();
      timer("held", seconds(heldMs));
      return page;
    }),
    slotsInUse: () => pool.slotsInUse(),
    close: async () => {
      await pool.close();
      await builders?.close();
    },
  };
}

interface Pending {
  resolve: (reply: Extract<ReadReply, { ok: true }>) => void;
  reject: (err: Error) => void;
}

interface Reader {
  worker: Worker;
  pending: Map<number, Pending>;
  slots: SharedArrayBuffer;
  slotStates: Int32Array;
}

/** Shared page slots per reader thread: 16 of 1 MiB (a page of 500 customers is ~1.3 MB and goes the old way). */
const SLOT_SIZE = 1 << 20;
const SLOT_COUNT = 16;
const NO_RELEASE = () => {};

/**
 * A fixed set of reader threads, started by the first page (an idle service holds none: each is an isolate
 * and a database connection); each request goes to the one with the fewest pages in hand.
 */
class ReaderPool {
  private readonly readers: Reader[] = [];
  private readonly init: Pick<ReaderInit, "database" | "nice">;
  private readonly size: number;
  private readonly name: string;
  private nextId = 0;
  private closing = false;

  constructor(init: Pick<ReaderInit, "database" | "nice">, size: number, name: string) {
    this.init = init;
    this.size = size;
    this.name = name;
  }

  /** A list page, built by the reader with the fewest jobs in hand; `timer` is told its stages on the way. */
  async page(job: Omit<PageJob, "id" | "postedAt">, timer: PageTimer): Promise<PageBytes> {
    const postedAt = wallClockMs();
    const { reader, reply } = await this.run({ ...job, postedAt });
    if ("startedAt" in reply) timeStages(timer, postedAt, reply, wallClockMs());
    if ("json" in reply) return { body: Buffer.from(reply.json.buffer, reply.json.byteOffset, reply.json.byteLength), release: NO_RELEASE };
    if ("slot" in reply) return { body: Buffer.from(reader.slots, reply.slot * SLOT_SIZE, reply.length), release: releaseOnce(reader.slotStates, reply.slot) };
    throw new Error("reader thread: a page job was answered with something else");
  }

  /** A projector pass's batches of the read model's stale documents (one per table asked for), built likewise. */
  async build(requests: BuildRequest[]): Promise<BuiltBatch[]> {
    const { reply } = await this.run({ build: requests });
    if ("built" in reply) return reply.built;
    throw new Error("reader thread: a build job was answered with something else");
  }

  private run(job: Omit<PageJob, "id"> | Omit<BuildJob, "id">): Promise<{ reader: Reader; reply: Extract<ReadReply, { ok: true }> }> {
    if (this.closing) return Promise.reject(new AppError("service_unavailable", "The service is shutting down"));
    while (this.readers.length < this.size) this.readers.push(this.spawn());
    let reader = this.readers[0]!;
    for (const r of this.readers) if (r.pending.size < reader.pending.size) reader = r;
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      reader.pending.set(id, { resolve: (reply) => resolve({ reader, reply }), reject });
      if (reader.pending.size === 1) reader.worker.ref();
      reader.worker.postMessage({ ...job, id } satisfies ReadJob);
    });
  }

  slotsInUse(): number {
    let n = 0;
    for (const r of this.readers) for (let i = 0; i < SLOT_COUNT; i++) n += Atomics.load(r.slotStates, i);
    return n;
  }

  async close(): Promise<void> {
    this.closing = true;
    await Promise.all(this.readers.map((r) => r.worker.terminate()));
  }

  private spawn(): Reader {
    const slots = new SharedArrayBuffer(SLOT_SIZE * SLOT_COUNT);
    const states = new SharedArrayBuffer(4 * SLOT_COUNT);
    const workerData: ReaderInit = { ...this.init, slots, slotStates: states, slotSize: SLOT_SIZE, slotCount: SLOT_COUNT };
    const worker = new Worker(WORKER_URL, { workerData, name: this.name });
    // An idle reader does not keep the process alive; one with pages in hand does.
    worker.unref();
    const reader: Reader = { worker, pending: new Map(), slots, slotStates: new Int32Array(states) };
    worker.on("message", (reply: ReadReply) => {
      if ("ready" in reply) return;
      const p = reader.pending.get(reply.id);
      if (!p) {
        // Nobody waits for this page any more: its slot is free at once.
        if (reply.ok && "slot" in reply) Atomics.store(reader.slotStates, reply.slot, 0);
        return;
      }
      reader.pending.delete(reply.id);
      if (reader.pending.size === 0) worker.unref();
      if (!reply.ok) p.reject(toError(reply.error));
      else p.resolve(reply);
    });
    const fail = (why: string) => {
      const index = this.readers.indexOf(reader);
      for (const p of reader.pending.values()) p.reject(new Error(`reader thread: ${why}`));
      reader.pending.clear();
      // A reader that died is replaced, unless the pool is closing.
      if (index >= 0 && !this.closing) this.readers[index] = this.spawn();
    };
    worker.on("error", (err) => fail(err.message));
    worker.on("exit", (code) => fail(`exited with code ${code}`));
    return reader;
  }
}

/** A page's stages between the threads, from its times (on wallClockMs's clock, shared by the threads). */
function timeStages(timer: PageTimer, postedAt: number, times: PageTimes, takenBackAt: number): void {
  timer("queued", seconds(times.startedAt - postedAt));
  timer("built", seconds(times.doneAt - times.startedAt));
  timer("returned", seconds(takenBackAt - times.doneAt));
}

/** Milliseconds as seconds, never below 0 (two threads' readings of the shared clock may differ by a hair). */
const seconds = (ms: number): number => Math.max(0, ms) / 1000;

function toError(e: Extract<ReadReply, { ok: false }>["error"]): Error {
  if (e.expected) return new AppError(e.code, e.message, e.param === undefined ? {} : { param: e.param });
  const err = new Error(e.message) as Error & { code?: string };
  if (e.dbCode !== undefined) err.code = e.dbCode;
  return err;
}

/** Frees a shared slot for its reader to write another page into; a second call does nothing. */
function releaseOnce(states: Int32Array, slot: number): () => void {
  let released = false;
  return () => {
    if (released) return;
    released = true;
    Atomics.store(states, slot, 0);
  };
}
