// What the isolation benchmark's processes tell each other.
export const SIGNING_SECRET = "whsec_isolation_bench_secret";

export interface IsolationServerReady {
  port: number;
  storeId: string;
  key: string;
  readThreads: number;
}
