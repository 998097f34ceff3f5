// A worker thread's own CPU clock, read from /proc/self/task/<tid>/schedstat (nanoseconds on the CPU),
// Linux only. The pool opens it when a worker says it is ready (with its thread id) and reads it while
// that worker runs a job, to hold the run to its CPU budget from outside the thread. Where there is no
// such file the pool has no clock and judges the budget on wall time instead.
import { closeSync, openSync, readSync } from "node:fs";

export class CpuClock {
  private readonly fd: number;
  private readonly buf = Buffer.alloc(96);

  private constructor(fd: number) {
    this.fd = fd;
  }

  /** The clock of thread `tid`, or null when there is none to read. */
  static open(tid: number | null): CpuClock | null {
    if (tid === null || !Number.isInteger(tid)) return null;
    try {
      return new CpuClock(openSync(`/proc/self/task/${tid}/schedstat`, "r"));
    } catch {
      return null;
    }
  }

  /** Nanoseconds the thread has spent on a CPU, or null when the file cannot be read. */
  readNs(): number | null {
    try {
      const n = readSync(this.fd, this.buf, 0, this.buf.length, 0);
      const text = this.buf.toString("latin1", 0, n);
      const ns = Number(text.slice(0, text.indexOf(" ")));
      return Number.isFinite(ns) ? ns : null;
    } catch {
      return null;
    }
  }

  close(): void {
    closeSync(this.fd);
  }
}
