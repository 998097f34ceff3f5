// The statements the services send through Kysely while a piece of work runs, for tests that count them.
export interface StatementsSent {
  /** The harness's query hook (createHarness's `onQuery`). */
  onQuery(sql: string): void;
  /** The statements sent while `work` runs. */
  during(work: () => Promise<unknown>): Promise<string[]>;
}

export function statementsSent(): StatementsSent {
  let statements: string[] | null = null;
  return {
    onQuery: (sql) => void statements?.push(sql),
    async during(work) {
      statements = [];
      try {
        await work();
        return statements;
      } finally {
        statements = null;
      }
    },
  };
}
