// The webhook benchmark's watch on the read model's gauges during a payment round (bench/webhook/probes.ts,
// watchReadModel). The catch-up is timed after the watch stops, so stopping must not wait out the watch's
// interval between two samples: it did, and up to 500 ms of that wait were counted as catch-up.
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, test } from "node:test";
import { watchReadModel } from "../../bench/webhook/probes.ts";

let scrapes = 0;
const metrics = http.createServer((_req, res) => {
  scrapes++;
  res.end(`# TYPE storefront_readmodel_backlog gauge\nstorefront_other 1\nstorefront_readmodel_backlog{table="invoice_views"} ${scrapes === 1 ? 7 : 0}\n`);
});
await new Promise<void>((resolve) => metrics.listen(0, "127.0.0.1", resolve));
after(() => metrics.close());

test("stopping the watch ends its wait between samples and keeps the largest backlog seen", { timeout: 10_000 }, async () => {
  const port = (metrics.address() as AddressInfo).port;
  // An interval longer than the test's timeout: a stop that waits it out fails the test.
  const watch = watchReadModel(port, 60 * 60 * 1000);
  while (scrapes === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  const seen = await watch.stop();
  assert.deepEqual(seen, { maxBacklog: 7, maxLagSeconds: null });
  assert.equal(scrapes, 1);
});
