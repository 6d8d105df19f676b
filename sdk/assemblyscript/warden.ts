// AssemblyScript bindings for Warden guests: import what you need,
//
//   import { Portal, WardenError } from "../../sdk/assemblyscript/warden";
//
// and build with the WASI shim (scripts/build-examples shows how). Kernel
// errors are negative codes, as in sdk/c/warden.h; AssemblyScript has no
// exceptions to catch, so the functions return the code, or abort with
// its description where a value is expected (see `check`).

@external("warden", "close")
declare function __close(h: i32): i32;
@external("warden", "service_create")
declare function __service_create(): i32;
@external("warden", "portal_create")
declare function __portal_create(service: i32): i32;
@external("warden", "call")
declare function __call(portal: i32, req: usize, reqLen: u32, reqH: usize, reqNh: u32,
  resp: usize, respCap: u32, respH: usize, respNh: usize): i64;
@external("warden", "call_fast")
declare function __call_fast(portal: i32, req: usize, reqLen: u32, reqH: usize, reqNh: u32,
  resp: usize, respCap: u32, respH: usize, respNh: usize): i64;
@external("warden", "recv")
declare function __recv(service: i32, callId: usize, buf: usize, cap: u32, h: usize, nh: usize): i64;
@external("warden", "reply")
declare function __reply(callId: u64, resp: usize, len: u32, h: usize, nh: u32): i32;
@external("warden", "name_register")
declare function __name_register(name: usize, len: u32, portal: i32): i32;
@external("warden", "name_lookup")
declare function __name_lookup(name: usize, len: u32, timeoutNs: i64): i32;

@external("warden", "device_open")
declare function __device_open(name: usize, len: u32): i32;
@external("warden", "device_info")
declare function __device_info(dev: i32, info: usize): i32;
@external("warden", "device_read")
declare function __device_read(dev: i32, sector: u64, count: u32, buf: usize, cap: u32): i64;
@external("warden", "device_write")
declare function __device_write(dev: i32, sector: u64, count: u32, buf: usize, len: u32): i64;
@external("warden", "device_sync")
declare function __device_sync(dev: i32): i32;

/** Bytes a receive or a call's reply takes at most by default. */
export const DEFAULT_CAPACITY: i32 = 64 * 1024;
const EAGAIN: i64 = -15;

/** What a negative code means (the text of warden_strerror). */
export function describe(code: i64): string {
  switch (<i32>code) {
    case -1: return "bad handle";
    case -2: return "revoked";
    case -3: return "peer died";
    case -4: return "no clients";
    case -5: return "denied";
    case -6: return "quota exceeded";
    case -7: return "out of memory";
    case -8: return "bad pointer";
    case -9: return "timed out";
    case -10: return "invalid argument";
    case -11: return "already exists";
    case -12: return "would deadlock";
    case -13: return "out of range";
    case -14: return "no reply";
    case -16: return "busy";
    case -17: return "I/O error";
    case -18: return "not supported";
    default: return code >= 0 ? "success" : "unknown error";
  }
}

/** A capability to call a service. `handle` is negative (a code) if the lookup failed. */
export class Portal {
  private reply: Uint8Array = new Uint8Array(DEFAULT_CAPACITY);
  private count: Uint32Array = new Uint32Array(1);
  constructor(public handle: i32) {}

  /** The portal registered under `name`, waiting up to timeoutNs (negative: for ever). */
  static lookup(name: string, timeoutNs: i64): Portal {
    const n = String.UTF8.encode(name);
    return new Portal(__name_lookup(changetype<usize>(n), <u32>n.byteLength, timeoutNs));
  }

  /**
   * Calls the service: the reply's length, or a negative code (-6, quota,
   * for a reply longer than DEFAULT_CAPACITY). The reply is `lastReply(len)`.
   */
  call(request: Uint8Array): i64 {
    const req = request.dataStart, len = <u32>request.length;
    const resp = this.reply.dataStart, cap = <u32>this.reply.length;
    const nh = this.count.dataStart;
    this.count[0] = 0;
    let r = __call_fast(this.handle, req, len, 0, 0, resp, cap, 0, nh);
    if (r == EAGAIN) r = __call(this.handle, req, len, 0, 0, resp, cap, 0, nh);
    // A reply longer than the buffer arrived cut short: refuse it.
    return r > <i64>cap ? -6 : r;
  }

  /** The first `len` bytes of the last reply. */
  lastReply(len: i64): Uint8Array {
    return this.reply.slice(0, <i32>len);
  }

  close(): void {
    __close(this.handle);
  }
}

/** A received call. */
export class Request {
  constructor(public id: u64, public data: Uint8Array) {}

  /** Answers the call: 0 or a negative code. */
  reply(response: Uint8Array): i32 {
    return __reply(this.id, response.dataStart, <u32>response.length, 0, 0);
  }
}

/** A service this task serves. */
export class Service {
  private buffer: Uint8Array = new Uint8Array(DEFAULT_CAPACITY);
  private id: Uint64Array = new Uint64Array(1);
  private count: Uint32Array = new Uint32Array(1);
  constructor(public handle: i32) {}

  static create(): Service {
    return new Service(check(__service_create()));
  }

  /** Publishes a portal to the service under `name`: 0 or a negative code. */
  register(name: string): i32 {
    const portal = __portal_create(this.handle);
    if (portal < 0) return portal;
    const n = String.UTF8.encode(name);
    const r = __name_register(changetype<usize>(n), <u32>n.byteLength, portal);
    __close(portal);
    return r;
  }

  /** The next call; aborts with the code's description if none can come. */
  receive(): Request {
    this.count[0] = 0;
    const r = __recv(this.handle, this.id.dataStart, this.buffer.dataStart,
      <u32>this.buffer.length, 0, this.count.dataStart);
    check(<i32>r);
    const n = r < <i64>this.buffer.length ? <i32>r : this.buffer.length;
    return new Request(this.id[0], this.buffer.slice(0, n));
  }
}

/** `code` if it is not an error; else aborts the task with its description. */
export function check(code: i32): i32 {
  if (code < 0) abort(describe(code));
  return code;
}

/** Bytes in a block device's sector. */
export const SECTOR: i32 = 512;

/**
 * A block device the manifest grants this task ([[device]], and
 * devices = [...] on the task): whole sectors read and written, one holder
 * at a time (see sdk/c/warden.h). `handle` is negative (a code: -5
 * denied, -16 busy) if the open failed.
 */
export class Device {
  private info: Uint64Array = new Uint64Array(2);
  constructor(public handle: i32) {}

  static open(name: string): Device {
    const n = String.UTF8.encode(name);
    return new Device(__device_open(changetype<usize>(n), <u32>n.byteLength));
  }

  /** The device's size in sectors, or a negative code. */
  sectors(): i64 {
    const r = __device_info(this.handle, this.info.dataStart);
    return r < 0 ? <i64>r : <i64>this.info[1];
  }

  /** Fills `buf` (whole sectors, at most 1 MiB) from sector `sector` on: the bytes read, or a negative code. */
  read(sector: u64, buf: Uint8Array): i64 {
    if (buf.length % SECTOR != 0) return -10;
    return __device_read(this.handle, sector, <u32>(buf.length / SECTOR), buf.dataStart, <u32>buf.length);
  }

  /** Writes `data` (whole sectors, at most 1 MiB) from sector `sector` on: the bytes written, or a negative code. */
  write(sector: u64, data: Uint8Array): i64 {
    if (data.length % SECTOR != 0) return -10;
    return __device_write(this.handle, sector, <u32>(data.length / SECTOR), data.dataStart, <u32>data.length);
  }

  /** Flushes what was written to the host's storage (fdatasync): 0 or a negative code. */
  sync(): i32 {
    return __device_sync(this.handle);
  }

  close(): void {
    __close(this.handle);
  }
}

@external("warden", "module_lookup")
declare function __module_lookup(name: usize, len: u32): i32;
@external("warden", "task_kill")
declare function __task_kill(task: i32): i32;
@external("warden", "supervisor_create")
declare function __supervisor_create(spec: usize): i32;
@external("warden", "supervisor_spawn")
declare function __supervisor_spawn(sup: i32, restart: i32, module: i32, argv: usize, argc: u32,
  budget: usize, grant: usize, ngrant: u32): i32;
@external("warden", "supervisor_wait")
declare function __supervisor_wait(sup: i32, timeoutNs: i64, event: usize): i32;
@external("warden", "supervisor_child")
declare function __supervisor_child(sup: i32, member: i32): i32;

/** Supervisor strategies and restart policies (as in sdk/c/warden.h). */
export const ONE_FOR_ONE: u32 = 0;
export const ONE_FOR_ALL: u32 = 1;
export const REST_FOR_ONE: u32 = 2;
export const PERMANENT: i32 = 0;
export const TRANSIENT: i32 = 1;
export const TEMPORARY: i32 = 2;
/** Report kinds of Supervisor.wait. */
export const RESTARTED: i32 = 1;
export const ENDED: i32 = 2;
export const GAVE_UP: i32 = 3;

/** What Supervisor.wait reports: kind, member, the run's status, restarts. */
export class SupervisorEvent {
  constructor(public kind: i32, public member: i32, public status: i32, public restarts: u32) {}
}

/**
 * A supervisor of this task's children (see sdk/c/warden.h): restarts are
 * made, and paid for, in this task's `wait`. `handle` is negative (a
 * code) if it could not be made.
 */
export class Supervisor {
  private event: Int32Array = new Int32Array(4);
  constructor(public handle: i32) {}

  static create(strategy: u32, maxRestarts: u32, withinNs: u64, backoffNs: u64): Supervisor {
    const spec = new Uint32Array(6);
    spec[0] = strategy;
    spec[1] = maxRestarts;
    spec[2] = <u32>withinNs;
    spec[3] = <u32>(withinNs >> 32);
    spec[4] = <u32>backoffNs;
    spec[5] = <u32>(backoffNs >> 32);
    return new Supervisor(__supervisor_create(spec.dataStart));
  }

  /** Spawns the granted module `module` with `args` as a child with `restart`: its member index, or a negative code. */
  spawn(restart: i32, module: string, args: string[], memoryLimit: u64): i32 {
    const name = String.UTF8.encode(module);
    const m = __module_lookup(changetype<usize>(name), <u32>name.byteLength);
    if (m < 0) return m;
    const words = new Array<ArrayBuffer>(args.length);
    const argv = new Uint32Array(args.length);
    for (let i = 0; i < args.length; i++) {
      words[i] = String.UTF8.encode(args[i], true);
      argv[i] = <u32>changetype<usize>(words[i]);
    }
    const budget = new Uint32Array(5);
    budget[0] = <u32>memoryLimit;
    budget[1] = <u32>(memoryLimit >> 32);
    budget[4] = 1;
    const r = __supervisor_spawn(this.handle, restart, m, argv.dataStart, <u32>args.length,
      budget.dataStart, 0, 0);
    __close(m);
    return r;
  }

  /** Waits up to `timeoutNs` (negative: for ever) for the next end among the children, and deals with it; null with `code` set on an error. */
  wait(timeoutNs: i64): SupervisorEvent | null {
    const r = __supervisor_wait(this.handle, timeoutNs, this.event.dataStart);
    this.code = r;
    if (r < 0) return null;
    return new SupervisorEvent(this.event[0], this.event[1], this.event[2], <u32>this.event[3]);
  }

  /** The last wait's result code (0, or negative). */
  code: i32 = 0;

  /** Kills member `member`'s current run: 0 or a negative code. */
  kill(member: i32): i32 {
    const run = __supervisor_child(this.handle, member);
    if (run < 0) return run;
    const r = __task_kill(run);
    __close(run);
    return r;
  }

  close(): void {
    __close(this.handle);
  }
}
