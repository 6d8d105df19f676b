// A JavaScript client of the example store (componentize-js): a command
// component importing example:kv/store, bound to the server task by the
// manifest. Every value it passes is copied into the server's memory and
// every answer back into its own; it checks each one and prints
// "javascript: N checks passed" (or what failed, and fails its run).
import { set, get, take, entries } from "example:kv/store@0.1.0";

const ME = "javascript/";

function checks() {
  const failed = [];
  const check = (what, ok) => ok || failed.push(what);
  check("set a new key", set(ME + "greeting", "hello from JavaScript") === true);
  check("set it again", set(ME + "greeting", "héllo, wörld ✓") === false);
  check("get it back", get(ME + "greeting") === "héllo, wörld ✓");
  check("get a missing key", get(ME + "nothing") === undefined);
  const big = "y".repeat(20000);
  set(ME + "big", big);
  check("a 20 kB value round trip", get(ME + "big") === big);
  const pad = (i) => String(i).padStart(2, "0");
  for (let i = 0; i < 50; i++) set(`${ME}n${pad(i)}`, String(i * i));
  const listed = entries(ME + "n");
  check("50 entries, in order",
    listed.map((e) => e.key).join() === [...Array(50).keys()].map((i) => `${ME}n${pad(i)}`).join());
  check("their values",
    listed.map((e) => e.value).join() === [...Array(50).keys()].map((i) => String(i * i)).join());
  check("take a key", take(ME + "n07") === "49");
  try {
    take(ME + "n07");
    check("take it twice", false);
  } catch (e) {
    check("take it twice: missing", e.payload === "missing");
  }
  check("gone after take", get(ME + "n07") === undefined);
  check("49 left", entries(ME + "n").length === 49);
  return failed;
}

export const run = {
  run() {
    const failed = checks();
    if (failed.length) {
      console.log(`javascript: checks FAILED: ${failed.join(", ")}`);
      throw new Error("checks failed");
    }
    console.log("javascript: 12 checks passed");
  },
};
