// The readers of the isolation benchmark, in a process of their own so their load does not delay the
// webhook client's clock: autocannon with N connections on GET …/customers?limit=100, newest pages first
// and then deeper ones (each connection follows nextCursor for a few pages, as a sync job would).
//   (forked by run.ts) node bench/isolation/readers.ts --url http://127.0.0.1:PORT --key KEY --connections 16 --duration 12
import { parseArgs } from "node:util";
import autocannon from "autocannon";

const { values: args } = parseArgs({
  options: { url: { type: "string" }, key: { type: "string" }, connections: { type: "string", default: "16" }, duration: { type: "string", default: "12" } },
});

export interface ReadersResult {
  requests: number;
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
}

const result = await autocannon({
  url: `${args.url}/api/service/customers?limit=100`,
  connections: Number(args.connections),
  duration: Number(args.duration),
  headers: { authorization: args.key! },
  timeout: 60,
});
const out: ReadersResult = {
  requests: result.requests.total,
  rps: result.requests.average,
  p50: result.latency.p50,
  p99: result.latency.p99,
  non2xx: result.non2xx + result.errors + result.timeouts,
};
process.send!(out);
process.disconnect();
