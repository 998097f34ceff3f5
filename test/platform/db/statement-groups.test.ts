// The queue that lets requests ready together share a statement (statement-groups.ts): what is asked in
// one turn of the event loop goes as one group, groups are cut at their size, no more groups are out at
// once than allowed (the requests ready meanwhile form the next one), and a group that failed as a whole is
// heard by each of its requests.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type Queued, statementGroups } from "../../../src/platform/db/statement-groups.ts";

/** A send that records each group and answers each request with its input doubled, once `release` is called. */
function recording() {
  const groups: number[][] = [];
  const held: (() => void)[] = [];
  let out = 0;
  let mostOut = 0;
  const send = (group: Queued<number, number>[]) => {
    groups.push(group.map((q) => q.input));
    out++;
    mostOut = Math.max(mostOut, out);
    return new Promise<void>((resolve) =>
      held.push(() => {
        out--;
        for (const q of group) q.resolve(q.input * 2);
        resolve();
      }),
    );
  };
  /** Answers every group sent, those sent after the first answers included, until none comes for a few turns. */
  const releaseAll = async () => {
    for (let quiet = 0; quiet < 5; ) {
      const next = held.shift();
      if (next === undefined) quiet++;
      else {
        quiet = 0;
        next();
      }
      await new Promise((res) => setImmediate(res));
    }
  };
  return { send, groups, releaseAll, mostOut: () => mostOut };
}

describe("statement groups", () => {
  test("the requests made in one turn go as one group, each answered with its own result", async () => {
    const r = recording();
    const ask = statementGroups(r.send, { maxGroup: 64, maxInFlight: 1 });
    const answers = Promise.all([1, 2, 3, 4].map(ask));
    await new Promise((res) => setImmediate(res));
    await r.releaseAll();
    assert.deepEqual(await answers, [2, 4, 6, 8]);
    assert.deepEqual(r.groups, [[1, 2, 3, 4]]);
  });

  test("the requests made while the allowed groups are out wait and go together as the next group", async () => {
    const r = recording();
    const ask = statementGroups(r.send, { maxGroup: 64, maxInFlight: 1 });
    const first = ask(1);
    await new Promise((res) => setImmediate(res));
    const later = [2, 3, 4].map(ask);
    await new Promise((res) => setImmediate(res));
    assert.deepEqual(r.groups, [[1]], "nothing more is sent while the first group is out");
    await r.releaseAll();
    assert.deepEqual(await Promise.all([first, ...later]), [2, 4, 6, 8]);
    assert.deepEqual(r.groups, [[1], [2, 3, 4]]);
    assert.equal(r.mostOut(), 1);
  });

  test("groups are cut at their size, and as many go at once as allowed", async () => {
    const r = recording();
    const ask = statementGroups(r.send, { maxGroup: 2, maxInFlight: 2 });
    const answers = Promise.all([1, 2, 3, 4, 5].map(ask));
    await new Promise((res) => setImmediate(res));
    assert.deepEqual(r.groups, [[1, 2], [3, 4]], "two groups of two out at once, the fifth waits");
    await r.releaseAll();
    assert.deepEqual(await answers, [2, 4, 6, 8, 10]);
    assert.deepEqual(r.groups, [[1, 2], [3, 4], [5]]);
    assert.equal(r.mostOut(), 2);
  });

  test("a group whose send failed is heard by each of its requests, and the next group still goes", async () => {
    let calls = 0;
    const ask = statementGroups<number, number>(
      async (group) => {
        calls++;
        if (calls === 1) throw new Error("connection lost");
        for (const q of group) q.resolve(q.input);
      },
      { maxGroup: 64, maxInFlight: 1 },
    );
    const failed = await Promise.all([1, 2].map((n) => ask(n).catch((err: Error) => err.message)));
    assert.deepEqual(failed, ["connection lost", "connection lost"]);
    assert.equal(await ask(3), 3);
  });
});
