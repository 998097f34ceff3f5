// Statements shared by the requests ready together. Each request waits in a queue; after the current turn
// of the event loop (so every request made ready by this turn's I/O joins), the waiting ones are sent as
// one group, up to `maxGroup`, by `send`, which settles each of them. While `maxInFlight` groups are out,
// the requests that become ready wait for one to come back and go as the next group: the busier the
// service, the larger the groups, and a request alone goes at once.
//
// PostgreSQL spends far more on a statement (a round trip, planning, opening tables and indexes, a commit)
// than on its rows, so one statement of a dozen payments costs the server a fraction of a dozen statements
// (bench/README.md, "twelfth pass").

/** A request waiting for its group: `send` settles it. */
export interface Queued<I, O> {
  input: I;
  resolve(output: O): void;
  reject(err: unknown): void;
}

export interface GroupOptions {
  /** Requests in one group at most. */
  maxGroup: number;
  /** Groups out at once; the requests ready meanwhile wait for one to come back. */
  maxInFlight: number;
}

/** Sends each request of a group on its own, each settled with its own outcome (a group the server refused). */
export async function eachAlone<I, O>(group: readonly Queued<I, O>[], single: (input: I) => Promise<O>): Promise<void> {
  await Promise.all(group.map((q) => single(q.input).then(q.resolve, q.reject)));
}

/** A function that sends its input in the next group, and resolves with what `send` gave it. */
export function statementGroups<I, O>(send: (group: Queued<I, O>[]) => Promise<void>, options: GroupOptions): (input: I) => Promise<O> {
  const waiting: Queued<I, O>[] = [];
  let inFlight = 0;
  let scheduled = false;

  function kick(): void {
    if (scheduled || inFlight >= options.maxInFlight || waiting.length === 0) return;
    scheduled = true;
    // After this turn's I/O callbacks: every request that became ready in this turn joins the group.
    setImmediate(() => {
      scheduled = false;
      while (inFlight < options.maxInFlight && waiting.length > 0) {
        const group = waiting.splice(0, options.maxGroup);
        inFlight++;
        send(group)
          // `send` settles every request it was given; one that threw leaves them to hear why.
          .catch((err: unknown) => {
            for (const q of group) q.reject(err);
          })
          .finally(() => {
            inFlight--;
            kick();
          });
      }
    });
  }

  return (input) =>
    new Promise<O>((resolve, reject) => {
      waiting.push({ input, resolve, reject });
      kick();
    });
}
