// The process tree of a running service, read from /proc (Linux): which processes, their resident memory
// and threads. The footprint benchmark sums the service's own processes: the one that serves and anything it
// starts, npm and its `sh -c` wrapper aside.
import { readdirSync, readFileSync } from "node:fs";

export interface ProcInfo {
  pid: number;
  ppid: number;
  /** The command name (`node`, `sh`, `esbuild`, …). */
  comm: string;
  /** Resident set, kB (VmRSS). */
  rssKb: number;
  threads: number;
  /** Thread names (`MainThread`, `storefront-read`, `storefront-sand`, `V8Worker`, …). */
  threadNames: string[];
}

function read(pid: number): ProcInfo | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? 0);
    const comm = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
    const threadNames = readdirSync(`/proc/${pid}/task`).map((tid) => {
      try {
        return readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim();
      } catch {
        return "?";
      }
    });
    return { pid, ppid, comm, rssKb: field("VmRSS"), threads: field("Threads"), threadNames };
  } catch {
    return null; // gone meanwhile
  }
}

/** Every process below `root`, parents before children. */
export function descendants(root: number): ProcInfo[] {
  const byParent = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      byParent.set(ppid, [...(byParent.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  const out: ProcInfo[] = [];
  const walk = (pid: number) => {
    for (const child of byParent.get(pid) ?? []) {
      const info = read(child);
      if (info) out.push(info);
      walk(child);
    }
  };
  walk(root);
  return out;
}

export interface TreeFootprint {
  /** The service's processes: the server and what it started (npm's `sh -c` wrapper left out). */
  processes: ProcInfo[];
  rssMb: number;
  /** Processes the server started (esbuild's service, …). */
  children: number;
}

/** The service's part of npm's tree: everything below npm but a shell wrapper (`self`: the root is the server). */
export function serviceFootprint(npmPid: number, self = false): TreeFootprint {
  const root = self ? read(npmPid) : null;
  const processes = [...(root ? [root] : []), ...descendants(npmPid)].filter((p) => p.comm !== "sh");
  // The server is the topmost of them (Node names its main thread, and so the process, "MainThread").
  const pids = new Set(processes.map((p) => p.pid));
  const server = processes.find((p) => !pids.has(p.ppid));
  const children = server ? processes.filter((p) => p.ppid === server.pid).length : 0;
  return { processes, rssMb: round1(processes.reduce((sum, p) => sum + p.rssKb, 0) / 1024), children };
}

/** CPU time a process has used so far (all its threads, user and system), ms. */
export function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // utime and stime are fields 14 and 15 of the line, in clock ticks (100 per second on Linux).
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

export function round1(n: number): number {
  return Math.round(n * 10) / 10;
}
