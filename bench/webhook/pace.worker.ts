// One open-loop stream at a fixed rate (load.ts's `pace`), on a thread of its own. The runner's main thread
// holds every case's data (a heap of hundreds of megabytes) and drives the closed-loop loads: its garbage
// collections paused it for 5–15 ms, a dozen times in a 10 s round, more often beside a burst generated in
// the same heap (twenty-ninth to thirty-first passes: the paced reads' slowest answers were partly the
// client's own pauses). Here the stream's requests, latencies and sockets sit in a small heap of their own,
// and the thread's event-loop delay is measured beside them, so a round says whether its client kept time.
import http from "node:http";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { parentPort, workerData } from "node:worker_threads";
import type { PacedStream, PacedResult, Request } from "./load.ts";
import { loopLateness } from "./protocol.ts";

const stream = workerData as PacedStream;
const agent = new http.Agent({ keepAlive: true, maxSockets: stream.connections });
const latencies: number[] = [];
const counts = { answered: 0, non2xx: 0, errors: 0 };
let lastAnswerAt = performance.now();

function one(request: Request): Promise<void> {
  return new Promise<void>((resolve) => {
    const sent = performance.now();
    const req = http.request({ host: "127.0.0.1", port: stream.port, method: request.method, path: request.path, headers: request.headers, agent }, (res) => {
      res.resume();
      res.on("end", () => {
        lastAnswerAt = performance.now();
        counts.answered++;
        if (res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300) latencies.push(lastAnswerAt - sent);
        else counts.non2xx++;
        resolve();
      });
    });
    req.on("error", () => {
      counts.errors++;
      resolve();
    });
    req.end(request.body);
  });
}

const LOOP_TIMER_MS = 1;
const delay = monitorEventLoopDelay({ resolution: LOOP_TIMER_MS });
delay.enable();
const started = performance.now();
const interval = 1000 / stream.rate;
const pending: Promise<void>[] = [];
// The runner built one request per slot of the round: each goes out at its slot's time.
for (const [i, request] of stream.requests.entries()) {
  const wait = started + i * interval - performance.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  pending.push(one(request));
}
await Promise.all(pending);
delay.disable();
agent.destroy();
const result: PacedResult = {
  ...counts,
  seconds: (performance.now() - started) / 1000,
  // performance.now() counts from each thread's own start: the runner gets the moment on the shared clock.
  lastAnswerAtEpochMs: performance.timeOrigin + lastAnswerAt,
  latenciesMs: latencies.sort((a, b) => a - b),
  clientDelayMs: loopLateness(delay, LOOP_TIMER_MS),
};
parentPort!.postMessage(result);
