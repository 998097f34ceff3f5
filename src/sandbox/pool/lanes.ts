// The pool's waiting room: one queue per store (a lane), served in turn (round robin), so one store's
// flood of runs waits behind its own runs, not in front of another store's. Compile checks have a lane
// of their own (CHECK_LANE). The pool decides who may queue and which worker may take a job; this keeps
// the lanes and whose turn it is.
import type { Pending } from "./jobs.ts";

/** One store's waiting jobs, oldest first. */
export interface Lane {
  key: string;
  queue: Pending[];
}

export class Lanes {
  /** Lanes with waiting jobs, by key, and the same lanes in turn order; `turn` is the next to serve. */
  private readonly byKey = new Map<string, Lane>();
  private readonly ring: Lane[] = [];
  private turn = 0;

  /** No job waits in any lane. */
  get empty(): boolean {
    return this.ring.length === 0;
  }

  /** The lane of `key`; a new one takes its turn after every lane that has jobs waiting. */
  lane(key: string): Lane {
    let lane = this.byKey.get(key);
    if (!lane) {
      lane = { key, queue: [] };
      this.byKey.set(key, lane);
      this.ring.push(lane);
    }
    return lane;
  }

  /** A job taken back had its turn already: it goes first in its lane, and that lane is served next, so reclaims cannot skip a store. */
  putFront(lane: Lane, pending: Pending): void {
    lane.queue.unshift(pending);
    this.turn = this.ring.indexOf(lane);
  }

  /** Takes a job out of its lane if it still waits there. */
  remove(pending: Pending): boolean {
    const lane = this.byKey.get(pending.key);
    const at = lane ? lane.queue.indexOf(pending) : -1;
    if (!lane || at < 0) return false;
    lane.queue.splice(at, 1);
    if (lane.queue.length === 0) this.drop(lane);
    return true;
  }

  drop(lane: Lane): void {
    if (this.byKey.get(lane.key) === lane) this.byKey.delete(lane.key);
    const at = this.ring.indexOf(lane);
    if (at < 0) return;
    this.ring.splice(at, 1);
    if (at < this.turn) this.turn--;
  }

  /**
   * Gives waiting jobs to workers, one lane at a time in turn: each lane's oldest job goes to the worker
   * `slotFor` picks for its store (none: the lane waits), then the turn passes to the next lane. Stops
   * when no worker has room (`anyRoom`) or no lane can be served.
   */
  serve<S>(anyRoom: () => boolean, slotFor: (key: string) => S | null, give: (slot: S, pending: Pending) => void): void {
    let passed = 0; // lanes in a row that could not be served
    while (this.ring.length > 0 && passed < this.ring.length) {
      if (!anyRoom()) return;
      if (this.turn >= this.ring.length) this.turn = 0;
      const lane = this.ring[this.turn]!;
      const slot = slotFor(lane.key);
      if (slot === null) {
        this.turn++;
        passed++;
        continue;
      }
      passed = 0;
      const pending = lane.queue.shift()!;
      if (lane.queue.length === 0) this.drop(lane); // the next lane moves into this turn
      else this.turn++;
      give(slot, pending);
    }
  }

  /** Empties every lane (the pool closes): the jobs that waited, lane by lane in turn order. */
  drain(): Pending[] {
    const waiting = this.ring.splice(0).flatMap((lane) => lane.queue.splice(0));
    this.byKey.clear();
    return waiting;
  }
}
