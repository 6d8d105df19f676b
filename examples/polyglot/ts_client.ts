// An echo client in AssemblyScript: sends args[1] greetings, checks each
// echo, says bye.
import { Portal, check, describe } from "../../sdk/assemblyscript/warden";

const args = process.argv;
const n = args.length > 1 ? I32.parseInt(args[1]) : 3;
const echo = Portal.lookup("echo", -1);
check(echo.handle);
for (let i = 0; i < n; i++) {
  const msg = Uint8Array.wrap(String.UTF8.encode("assemblyscript says hello #" + i.toString()));
  const r = echo.call(msg);
  if (r < 0) abort(describe(r));
  const got = echo.lastReply(r);
  let same = got.length == msg.length;
  for (let j = 0; same && j < msg.length; j++) same = got[j] == msg[j];
  if (!same) abort("bad echo");
}
echo.call(Uint8Array.wrap(String.UTF8.encode("bye")));
process.stdout.write("assemblyscript: " + n.toString() + " echoes checked\n");
