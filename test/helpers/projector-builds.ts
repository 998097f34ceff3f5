// The batches a harness's projector builds on its reader thread, watched by the tests of the read model.
import assert from "node:assert/strict";
import type { BatchBuilder, BuiltBatch } from "../../src/readmodel/projector.sqlite.ts";
import type { Harness } from "./harness.ts";

/** Every batch the service's projector builds on its thread from now on, and the tables each job asked for, until `restore`. */
export function watchBuilds(h: Harness): { built: BuiltBatch[]; jobs: string[][]; restore: () => void } {
  const reads = h.services.reads as { builder: BatchBuilder | null };
  const original = reads.builder;
  assert.ok(original !== null, "a thread builds the batches");
  const built: BuiltBatch[] = [];
  const jobs: string[][] = [];
  reads.builder = async (requests) => {
    jobs.push(requests.map((r) => r.views));
    const batches = await original(requests);
    built.push(...batches);
    return batches;
  };
  return { built, jobs, restore: () => void (reads.builder = original) };
}
