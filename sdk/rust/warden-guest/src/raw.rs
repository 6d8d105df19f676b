//! The `warden` import module, as `sdk/c/warden.h` declares it.

#[repr(C)]
pub struct Budget {
    pub memory_limit: u64,
    pub cpu_limit_ns: u64,
    pub cpu_share: u32,
}

#[repr(C)]
pub struct SupervisorSpec {
    pub strategy: u32,
    pub max_restarts: u32,
    pub within_ns: u64,
    pub backoff_ns: u64,
}

#[repr(C)]
#[derive(Default)]
pub struct SupervisorEvent {
    pub kind: i32,
    pub member: i32,
    pub status: i32,
    pub restarts: u32,
}

#[repr(C)]
pub struct DeviceInfo {
    pub sector_size: u64,
    pub sectors: u64,
}

#[link(wasm_import_module = "warden")]
extern "C" {
    pub fn close(h: i32) -> i32;
    pub fn service_create() -> i32;
    pub fn portal_create(service: i32) -> i32;
    pub fn call(portal: i32, req: *const u8, req_len: u32, req_h: *const i32, req_nh: u32,
        resp: *mut u8, resp_cap: u32, resp_h: *mut i32, resp_nh: *mut u32) -> i64;
    pub fn call_fast(portal: i32, req: *const u8, req_len: u32, req_h: *const i32, req_nh: u32,
        resp: *mut u8, resp_cap: u32, resp_h: *mut i32, resp_nh: *mut u32) -> i64;
    pub fn recv(service: i32, call_id: *mut u64, buf: *mut u8, cap: u32, h: *mut i32,
        nh: *mut u32) -> i64;
    pub fn reply(call_id: u64, resp: *const u8, len: u32, h: *const i32, nh: u32) -> i32;
    pub fn name_register(name: *const u8, len: u32, portal: i32) -> i32;
    pub fn name_lookup(name: *const u8, len: u32, timeout_ns: i64) -> i32;
    pub fn mem_create(size: u64) -> i32;
    pub fn mem_read(mem: i32, off: u64, dst: *mut u8, len: u32) -> i64;
    pub fn mem_write(mem: i32, off: u64, src: *const u8, len: u32) -> i64;
    pub fn mem_size(mem: i32) -> i64;
    pub fn portal_revoke(portal: i32) -> i32;
    pub fn mem_view(mem: i32, off: u64, len: u64, readonly: i32) -> i32;
    pub fn mem_revoke(mem: i32) -> i32;
    pub fn mem_map(mem: i32, off: u64, len: u64, addr: *mut u8, flags: i32) -> i32;
    pub fn mem_unmap(addr: *mut u8, len: u32) -> i32;
    pub fn module_lookup(name: *const u8, len: u32) -> i32;
    pub fn task_spawn(module: i32, argv: *const *const u8, argc: u32, budget: *const Budget,
        grant: *const i32, ngrant: u32) -> i32;
    pub fn task_kill(task: i32) -> i32;
    pub fn supervisor_create(spec: *const SupervisorSpec) -> i32;
    pub fn supervisor_spawn(sup: i32, restart: i32, module: i32, argv: *const *const u8, argc: u32,
        budget: *const Budget, grant: *const i32, ngrant: u32) -> i32;
    pub fn supervisor_wait(sup: i32, timeout_ns: i64, event: *mut SupervisorEvent) -> i32;
    pub fn supervisor_child(sup: i32, member: i32) -> i32;
    pub fn task_wait(task: i32, timeout_ns: i64, status: *mut i32) -> i32;
    pub fn device_open(name: *const u8, len: u32) -> i32;
    pub fn device_info(dev: i32, info: *mut DeviceInfo) -> i32;
    pub fn device_read(dev: i32, sector: u64, count: u32, buf: *mut u8, cap: u32) -> i64;
    pub fn device_write(dev: i32, sector: u64, count: u32, buf: *const u8, len: u32) -> i64;
    pub fn device_sync(dev: i32) -> i32;
}
