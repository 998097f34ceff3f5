// The webhook benchmark's paced reads (bench/webhook/load.ts, pace) are sent and timed on a thread of their
// own: the runner's main thread, which holds every case's data and drives the closed-loop loads, paused
// for its garbage collections long enough to set the reads' slowest answers. A stream keeps its schedule,
// and every answer is timed, while that thread is held.
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { Worker } from "node:worker_threads";
import { pace } from "../../bench/webhook/load.ts";

// The answering server runs on a thread of its own too, so that holding this one holds only the runner.
const SERVER = `
const http = require("node:http");
const { parentPort } = require("node:worker_threads");
const server = http.createServer((req, res) => { req.resume(); req.on("end", () => res.end("ok")); });
server.listen(0, "127.0.0.1", () => parentPort.postMessage(server.address().port));
`;
const server = new Worker(SERVER, { eval: true });
after(() => server.terminate());

test("a paced stream keeps its schedule and times its answers while the runner's main thread is held", async () => {
  const port = await new Promise<number>((resolve) => server.once("message", resolve));
  const stream = pace({ port, rate: 100, seconds: 0.5, connections: 4, next: () => ({ method: "GET", path: "/", headers: {} }) });
  // Hold this thread for longer than the whole stream takes.
  const until = performance.now() + 2000;
  while (performance.now() < until);
  const releasedAt = performance.now();
  const result = await stream;
  assert.equal(result.answered, 50);
  assert.equal(result.non2xx + result.errors, 0);
  assert.equal(result.latenciesMs?.length, 50);
  assert.ok(result.lastAnswerAt < releasedAt, `the last answer came ${Math.round(result.lastAnswerAt - releasedAt)} ms after the thread was released: the stream waited for it`);
  assert.ok(result.clientDelayMs !== undefined, "the sending thread's own loop delay is reported");
});
