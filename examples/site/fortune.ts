// A WAGI handler in AssemblyScript: a fortune for the visitor, chosen by
// the query string (?n=3) or by the clock.
const FORTUNES: string[] = [
  "A task that is killed returns everything it held.",
  "Copy semantics: what you sent is no longer yours to change.",
  "The budget you were given is the budget you have.",
  "Every call across a protection boundary is a capability used.",
  "A servlet remembers; a per-request handler forgets.",
];

const env = process.env;
const query = env.has("QUERY_STRING") ? env.get("QUERY_STRING") : "";
let n = <i32>(process.time() % FORTUNES.length);
if (query.startsWith("n=")) {
  n = I32.parseInt(query.substring(2)) % FORTUNES.length;
  if (n < 0) n = 0;
}
const method = env.has("REQUEST_METHOD") ? env.get("REQUEST_METHOD") : "?";
process.stdout.write("Content-Type: text/plain; charset=utf-8\r\nX-Handler: assemblyscript\r\n\r\n");
process.stdout.write(FORTUNES[n] + "\n");
process.stdout.write("(fortune " + n.toString() + ", " + method + ", from AssemblyScript)\n");
