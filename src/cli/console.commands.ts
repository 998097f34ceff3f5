// `storefront console users add|list|remove`: the console's logins. A login sees only the stores it is
// given. The password is read from standard input (piped) or asked for without echo (a terminal), so it
// never appears in the shell's history or the process list.
import { createInterface } from "node:readline";
import type { Command } from "commander";
import { MIN_PASSWORD_LENGTH } from "../console/console.service.ts";
import { CliError, emit, emitList, type JsonOption, withServices } from "./context.ts";

const collect = (value: string, previous: string[]) => [...previous, value];

export function registerConsoleCommands(program: Command): void {
  const consoleCommand = program.command("console").description("the merchant console (/console)");
  const users = consoleCommand.command("users").description("console logins (e-mail and password, limited to some stores)");
  users
    .command("add <email>")
    .description(`create a login that sees the given stores; the password (at least ${MIN_PASSWORD_LENGTH} characters) comes from standard input or a prompt`)
    .requiredOption("--store <storeId>", "a store the login may see (repeatable)", collect, [])
    .addHelpText("after", "\nExamples:\n  storefront console users add ann@example.com --store st_…\n  printf '%s\\n' \"$PASSWORD\" | storefront console users add ann@example.com --store st_… --store st_…\n")
    .action(async (email: string, opts: JsonOption & { store: string[] }) => {
      const password = await readPassword();
      await withServices(async (s) => {
        const user = await s.console.addUser(email, password, opts.store);
        emit(opts, user, (u) => process.stdout.write(`created console login ${u.email} for ${u.stores.join(", ")}\n`));
      });
    });
  users
    .command("list")
    .description("list the console logins and their stores")
    .action(async (opts: JsonOption) => {
      await withServices(async (s) => emitList(opts, await s.console.listUsers(), ["email", "stores", "createdAt"]));
    });
  users
    .command("remove <email>")
    .description("remove a login; its sessions end at once")
    .action(async (email: string, opts: JsonOption) => {
      await withServices(async (s) => {
        await s.console.removeUser(email);
        emit(opts, { email, removed: true }, () => process.stdout.write(`removed console login ${email}\n`));
      });
    });
}

/** The first line of standard input, or a prompt without echo on a terminal. */
async function readPassword(): Promise<string> {
  if (!process.stdin.isTTY) {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    const line = Buffer.concat(chunks).toString("utf8").split(/\r?\n/)[0] ?? "";
    if (line === "") throw new CliError("no password on standard input: pipe it in (printf '%s\\n' \"$PASSWORD\" | …) or run in a terminal to be asked");
    return line;
  }
  const ask = async (prompt: string) => {
    const rl = createInterface({ input: process.stdin, output: process.stdout, terminal: true });
    // Echo nothing of what is typed after the prompt.
    const output = rl as unknown as { _writeToOutput: (s: string) => void };
    let prompted = false;
    output._writeToOutput = (s: string) => {
      if (!prompted) {
        process.stdout.write(s);
        prompted = true;
      }
    };
    try {
      return await new Promise<string>((resolve) => rl.question(prompt, resolve));
    } finally {
      rl.close();
      process.stdout.write("\n");
    }
  };
  const first = await ask("Password: ");
  const again = await ask("Again: ");
  if (first !== again) throw new CliError("the two passwords differ");
  return first;
}
