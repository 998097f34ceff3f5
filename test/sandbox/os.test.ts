// os.time, os.date and os.difftime against native Lua 5.4 on a UTC machine (glibc, C locale): every
// expected value below was printed by the stock `lua5.4` interpreter with TZ=UTC. And the run's
// clock (RunInput.clockMs), which a replay uses to keep the original delivery's time.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createSandbox, type Sandbox } from "../../src/sandbox/index.ts";
import { evaluate, expectError, host, input, run } from "./helpers.ts";

// The server's own time zone must not matter: this file runs in a process set to New York time.
process.env.TZ = "America/New_York";

let sandbox: Sandbox;
before(() => {
  sandbox = createSandbox({ poolSize: 1 });
});
after(() => sandbox.close());

const lua = (expression: string) => evaluate(sandbox, expression);

/** Every conversion Lua 5.4 accepts (a sample of the E and O ones), local and "!" UTC, at times native Lua printed. */
const FORMAT = "%a|%A|%b|%B|%c|%C|%d|%D|%e|%F|%g|%G|%h|%H|%I|%j|%m|%M|%n|%p|%r|%R|%S|%t|%T|%u|%U|%V|%w|%W|%x|%X|%y|%Y|%z|%Z|%%|%Ec|%EY|%Od|%OV";
const NATIVE_DATES: [number, string, string][] = [
  [0, "Thu|Thursday|Jan|January|Thu Jan  1 00:00:00 1970|19|01|01/01/70| 1|1970-01-01|70|1970|Jan|00|12|001|01|00|\n|AM|12:00:00 AM|00:00|00|\t|00:00:00|4|00|01|4|00|01/01/70|00:00:00|70|1970|+0000|UTC|%|Thu Jan  1 00:00:00 1970|1970|01|01", "Thu|Thursday|Jan|January|Thu Jan  1 00:00:00 1970|19|01|01/01/70| 1|1970-01-01|70|1970|Jan|00|12|001|01|00|\n|AM|12:00:00 AM|00:00|00|\t|00:00:00|4|00|01|4|00|01/01/70|00:00:00|70|1970|+0000|GMT|%|Thu Jan  1 00:00:00 1970|1970|01|01"],
  [951829261, "Tue|Tuesday|Feb|February|Tue Feb 29 13:01:01 2000|20|29|02/29/00|29|2000-02-29|00|2000|Feb|13|01|060|02|01|\n|PM|01:01:01 PM|13:01|01|\t|13:01:01|2|09|09|2|09|02/29/00|13:01:01|00|2000|+0000|UTC|%|Tue Feb 29 13:01:01 2000|2000|29|09", "Tue|Tuesday|Feb|February|Tue Feb 29 13:01:01 2000|20|29|02/29/00|29|2000-02-29|00|2000|Feb|13|01|060|02|01|\n|PM|01:01:01 PM|13:01|01|\t|13:01:01|2|09|09|2|09|02/29/00|13:01:01|00|2000|+0000|GMT|%|Tue Feb 29 13:01:01 2000|2000|29|09"],
  [1700000000, "Tue|Tuesday|Nov|November|Tue Nov 14 22:13:20 2023|20|14|11/14/23|14|2023-11-14|23|2023|Nov|22|10|318|11|13|\n|PM|10:13:20 PM|22:13|20|\t|22:13:20|2|46|46|2|46|11/14/23|22:13:20|23|2023|+0000|UTC|%|Tue Nov 14 22:13:20 2023|2023|14|46", "Tue|Tuesday|Nov|November|Tue Nov 14 22:13:20 2023|20|14|11/14/23|14|2023-11-14|23|2023|Nov|22|10|318|11|13|\n|PM|10:13:20 PM|22:13|20|\t|22:13:20|2|46|46|2|46|11/14/23|22:13:20|23|2023|+0000|GMT|%|Tue Nov 14 22:13:20 2023|2023|14|46"],
  [4102444800, "Fri|Friday|Jan|January|Fri Jan  1 00:00:00 2100|21|01|01/01/00| 1|2100-01-01|99|2099|Jan|00|12|001|01|00|\n|AM|12:00:00 AM|00:00|00|\t|00:00:00|5|00|53|5|00|01/01/00|00:00:00|00|2100|+0000|UTC|%|Fri Jan  1 00:00:00 2100|2100|01|53", "Fri|Friday|Jan|January|Fri Jan  1 00:00:00 2100|21|01|01/01/00| 1|2100-01-01|99|2099|Jan|00|12|001|01|00|\n|AM|12:00:00 AM|00:00|00|\t|00:00:00|5|00|53|5|00|01/01/00|00:00:00|00|2100|+0000|GMT|%|Fri Jan  1 00:00:00 2100|2100|01|53"],
  [-31536000, "Wed|Wednesday|Jan|January|Wed Jan  1 00:00:00 1969|19|01|01/01/69| 1|1969-01-01|69|1969|Jan|00|12|001|01|00|\n|AM|12:00:00 AM|00:00|00|\t|00:00:00|3|00|01|3|00|01/01/69|00:00:00|69|1969|+0000|UTC|%|Wed Jan  1 00:00:00 1969|1969|01|01", "Wed|Wednesday|Jan|January|Wed Jan  1 00:00:00 1969|19|01|01/01/69| 1|1969-01-01|69|1969|Jan|00|12|001|01|00|\n|AM|12:00:00 AM|00:00|00|\t|00:00:00|3|00|01|3|00|01/01/69|00:00:00|69|1969|+0000|GMT|%|Wed Jan  1 00:00:00 1969|1969|01|01"],
  [-62193092400, "Sun|Sunday|Mar|March|Sun Mar  7 13:00:00 -1|-1|07|03/07/99| 7|-1-03-07|99|-1|Mar|13|01|066|03|00|\n|PM|01:00:00 PM|13:00|00|\t|13:00:00|7|10|09|0|09|03/07/99|13:00:00|99|-1|+0000|UTC|%|Sun Mar  7 13:00:00 -1|-1|07|09", "Sun|Sunday|Mar|March|Sun Mar  7 13:00:00 -1|-1|07|03/07/99| 7|-1-03-07|99|-1|Mar|13|01|066|03|00|\n|PM|01:00:00 PM|13:00|00|\t|13:00:00|7|10|09|0|09|03/07/99|13:00:00|99|-1|+0000|GMT|%|Sun Mar  7 13:00:00 -1|-1|07|09"],
  [1609459199, "Thu|Thursday|Dec|December|Thu Dec 31 23:59:59 2020|20|31|12/31/20|31|2020-12-31|20|2020|Dec|23|11|366|12|59|\n|PM|11:59:59 PM|23:59|59|\t|23:59:59|4|52|53|4|52|12/31/20|23:59:59|20|2020|+0000|UTC|%|Thu Dec 31 23:59:59 2020|2020|31|53", "Thu|Thursday|Dec|December|Thu Dec 31 23:59:59 2020|20|31|12/31/20|31|2020-12-31|20|2020|Dec|23|11|366|12|59|\n|PM|11:59:59 PM|23:59|59|\t|23:59:59|4|52|53|4|52|12/31/20|23:59:59|20|2020|+0000|GMT|%|Thu Dec 31 23:59:59 2020|2020|31|53"],
];

describe("os.date", () => {
  test("every conversion gives what native Lua 5.4 gives in UTC (%c pads the day with a space, %Z is UTC or GMT)", async () => {
    const script = `local out = {}
for _, t in ipairs({ ${NATIVE_DATES.map(([t]) => t).join(", ")} }) do
  out[#out + 1] = os.date(${JSON.stringify(FORMAT)}, t)
  out[#out + 1] = os.date(${JSON.stringify("!" + FORMAT)}, t)
end
return { status = "ignore", invoiceId = table.concat(out, "\\0") }`;
    const outcome = await run(sandbox, script);
    assert.ok(outcome.ok, JSON.stringify(outcome));
    assert.deepEqual(outcome.result.invoiceId?.split("\0"), NATIVE_DATES.flatMap(([, local, utc]) => [local, utc]));
  });

  test("local time is UTC whatever the server's zone", async () => {
    assert.equal(new Date(0).getHours(), 19); // this process's zone is New York
    assert.equal(await lua(`os.date("%H:%M %Z", 0) .. " " .. os.time({ year = 1970, month = 1, day = 1, hour = 0 })`), "00:00 UTC 0");
  });

  test("*t and !*t tables, the default %c format, a number as format", async () => {
    assert.equal(
      await lua(`(function() local t = os.date("*t", 1577836800) return table.concat({ t.year, t.month, t.day, t.hour, t.min, t.sec, t.wday, t.yday, tostring(t.isdst) }, ",") end)()`),
      "2020,1,1,0,0,0,4,1,false",
    );
    assert.equal(await lua(`os.date("!*t", 951829261).yday`), "60");
    assert.equal(await lua(`os.date(nil, 0) .. "|" .. os.date(5, 0)`), "Thu Jan  1 00:00:00 1970|5");
  });

  test("bad formats and times raise native Lua's messages, naming the function as the call did", async () => {
    expectError(await run(sandbox, `os.date("%Q", 0)`), "script_error", /^\[plugin\]:1: bad argument #1 to 'date' \(invalid conversion specifier '%Q'\)$/);
    expectError(await run(sandbox, `os.date("%Y %", 0)`), "script_error", /invalid conversion specifier '%'\)$/);
    expectError(await run(sandbox, `os.date("%5dx", 0)`), "script_error", /invalid conversion specifier '%5dx'\)$/);
    expectError(await run(sandbox, `os.date("%Y", 1.5)`), "script_error", /bad argument #2 to 'date' \(number has no integer representation\)$/);
    expectError(await run(sandbox, `os.date({}, 0)`), "script_error", /bad argument #1 to 'date' \(string expected, got table\)$/);
    expectError(await run(sandbox, `os.date("!%Y", 67768036191676800)`), "script_error", /date result cannot be represented in this installation$/);
    assert.equal(await lua(`os.date("!%Y", "1e3") .. os.date("!%Y", -67768040609740800)`), "1970-2147481748");
    assert.equal(await lua(`select(2, pcall(os.date, "%Q"))`), "bad argument #1 to 'os.date' (invalid conversion specifier '%Q')");
    assert.equal(await lua(`select(2, pcall(string.rep))`), "bad argument #1 to 'string.rep' (string expected, got no value)");
  });
});

describe("os.time", () => {
  test("a date table is read as UTC, normalised like mktime, and updated in place", async () => {
    assert.equal(await lua(`os.time({ year = 2020, month = 1, day = 1, hour = 0 })`), "1577836800");
    assert.equal(await lua(`os.time({ year = 2020, month = 1, day = 1 })`), "1577880000"); // hour defaults to 12
    assert.equal(await lua(`os.time({ year = 2020, month = 13, day = 32, hour = -1, min = 61, sec = -5 })`), "1612137655");
    assert.equal(await lua(`os.time({ year = 2020, month = 1.0, day = "2", hour = "3.0", min = " 4 ", sec = "0x10" })`), "1577934256");
    assert.equal(
      await lua(`(function() local t = { year = 2021, month = 2, day = 30 } os.time(t) return table.concat({ t.year, t.month, t.day, t.hour, t.min, t.sec, t.wday, t.yday, tostring(t.isdst) }, ",") end)()`),
      "2021,3,2,12,0,0,3,61,false",
    );
    // glibc's mktime takes an hour off a time said to be in daylight saving time, even in UTC.
    assert.equal(await lua(`(function() local t = { year = 2020, month = 1, day = 1, hour = 0, isdst = true } return os.time(t) .. " " .. t.year .. "-" .. t.month .. "-" .. t.day .. " " .. t.hour end)()`), "1577833200 2019-12-31 23");
    assert.equal(await lua(`os.time({ year = 1, month = 1, day = 1, hour = 0 }) .. " " .. os.time({ year = -2147481748, month = 1, day = 1, hour = 0 })`), "-62135596800 -67768040609740800");
  });

  test("missing, non-integer and out-of-range fields raise native Lua's messages", async () => {
    expectError(await run(sandbox, `os.time({ year = 2020 })`), "script_error", /^\[plugin\]:1: field 'month' missing in date table$/);
    expectError(await run(sandbox, `os.time({ year = 2020, month = 1, day = 1.5 })`), "script_error", /field 'day' is not an integer$/);
    expectError(await run(sandbox, `os.time({ year = 2020, month = 1, day = "x" })`), "script_error", /field 'day' is not an integer$/);
    expectError(await run(sandbox, `os.time({ year = 2^40, month = 1, day = 1 })`), "script_error", /field 'year' is out-of-bound$/);
    expectError(await run(sandbox, `os.time({ year = 2020, month = 1, day = 1, hour = 2^31 })`), "script_error", /field 'hour' is out-of-bound$/);
    expectError(await run(sandbox, `os.time({ year = 2147485547, month = 13, day = 1 })`), "script_error", /time result cannot be represented in this installation$/);
    expectError(await run(sandbox, `os.time(5)`), "script_error", /bad argument #1 to 'time' \(table expected, got number\)$/);
  });
});

describe("os.difftime", () => {
  test("returns t2 - t1 as a float, as Lua 5.4 does (the usual tolerance check works)", async () => {
    assert.equal(await lua(`os.difftime(10, 3) .. " " .. math.type(os.difftime(5, 2)) .. " " .. os.difftime(1, 2) .. " " .. os.difftime("10", 0)`), "7.0 float -1.0 10.0");
    assert.equal(await lua(`os.difftime(os.time(), os.time() - 600) > 300`), "true");
  });

  test("both arguments are required integers", async () => {
    expectError(await run(sandbox, `os.difftime(10)`), "script_error", /^\[plugin\]:1: bad argument #2 to 'difftime' \(number expected, got no value\)$/);
    expectError(await run(sandbox, `os.difftime(nil, 1)`), "script_error", /bad argument #1 to 'difftime' \(number expected, got nil\)$/);
    expectError(await run(sandbox, `os.difftime(10.5, 0)`), "script_error", /bad argument #1 to 'difftime' \(number has no integer representation\)$/);
    expectError(await run(sandbox, `os.difftime("x", 0)`), "script_error", /bad argument #1 to 'difftime' \(number expected, got string\)$/);
  });
});

describe("the run's clock (clockMs)", () => {
  const CLOCK_SCRIPT = `return { status = "ignore", invoiceId = table.concat({ os.time(), os.date("!%Y"), os.date("%Y-%m-%d %H:%M:%S"), os.date("*t").year, os.date("!%Y", 0), math.type(os.clock()) }, "|") }`;

  test("a run given 2020-01-01 sees os.time() == 1577836800 and os.date() in 2020; explicit times and os.clock are unaffected", async () => {
    const outcome = await sandbox.run({ ...input(CLOCK_SCRIPT), clockMs: Date.UTC(2020, 0, 1) + 999 }, host);
    assert.ok(outcome.ok, JSON.stringify(outcome));
    assert.equal(outcome.result.invoiceId, "1577836800|2020|2020-01-01 00:00:00|2020|1970|float");
  });

  test("the clock belongs to its run: the next run without one reads the real time", async () => {
    await sandbox.run({ ...input(CLOCK_SCRIPT), clockMs: 0 }, host);
    const before = Math.floor(Date.now() / 1000);
    const outcome = await sandbox.run(input(CLOCK_SCRIPT), host);
    const after = Math.floor(Date.now() / 1000);
    assert.ok(outcome.ok, JSON.stringify(outcome));
    const now = Number(outcome.result.invoiceId?.split("|")[0]);
    assert.ok(now >= before && now <= after, `os.time() ${now} not within ${before}..${after}`);
  });

  test("a timestamped signature recorded at the clock's time is fresh, the same check without the clock is stale", async () => {
    const check = `if os.difftime(os.time(), 1577836800) > 300 then reject("stale timestamp") end return { status = "ignore" }`;
    const replayed = await sandbox.run({ ...input(check), clockMs: Date.UTC(2020, 0, 1, 0, 1) }, host);
    assert.deepEqual(replayed.ok && replayed.result, { status: "ignore" });
    expectError(await sandbox.run(input(check), host), "rejected", /^stale timestamp$/);
  });

  test("a clock that is not epoch milliseconds is refused as invalid run input", async () => {
    expectError(await sandbox.run({ ...input(CLOCK_SCRIPT), clockMs: Number.NaN }, host), "killed", /invalid run input: clockMs/);
    expectError(await sandbox.run({ ...input(CLOCK_SCRIPT), clockMs: 1e300 }, host), "killed", /invalid run input: clockMs/);
  });
});
