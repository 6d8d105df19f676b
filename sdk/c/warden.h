/*
 * warden.h — the C SDK for Warden guests (wasm32-wasi).
 *
 *   clang --target=wasm32-wasi -I sdk/c prog.c [sdk/c/warden.c] -o prog.wasm
 *
 * Everything a task reaches outside itself is named by a handle: a small
 * non-negative integer valid only in this task. Functions return a handle
 * or a non-negative result on success and a negative WARDEN_E* code on
 * failure; warden_strerror() describes a code. No call traps on bad
 * arguments: a wild pointer, a stale handle or an over-quota message is an
 * error code.
 *
 * Messages (warden_call, warden_recv, warden_reply) carry bytes and
 * handles. Listed handles are duplicated into the receiver; OR a handle
 * with WARDEN_MOVE to move it instead (it is closed here). A receiver
 * whose buffer is too small gets the first bytes and the full length as
 * the return value; handles beyond its capacity are closed.
 *
 * The definitions below are weak, so the header alone is enough; compiling
 * warden.c as well is harmless.
 */
#ifndef WARDEN_H
#define WARDEN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t warden_handle;            /* >= 0: handle; < 0: error code */

/* Error codes (the same values as Warden's `Errno`). */
#define WARDEN_EBADHANDLE  (-1)   /* not a handle of this task, or the wrong kind */
#define WARDEN_EREVOKED    (-2)   /* the object was revoked */
#define WARDEN_EPEERDIED   (-3)   /* the other task died or closed the service */
#define WARDEN_ENOCLIENTS  (-4)   /* no portal to the service is left */
#define WARDEN_EDENIED     (-5)   /* not permitted (manifest, read-only) */
#define WARDEN_EQUOTA      (-6)   /* over a quota (message size, handles) */
#define WARDEN_ENOMEM      (-7)   /* over the task's memory budget */
#define WARDEN_EBADPTR     (-8)   /* pointer or length outside the task's memory */
#define WARDEN_ETIMEOUT    (-9)   /* the wait timed out */
#define WARDEN_EINVAL      (-10)  /* invalid argument */
#define WARDEN_EEXISTS     (-11)  /* name already registered */
#define WARDEN_EDEADLOCK   (-12)  /* a call to the caller's own service */
#define WARDEN_ERANGE      (-13)  /* offset or length outside the object */
#define WARDEN_ENOREPLY    (-14)  /* the server closed the call without replying */
#define WARDEN_EAGAIN      (-15)  /* internal: the call must wait (warden_call then waits) */
#define WARDEN_EBUSY       (-16)  /* the serving node has too many calls waiting: try later; a device another handle holds */
#define WARDEN_EIO         (-17)  /* a device's host file failed the operation */
#define WARDEN_ENOTSUP     (-18)  /* not supported here (a mapping a passive task or this process cannot make) */

/* In a message's handle list: move the handle instead of duplicating it. */
#define WARDEN_MOVE        ((warden_handle)0x40000000)

const char *warden_strerror(int32_t code);

/* Services and portals. */
warden_handle warden_service_create(void);
warden_handle warden_portal_create(warden_handle service);
/* Revokes a portal to a service this task serves, without closing the
 * service: every copy of it (duplicates, copies sent in messages or found
 * by a name lookup of it) fails from then on with WARDEN_EREVOKED, and so
 * do calls through it that are queued or being served (the server's later
 * reply to one gets WARDEN_EPEERDIED). Portals made by another warden_portal_create
 * are untouched: give each client its own portal to revoke it alone.
 * WARDEN_EDENIED for a portal to another task's service. */
int32_t       warden_portal_revoke(warden_handle portal);
int32_t       warden_name_register(const char *name, warden_handle portal);
warden_handle warden_name_lookup(const char *name, int64_t timeout_ns);   /* timeout < 0: wait forever */
int64_t warden_call(warden_handle portal,
                    const void *req, size_t req_len, const warden_handle *req_h, size_t req_nh,
                    void *resp, size_t resp_cap, warden_handle *resp_h, size_t *resp_nh); /* *resp_nh: in capacity, out count; returns reply length or error */
/* warden_call with a deadline: timeout_ns 0 = do not wait, negative = wait
 * forever. A call not answered in time returns WARDEN_ETIMEOUT; the server's
 * late reply then gets WARDEN_EPEERDIED. */
int64_t warden_call_timeout(warden_handle portal,
                            const void *req, size_t req_len, const warden_handle *req_h, size_t req_nh,
                            void *resp, size_t resp_cap, warden_handle *resp_h, size_t *resp_nh,
                            int64_t timeout_ns);
int64_t warden_recv(warden_handle service, uint64_t *call_id,
                    void *buf, size_t cap, warden_handle *h, size_t *nh);  /* returns request length or error */
int32_t warden_reply(uint64_t call_id, const void *resp, size_t len, const warden_handle *h, size_t nh);
/* Who made a received call: "node/task" (the calling node, empty outside a
 * cluster, and the calling task's id on it), written to buf (NUL-terminated
 * if it fits); returns the text's full length. */
int32_t warden_call_origin(uint64_t call_id, char *buf, size_t cap);

/* Passive services. A task declared `passive = true` in the manifest is a
 * reactor module (clang -mexec-model=reactor: no main; -mbulk-memory makes
 * the handler's memcpy into resp one native copy) that defines its
 * handler with WARDEN_PASSIVE_SERVICE. The kernel registers its service
 * under the task's first `provides` name, and clients call it with
 * warden_name_lookup and warden_call as any other service; but the handler
 * runs on the caller's thread, inside the caller's warden_call: no queue,
 * no thread switch. One call runs at a time (others wait, first come first
 * served); the CPU is charged to the caller; the service's memory budget
 * and its `call_cpu_limit` (per call) and `cpu_limit` (in all) bound what
 * the handler does. A handler that traps, exits or overruns ends the
 * service: that caller and all later ones get WARDEN_EPEERDIED.
 * Requests and replies carry bytes only (handles: WARDEN_EINVAL). The
 * handler's error codes are WARDEN_E* codes; any other negative value, or
 * a length over resp_cap, reaches the caller as WARDEN_EINVAL.
 *
 * The handler may use WASI (no files: a passive task has no dirs),
 * handles, memory objects, permits, warden_name_lookup (which does not
 * wait) and warden_call to other passive or host services. It may not
 * wait for another task: a call to an active service returns
 * WARDEN_EDEADLOCK, and so does a call back into a service already on the
 * caller's stack of handlers (at most 2 deep). */

/* In a passive service: return the reply's length (<= resp_cap) or a negative error code. */
typedef int64_t (*warden_passive_fn)(const void *req, size_t len, void *resp, size_t resp_cap);
/* Defines the exports the kernel calls: the handler `fn`, and the buffer
 * its requests are copied into and its replies written to. */
#define WARDEN_PASSIVE_SERVICE(fn)                                                        \
    __attribute__((export_name("warden_passive_alloc")))                                  \
    void *__warden_passive_alloc(size_t size) { return __warden_passive_buffer(size); }  \
    __attribute__((export_name("warden_passive_call")))                                   \
    int64_t __warden_passive_call(const void *req, size_t len, void *resp, size_t cap) {  \
        warden_passive_fn handler = (fn);                                                 \
        return handler(req, len, resp, cap);                                              \
    }
void *__warden_passive_buffer(size_t size);

/* Live upgrade: state handed from the old code to the new
 * (doc/operators.md, "Live upgrade"). A server that exports
 * warden_upgrade_save is asked for its state at its next warden_recv
 * when an upgrade replaces it, between calls; it takes no call after
 * that (they wait for the new code). The new code's warden_upgrade_restore
 * is given the state's size before its main runs and returns where the
 * kernel is to copy it (NULL refuses it, and the upgrade). The state is at
 * most the new task's max_message_bytes.
 *   uint64_t warden_upgrade_save(void);     -- WARDEN_UPGRADE_STATE(ptr, len)
 *   void *warden_upgrade_restore(uint32_t len);
 * WARDEN_UPGRADE_EXPORTS(ptr, size) defines both for a fixed block of
 * memory (a struct of the server's state): its bytes handed over whole. */
#define WARDEN_UPGRADE_STATE(ptr, len) (((uint64_t)(len) << 32) | (uint32_t)(uintptr_t)(ptr))
#define WARDEN_UPGRADE_EXPORTS(ptr, size)                                                 \
    __attribute__((export_name("warden_upgrade_save")))                                   \
    uint64_t __warden_upgrade_save(void) { return WARDEN_UPGRADE_STATE((ptr), (size)); }  \
    __attribute__((export_name("warden_upgrade_restore")))                                \
    void *__warden_upgrade_restore(uint32_t len) { return len == (size) ? (void *)(ptr) : 0; }

/* Handles. */
int32_t       warden_close(warden_handle h);
warden_handle warden_dup(warden_handle h);

/* Memory objects. */
warden_handle warden_mem_create(uint64_t size);
warden_handle warden_mem_view(warden_handle mem, uint64_t offset, uint64_t len, int32_t readonly);
int64_t       warden_mem_read(warden_handle mem, uint64_t offset, void *dst, size_t len);
int64_t       warden_mem_write(warden_handle mem, uint64_t offset, const void *src, size_t len);
int64_t       warden_mem_size(warden_handle mem);
warden_handle warden_mem_revoke(warden_handle mem);

/* Mapping a memory object into the task's own memory: no copy, no host
 * call per access. warden_mem_map places `len` bytes at `offset` of the
 * view `mem` at `addr`; loads and stores there reach the object's pages.
 * `offset`, `len` and `addr` are multiples of WARDEN_PAGE, and `addr` lies
 * in memory the task grew beyond its initial size (warden_map_area gives
 * such a range; the initial pages hold its data and stack: WARDEN_EDENIED).
 * WARDEN_MAP_READ maps read-only: a store there traps the task ("store to
 * read-only memory object N"). WARDEN_MAP_READ | WARDEN_MAP_WRITE needs a
 * writable view (else WARDEN_EDENIED). Over another mapping: WARDEN_EEXISTS;
 * past the memory's end: WARDEN_EBADPTR; unaligned: WARDEN_EINVAL; a
 * revoked view: WARDEN_EREVOKED; more than 256 mappings in the task (or
 * 16,384 in the process): WARDEN_EQUOTA; a passive task:
 * WARDEN_ENOTSUP (warden_mem_read and warden_mem_write still work).
 * A revoke of the object (or of a view over the mapped bytes), or its
 * creator's death, takes the mapping away before the revoke returns: the
 * next access traps ("access to revoked memory object N"). warden_mem_unmap
 * gives back exactly one mapping (revoked or not): the range reads as zero
 * pages again. A mapped range is not charged to the mapping task (the
 * object is, to its creator); unmapping charges it back (WARDEN_ENOMEM,
 * the mapping kept, if the budget cannot take it). A task's mappings go
 * when it ends. */
#define WARDEN_PAGE       4096u
#define WARDEN_MAP_READ   1
#define WARDEN_MAP_WRITE  2
int32_t warden_mem_map(warden_handle mem, uint64_t offset, uint64_t len, void *addr, int32_t flags);
int32_t warden_mem_unmap(void *addr, size_t len);
/* `len` bytes (rounded up to 64 KiB) of fresh memory to map into: the
 * memory grows by that much. NULL if the memory budget refuses. */
void   *warden_map_area(size_t len);

/* Permits. */
warden_handle warden_permit_grant(const void *ptr, size_t len, int32_t writable);
int64_t       warden_permit_read(warden_handle permit, uint64_t offset, void *dst, size_t len);
int64_t       warden_permit_write(warden_handle permit, uint64_t offset, const void *src, size_t len);
int32_t       warden_permit_revoke(warden_handle permit);
/* Maps `len` bytes at `offset` of the permitted range at `addr`, when the
 * owner's memory there is a memory object it mapped (its data lives in a
 * memory object): loads and stores reach the same pages, with no host call.
 * Alignment and `addr` as for warden_mem_map; write only through a writable
 * permit and over a writable mapping of the owner's (else WARDEN_EDENIED).
 * WARDEN_ENOTSUP if the range is not all one such mapping (the copying
 * permit calls still work). Revoking the permit, or the object, or the
 * owner's death, takes the mapping away before the revoke returns; the
 * holder unmaps it with warden_mem_unmap. */
int32_t       warden_permit_map(warden_handle permit, uint64_t offset, uint64_t len, void *addr, int32_t flags);

/* Nested tasks. A child's memory limit is carved out of its parent's
 * budget: reserved there while the child lives (more than the parent has
 * left fails with WARDEN_ENOMEM). Its cpu_share is a weight, not an amount:
 * the parent's own share covers its whole subtree, and the child gets
 * cpu_share parts of it against the parent's own share and its siblings'
 * (hierarchical stride). memory_limit and cpu_share must be > 0;
 * cpu_limit_ns = 0 means no CPU limit of its own (the parent's still bounds
 * it). The child starts with exactly the handles in `grant` (see
 * warden_task_granted; WARDEN_MOVE moves one) and sees the names bound with
 * warden_namespace_bind before the name service. A spawn that fails leaves
 * the parent's handles as they were: nothing is moved. Killing a task kills
 * its children.
 *
 * argv: the child's arguments after its program name, as a manifest's
 * `args` are. The child's argv[0] is always its module's file name (as
 * the manifest grants it: "worker.wasm"), which the parent does not pass;
 * argv[0..argc) here become the child's argv[1..argc]. Each is a
 * NUL-terminated UTF-8 string of at most 4096 bytes, and argc is at most
 * 256 (more is WARDEN_EINVAL); argv may be NULL when argc is 0. The
 * strings are copied at the call: the parent may reuse them after. */
typedef struct { uint64_t memory_limit; uint64_t cpu_limit_ns; uint32_t cpu_share; } warden_budget;
warden_handle warden_module_lookup(const char *name);   /* a module the manifest granted: modules = { worker = "worker.wasm" } */
warden_handle warden_task_spawn(warden_handle module, const char *const *argv, size_t argc,
                                const warden_budget *budget, const warden_handle *grant, size_t ngrant);
int32_t warden_task_kill(warden_handle task);
int32_t warden_task_wait(warden_handle task, int64_t timeout_ns, int32_t *status); /* status: exit code, or negative for trap/kill */
int32_t warden_task_suspend(warden_handle task);
int32_t warden_task_resume(warden_handle task);
warden_handle warden_task_granted(uint32_t index); /* the index-th handle the parent granted at spawn */
/* Binds `name` for the children spawned from now on: their lookups of it
 * get `portal` (for instance one's own, to interpose on them); a negative
 * portal hides the name from them. */
int32_t warden_namespace_bind(const char *name, warden_handle portal);

/* Overuse (a child's manifest settings on_memory_limit / on_cpu_limit =
 * "notify", which children inherit): at its memory limit the child's growth
 * is denied and its parent gets a WARDEN_EVENT_MEMORY event (value: the
 * bytes it asked for); at its CPU limit the child is suspended and its
 * parent gets WARDEN_EVENT_CPU (value: CPU ns used). The parent may raise
 * the limits (new values; 0 leaves one as it is; extra memory comes out of
 * the parent's own budget, and a child stopped at its CPU limit resumes) or
 * kill the child. warden_task_event returns WARDEN_EPEERDIED once the child
 * has ended. */
typedef struct { int32_t kind; uint64_t value; } warden_event;
#define WARDEN_EVENT_MEMORY 1
#define WARDEN_EVENT_CPU    2
int32_t warden_task_event(warden_handle task, int64_t timeout_ns, warden_event *event);
int32_t warden_task_raise(warden_handle task, uint64_t memory_limit, uint64_t cpu_limit_ns);

/* Supervisors (OTP's, as a handle the parent holds). Children spawned into
 * a supervisor are restarted by it when they end, as their restart policy
 * and its strategy say, within its intensity (at most max_restarts
 * restarts in any within_ns window; past that it gives up: every child is
 * killed), each restart after a backoff doubling within the window (at
 * most 5 s). The parent is the supervisor: restarts are made, and their
 * CPU charged, inside its warden_supervisor_wait, and each run's memory is
 * carved from its budget as any child's. A supervisor handle is a
 * warden_poll handle (WARDEN_POLL_IN: warden_supervisor_wait has something
 * to do). Closing it kills its children. A child gets, at each start, the
 * handles granted at warden_supervisor_spawn (duplicates: the parent's
 * own stay open; WARDEN_MOVE is not kept between runs). */
typedef struct { uint32_t strategy; uint32_t max_restarts; uint64_t within_ns; uint64_t backoff_ns; } warden_supervisor_spec;
#define WARDEN_ONE_FOR_ONE  0u  /* restart the child that ended */
#define WARDEN_ONE_FOR_ALL  1u  /* ... and every other child */
#define WARDEN_REST_FOR_ONE 2u  /* ... and the children spawned after it */
#define WARDEN_PERMANENT 0  /* restarted whenever it ends */
#define WARDEN_TRANSIENT 1  /* restarted when it fails (non-zero exit, trap, kill) */
#define WARDEN_TEMPORARY 2  /* never restarted */
typedef struct { int32_t kind; int32_t member; int32_t status; uint32_t restarts; } warden_supervisor_event;
#define WARDEN_SUPERVISOR_RESTARTED 1  /* `member` ended with `status` and was restarted (its restarts so far) */
#define WARDEN_SUPERVISOR_ENDED     2  /* `member` ended with `status` for good: its policy does not restart it */
#define WARDEN_SUPERVISOR_GAVE_UP   3  /* past the intensity: every child killed; later waits: WARDEN_EPEERDIED */
warden_handle warden_supervisor_create(const warden_supervisor_spec *spec);
/* Spawns a child as warden_task_spawn does, into `sup` with `restart`; the
 * child's member index (0, 1, ...: the order rest_for_one follows). */
int32_t warden_supervisor_spawn(warden_handle sup, int32_t restart, warden_handle module,
                                const char *const *argv, size_t argc, const warden_budget *budget,
                                const warden_handle *grant, size_t ngrant);
/* Waits for the next thing to happen among the children and deals with
 * it (a restart is made here, after its backoff); says what in `event`. */
int32_t warden_supervisor_wait(warden_handle sup, int64_t timeout_ns, warden_supervisor_event *event);
/* A task handle to `member`'s current run (kill, wait, events, raise);
 * WARDEN_EPEERDIED while it has none. */
warden_handle warden_supervisor_child(warden_handle sup, int32_t member);

#define WARDEN_STATUS_TRAPPED (-1)  /* warden_task_wait status of a trapped child */
#define WARDEN_STATUS_KILLED  (-2)  /* ... of a killed one */

/* Sockets. Listeners and connections are handles: close, dup and pass them
 * in messages like any other. Addresses are numeric text, "127.0.0.1:8080"
 * or "[::1]:0"; a task may listen on and connect to only what its manifest
 * grants (listen = [...], connect = [...]), anything else is WARDEN_EDENIED.
 * Timeouts in ns: 0 = do not wait, negative = wait forever; a call that
 * cannot complete in time returns WARDEN_ETIMEOUT. Any negative return is
 * an error code. A closed or reset peer is WARDEN_EPEERDIED; an address in
 * use is WARDEN_EEXISTS; more than max_sockets is WARDEN_EQUOTA. A task
 * whose sends are paced (link_rate, bandwidth_limit) waits for its turn on
 * the link in warden_sock_send even with timeout 0. */
warden_handle warden_tcp_listen(const char *addr);                         /* "127.0.0.1:8080", "[::1]:0" */
warden_handle warden_tcp_accept(warden_handle listener, int64_t timeout_ns);
warden_handle warden_tcp_connect(const char *addr, int64_t timeout_ns);
int64_t warden_sock_send(warden_handle sock, const void *buf, size_t len, int64_t timeout_ns); /* bytes taken, may be fewer than len */
int64_t warden_sock_recv(warden_handle sock, void *buf, size_t cap, int64_t timeout_ns);       /* bytes read; 0 = peer closed */
int32_t warden_sock_shutdown(warden_handle sock);                           /* no more sends */
int32_t warden_sock_addr(warden_handle sock, int32_t peer, char *buf, size_t cap); /* local (peer=0) or peer address as text; returns its length */
/* A servlet request's exchange (the one handle a call from a web route to
 * a servlet carries) takes warden_sock_recv (the rest of the request body,
 * 0 at its end; WARDEN_ERANGE if it broke off or passed max_body),
 * warden_sock_send (a streamed answer's body, at most 64 KiB a call, once
 * the reply passed the exchange back; WARDEN_EPEERDIED once the client or
 * the answer is gone), warden_sock_shutdown (the answer ends complete:
 * closing the last handle without it cuts the answer short) and
 * warden_poll (WARDEN_POLL_IN, WARDEN_POLL_OUT). See doc/web.md. */
typedef struct { warden_handle handle; uint32_t events; uint32_t revents; } warden_pollfd;
#define WARDEN_POLL_IN  1u  /* data or a connection to accept; a call waiting on a service; a child task ended */
#define WARDEN_POLL_OUT 2u
#define WARDEN_POLL_HUP 4u
int32_t warden_poll(warden_pollfd *fds, size_t n, int64_t timeout_ns);     /* how many are ready; 0 on timeout */

/* Block devices. A manifest's [[device]] is a host file of 512-byte
 * sectors; a task whose devices = [...] names it opens it (WARDEN_EDENIED
 * otherwise, WARDEN_EBUSY while another handle holds it: one holder at a
 * time, freed when that handle is closed or its task ends). The handle
 * cannot be duplicated or sent. Reads and writes move `count` whole
 * sectors at sector `sector`, at most 1 MiB a call, between the device
 * and `buf` (which must hold count * 512 bytes: WARDEN_EINVAL otherwise;
 * sectors past the end: WARDEN_ERANGE), and return the bytes moved.
 * Writes reach the host's page cache; warden_device_sync flushes them to
 * its storage (fdatasync). The host file failing is WARDEN_EIO. */
#define WARDEN_SECTOR 512u
typedef struct { uint64_t sector_size; uint64_t sectors; } warden_device_info_t;
warden_handle warden_device_open(const char *name);
int32_t warden_device_info(warden_handle dev, warden_device_info_t *info);
int64_t warden_device_read(warden_handle dev, uint64_t sector, uint32_t count, void *buf, size_t cap);
int64_t warden_device_write(warden_handle dev, uint64_t sector, uint32_t count, const void *buf, size_t len);
int32_t warden_device_sync(warden_handle dev);

/* ---- Raw imports: the host functions of the "warden" module. ---- */

#define WARDEN_IMPORT(name) __attribute__((import_module("warden"), import_name(#name)))

WARDEN_IMPORT(close)          int32_t __warden_close(int32_t h);
WARDEN_IMPORT(dup)            int32_t __warden_dup(int32_t h);
WARDEN_IMPORT(service_create) int32_t __warden_service_create(void);
WARDEN_IMPORT(portal_revoke)  int32_t __warden_portal_revoke(int32_t portal);
WARDEN_IMPORT(portal_create)  int32_t __warden_portal_create(int32_t service);
WARDEN_IMPORT(call)           int64_t __warden_call(int32_t portal, const void *req, uint32_t req_len,
                                                    const int32_t *req_h, uint32_t req_nh, void *resp,
                                                    uint32_t resp_cap, int32_t *resp_h, uint32_t *resp_nh);
/* A call made at once: a passive or host service's runs here; an active
 * service's is made here, and finished if its server answered at once.
 * WARDEN_EAGAIN if it must wait: for a busy passive service (nothing was
 * done), or for an active service's answer (the call is under way; `call`
 * with the same arguments waits for it). warden_call then calls `call`. */
WARDEN_IMPORT(call_fast)      int64_t __warden_call_fast(int32_t portal, const void *req, uint32_t req_len,
                                                         const int32_t *req_h, uint32_t req_nh, void *resp,
                                                         uint32_t resp_cap, int32_t *resp_h, uint32_t *resp_nh);
WARDEN_IMPORT(call_timeout)   int64_t __warden_call_timeout(int32_t portal, const void *req, uint32_t req_len,
                                                    const int32_t *req_h, uint32_t req_nh, void *resp,
                                                    uint32_t resp_cap, int32_t *resp_h, uint32_t *resp_nh,
                                                    int64_t timeout_ns);
WARDEN_IMPORT(recv)           int64_t __warden_recv(int32_t service, uint64_t *call_id, void *buf,
                                                    uint32_t cap, int32_t *h, uint32_t *nh);
WARDEN_IMPORT(reply)          int32_t __warden_reply(uint64_t call_id, const void *resp, uint32_t len,
                                                     const int32_t *h, uint32_t nh);
WARDEN_IMPORT(call_origin)    int32_t __warden_call_origin(uint64_t call_id, char *buf, uint32_t cap);
WARDEN_IMPORT(name_register)  int32_t __warden_name_register(const char *name, uint32_t len, int32_t portal);
WARDEN_IMPORT(name_lookup)    int32_t __warden_name_lookup(const char *name, uint32_t len, int64_t timeout_ns);
WARDEN_IMPORT(mem_create)     int32_t __warden_mem_create(uint64_t size);
WARDEN_IMPORT(mem_view)       int32_t __warden_mem_view(int32_t mem, uint64_t off, uint64_t len, int32_t ro);
WARDEN_IMPORT(mem_read)       int64_t __warden_mem_read(int32_t mem, uint64_t off, void *dst, uint32_t len);
WARDEN_IMPORT(mem_write)      int64_t __warden_mem_write(int32_t mem, uint64_t off, const void *src, uint32_t len);
WARDEN_IMPORT(mem_size)       int64_t __warden_mem_size(int32_t mem);
WARDEN_IMPORT(mem_revoke)     int32_t __warden_mem_revoke(int32_t mem);
WARDEN_IMPORT(permit_map)     int32_t __warden_permit_map(int32_t permit, uint64_t off, uint64_t len, void *addr, int32_t flags);
WARDEN_IMPORT(mem_map)        int32_t __warden_mem_map(int32_t mem, uint64_t off, uint64_t len, void *addr, int32_t flags);
WARDEN_IMPORT(mem_unmap)      int32_t __warden_mem_unmap(void *addr, uint32_t len);
WARDEN_IMPORT(permit_grant)   int32_t __warden_permit_grant(const void *ptr, uint32_t len, int32_t writable);
WARDEN_IMPORT(permit_read)    int64_t __warden_permit_read(int32_t permit, uint64_t off, void *dst, uint32_t len);
WARDEN_IMPORT(permit_write)   int64_t __warden_permit_write(int32_t permit, uint64_t off, const void *src, uint32_t len);
WARDEN_IMPORT(permit_revoke)  int32_t __warden_permit_revoke(int32_t permit);
WARDEN_IMPORT(module_lookup)  int32_t __warden_module_lookup(const char *name, uint32_t len);
WARDEN_IMPORT(task_spawn)     int32_t __warden_task_spawn(int32_t module, const char *const *argv, uint32_t argc,
                                                          const warden_budget *budget, const int32_t *grant,
                                                          uint32_t ngrant);
WARDEN_IMPORT(task_kill)      int32_t __warden_task_kill(int32_t task);
WARDEN_IMPORT(task_wait)      int32_t __warden_task_wait(int32_t task, int64_t timeout_ns, int32_t *status);
WARDEN_IMPORT(task_suspend)   int32_t __warden_task_suspend(int32_t task);
WARDEN_IMPORT(task_resume)    int32_t __warden_task_resume(int32_t task);
WARDEN_IMPORT(task_granted)   int32_t __warden_task_granted(uint32_t index);
WARDEN_IMPORT(task_event)     int32_t __warden_task_event(int32_t task, int64_t timeout_ns, warden_event *event);
WARDEN_IMPORT(task_raise)     int32_t __warden_task_raise(int32_t task, uint64_t memory_limit, uint64_t cpu_limit_ns);
WARDEN_IMPORT(supervisor_create) int32_t __warden_supervisor_create(const warden_supervisor_spec *spec);
WARDEN_IMPORT(supervisor_spawn)  int32_t __warden_supervisor_spawn(int32_t sup, int32_t restart, int32_t module,
                                                                  const char *const *argv, uint32_t argc,
                                                                  const warden_budget *budget,
                                                                  const int32_t *grant, uint32_t ngrant);
WARDEN_IMPORT(supervisor_wait)   int32_t __warden_supervisor_wait(int32_t sup, int64_t timeout_ns,
                                                                 warden_supervisor_event *event);
WARDEN_IMPORT(supervisor_child)  int32_t __warden_supervisor_child(int32_t sup, int32_t member);
WARDEN_IMPORT(namespace_bind) int32_t __warden_namespace_bind(const char *name, uint32_t len, int32_t portal);
WARDEN_IMPORT(tcp_listen)     int32_t __warden_tcp_listen(const char *addr, uint32_t len);
WARDEN_IMPORT(tcp_accept)     int32_t __warden_tcp_accept(int32_t listener, int64_t timeout_ns);
WARDEN_IMPORT(tcp_connect)    int32_t __warden_tcp_connect(const char *addr, uint32_t len, int64_t timeout_ns);
WARDEN_IMPORT(sock_send)      int64_t __warden_sock_send(int32_t sock, const void *buf, uint32_t len, int64_t timeout_ns);
WARDEN_IMPORT(sock_recv)      int64_t __warden_sock_recv(int32_t sock, void *buf, uint32_t cap, int64_t timeout_ns);
WARDEN_IMPORT(sock_shutdown)  int32_t __warden_sock_shutdown(int32_t sock);
WARDEN_IMPORT(sock_addr)      int32_t __warden_sock_addr(int32_t sock, int32_t peer, char *buf, uint32_t cap);
WARDEN_IMPORT(poll)           int32_t __warden_poll(warden_pollfd *fds, uint32_t n, int64_t timeout_ns);
WARDEN_IMPORT(device_open)    int32_t __warden_device_open(const char *name, uint32_t len);
WARDEN_IMPORT(device_info)    int32_t __warden_device_info(int32_t dev, warden_device_info_t *info);
WARDEN_IMPORT(device_read)    int64_t __warden_device_read(int32_t dev, uint64_t sector, uint32_t count, void *buf, uint32_t cap);
WARDEN_IMPORT(device_write)   int64_t __warden_device_write(int32_t dev, uint64_t sector, uint32_t count, const void *buf, uint32_t len);
WARDEN_IMPORT(device_sync)    int32_t __warden_device_sync(int32_t dev);

/* ---- Definitions (weak: including this header in several files is fine). ---- */

#ifndef WARDEN_NO_DEFINITIONS
#define WARDEN_DEF __attribute__((weak))

WARDEN_DEF const char *warden_strerror(int32_t code) {
    switch (code) {
    case WARDEN_EBADHANDLE: return "bad handle";
    case WARDEN_EREVOKED:   return "revoked";
    case WARDEN_EPEERDIED:  return "peer died";
    case WARDEN_ENOCLIENTS: return "no clients";
    case WARDEN_EDENIED:    return "denied";
    case WARDEN_EQUOTA:     return "quota exceeded";
    case WARDEN_ENOMEM:     return "out of memory";
    case WARDEN_EBADPTR:    return "bad pointer";
    case WARDEN_ETIMEOUT:   return "timed out";
    case WARDEN_EINVAL:     return "invalid argument";
    case WARDEN_EEXISTS:    return "already exists";
    case WARDEN_EDEADLOCK:  return "would deadlock";
    case WARDEN_ERANGE:     return "out of range";
    case WARDEN_ENOREPLY:   return "no reply";
    case WARDEN_EAGAIN:     return "would wait";
    case WARDEN_EBUSY:      return "busy";
    case WARDEN_EIO:        return "I/O error";
    case WARDEN_ENOTSUP:    return "not supported";
    default:                return code >= 0 ? "success" : "unknown error";
    }
}

static inline uint32_t __warden_strlen(const char *s) {
    uint32_t n = 0;
    while (s && s[n]) n++;
    return n;
}

WARDEN_DEF warden_handle warden_service_create(void) { return __warden_service_create(); }
WARDEN_DEF warden_handle warden_portal_create(warden_handle s) { return __warden_portal_create(s); }
WARDEN_DEF int32_t warden_portal_revoke(warden_handle p) { return __warden_portal_revoke(p); }
WARDEN_DEF int32_t warden_name_register(const char *name, warden_handle portal) {
    return __warden_name_register(name, __warden_strlen(name), portal);
}
WARDEN_DEF warden_handle warden_name_lookup(const char *name, int64_t timeout_ns) {
    return __warden_name_lookup(name, __warden_strlen(name), timeout_ns);
}
WARDEN_DEF int64_t warden_call(warden_handle portal, const void *req, size_t req_len,
                               const warden_handle *req_h, size_t req_nh, void *resp, size_t resp_cap,
                               warden_handle *resp_h, size_t *resp_nh) {
    uint32_t none = 0;
    uint32_t *nh = resp_nh ? (uint32_t *)resp_nh : &none;
    int64_t r = __warden_call_fast(portal, req, req_len, req_h, req_nh, resp, resp_cap, resp_h, nh);
    if (r != WARDEN_EAGAIN) return r;
    return __warden_call(portal, req, req_len, req_h, req_nh, resp, resp_cap, resp_h, nh);
}
WARDEN_DEF int64_t warden_call_timeout(warden_handle portal, const void *req, size_t req_len,
                                       const warden_handle *req_h, size_t req_nh, void *resp,
                                       size_t resp_cap, warden_handle *resp_h, size_t *resp_nh,
                                       int64_t timeout_ns) {
    uint32_t none = 0;
    uint32_t *nh = resp_nh ? (uint32_t *)resp_nh : &none;
    int64_t r = __warden_call_fast(portal, req, req_len, req_h, req_nh, resp, resp_cap, resp_h, nh);
    if (r != WARDEN_EAGAIN) return r;
    return __warden_call_timeout(portal, req, req_len, req_h, req_nh, resp, resp_cap, resp_h, nh,
                                 timeout_ns);
}
WARDEN_DEF int64_t warden_recv(warden_handle service, uint64_t *call_id, void *buf, size_t cap,
                               warden_handle *h, size_t *nh) {
    uint32_t none = 0;
    return __warden_recv(service, call_id, buf, cap, h, nh ? (uint32_t *)nh : &none);
}
WARDEN_DEF int32_t warden_reply(uint64_t call_id, const void *resp, size_t len,
                                const warden_handle *h, size_t nh) {
    return __warden_reply(call_id, resp, len, h, nh);
}
WARDEN_DEF int32_t warden_call_origin(uint64_t call_id, char *buf, size_t cap) {
    return __warden_call_origin(call_id, buf, cap);
}
WARDEN_DEF int32_t warden_close(warden_handle h) { return __warden_close(h); }
WARDEN_DEF warden_handle warden_dup(warden_handle h) { return __warden_dup(h); }
WARDEN_DEF warden_handle warden_mem_create(uint64_t size) { return __warden_mem_create(size); }
WARDEN_DEF warden_handle warden_mem_view(warden_handle m, uint64_t off, uint64_t len, int32_t ro) {
    return __warden_mem_view(m, off, len, ro);
}
WARDEN_DEF int64_t warden_mem_read(warden_handle m, uint64_t off, void *dst, size_t len) {
    return __warden_mem_read(m, off, dst, len);
}
WARDEN_DEF int64_t warden_mem_write(warden_handle m, uint64_t off, const void *src, size_t len) {
    return __warden_mem_write(m, off, src, len);
}
WARDEN_DEF int64_t warden_mem_size(warden_handle m) { return __warden_mem_size(m); }
WARDEN_DEF warden_handle warden_mem_revoke(warden_handle m) { return __warden_mem_revoke(m); }
WARDEN_DEF int32_t warden_mem_map(warden_handle m, uint64_t off, uint64_t len, void *addr, int32_t flags) {
    return __warden_mem_map(m, off, len, addr, flags);
}
WARDEN_DEF int32_t warden_permit_map(warden_handle p, uint64_t off, uint64_t len, void *addr, int32_t flags) {
    return __warden_permit_map(p, off, len, addr, flags);
}
WARDEN_DEF int32_t warden_mem_unmap(void *addr, size_t len) {
    return len > 0xffffffffu ? WARDEN_EINVAL : __warden_mem_unmap(addr, (uint32_t)len);
}
WARDEN_DEF void *warden_map_area(size_t len) {
    size_t pages = (len + 65535) / 65536;
    size_t old = __builtin_wasm_memory_grow(0, pages);
    return old == (size_t)-1 ? 0 : (void *)(old * 65536);
}
WARDEN_DEF warden_handle warden_permit_grant(const void *ptr, size_t len, int32_t writable) {
    return __warden_permit_grant(ptr, len, writable);
}
WARDEN_DEF int64_t warden_permit_read(warden_handle p, uint64_t off, void *dst, size_t len) {
    return __warden_permit_read(p, off, dst, len);
}
WARDEN_DEF int64_t warden_permit_write(warden_handle p, uint64_t off, const void *src, size_t len) {
    return __warden_permit_write(p, off, src, len);
}
WARDEN_DEF int32_t warden_permit_revoke(warden_handle p) { return __warden_permit_revoke(p); }
WARDEN_DEF warden_handle warden_module_lookup(const char *name) {
    return __warden_module_lookup(name, __warden_strlen(name));
}
WARDEN_DEF warden_handle warden_tcp_listen(const char *addr) {
    return __warden_tcp_listen(addr, __warden_strlen(addr));
}
WARDEN_DEF warden_handle warden_tcp_accept(warden_handle l, int64_t timeout_ns) {
    return __warden_tcp_accept(l, timeout_ns);
}
WARDEN_DEF warden_handle warden_tcp_connect(const char *addr, int64_t timeout_ns) {
    return __warden_tcp_connect(addr, __warden_strlen(addr), timeout_ns);
}
WARDEN_DEF int64_t warden_sock_send(warden_handle s, const void *buf, size_t len, int64_t timeout_ns) {
    return __warden_sock_send(s, buf, len, timeout_ns);
}
WARDEN_DEF int64_t warden_sock_recv(warden_handle s, void *buf, size_t cap, int64_t timeout_ns) {
    return __warden_sock_recv(s, buf, cap, timeout_ns);
}
WARDEN_DEF int32_t warden_sock_shutdown(warden_handle s) { return __warden_sock_shutdown(s); }
WARDEN_DEF int32_t warden_sock_addr(warden_handle s, int32_t peer, char *buf, size_t cap) {
    return __warden_sock_addr(s, peer, buf, cap);
}
WARDEN_DEF int32_t warden_poll(warden_pollfd *fds, size_t n, int64_t timeout_ns) {
    return __warden_poll(fds, n, timeout_ns);
}
WARDEN_DEF warden_handle warden_device_open(const char *name) {
    return __warden_device_open(name, __warden_strlen(name));
}
WARDEN_DEF int32_t warden_device_info(warden_handle dev, warden_device_info_t *info) {
    return __warden_device_info(dev, info);
}
WARDEN_DEF int64_t warden_device_read(warden_handle dev, uint64_t sector, uint32_t count, void *buf,
                                      size_t cap) {
    return __warden_device_read(dev, sector, count, buf, cap);
}
WARDEN_DEF int64_t warden_device_write(warden_handle dev, uint64_t sector, uint32_t count,
                                       const void *buf, size_t len) {
    return __warden_device_write(dev, sector, count, buf, len);
}
WARDEN_DEF int32_t warden_device_sync(warden_handle dev) { return __warden_device_sync(dev); }
WARDEN_DEF warden_handle warden_task_spawn(warden_handle module, const char *const *argv, size_t argc,
                                           const warden_budget *budget, const warden_handle *grant,
                                           size_t ngrant) {
    return __warden_task_spawn(module, argv, argc, budget, grant, ngrant);
}
WARDEN_DEF int32_t warden_task_kill(warden_handle t) { return __warden_task_kill(t); }
WARDEN_DEF warden_handle warden_supervisor_create(const warden_supervisor_spec *spec) {
    return __warden_supervisor_create(spec);
}
WARDEN_DEF int32_t warden_supervisor_spawn(warden_handle sup, int32_t restart, warden_handle module,
                                           const char *const *argv, size_t argc, const warden_budget *budget,
                                           const warden_handle *grant, size_t ngrant) {
    return __warden_supervisor_spawn(sup, restart, module, argv, argc, budget, grant, ngrant);
}
WARDEN_DEF int32_t warden_supervisor_wait(warden_handle sup, int64_t timeout_ns, warden_supervisor_event *event) {
    return __warden_supervisor_wait(sup, timeout_ns, event);
}
WARDEN_DEF warden_handle warden_supervisor_child(warden_handle sup, int32_t member) {
    return __warden_supervisor_child(sup, member);
}
WARDEN_DEF int32_t warden_task_wait(warden_handle t, int64_t timeout_ns, int32_t *status) {
    int32_t ignored;
    return __warden_task_wait(t, timeout_ns, status ? status : &ignored);
}
WARDEN_DEF int32_t warden_task_suspend(warden_handle t) { return __warden_task_suspend(t); }
WARDEN_DEF int32_t warden_task_resume(warden_handle t) { return __warden_task_resume(t); }
WARDEN_DEF warden_handle warden_task_granted(uint32_t index) { return __warden_task_granted(index); }
WARDEN_DEF int32_t warden_task_event(warden_handle t, int64_t timeout_ns, warden_event *event) {
    return __warden_task_event(t, timeout_ns, event);
}
WARDEN_DEF int32_t warden_task_raise(warden_handle t, uint64_t memory_limit, uint64_t cpu_limit_ns) {
    return __warden_task_raise(t, memory_limit, cpu_limit_ns);
}
WARDEN_DEF int32_t warden_namespace_bind(const char *name, warden_handle portal) {
    return __warden_namespace_bind(name, __warden_strlen(name), portal);
}
/* One buffer, grown as requests and reply capacities need (0: no memory). */
WARDEN_DEF void *__warden_passive_buffer(size_t size) {
    extern void *realloc(void *, size_t);
    static void *buf;
    static size_t cap;
    if (size > cap) {
        void *grown = realloc(buf, size);
        if (!grown) return 0;
        buf = grown;
        cap = size;
    }
    return buf;
}

#endif /* WARDEN_NO_DEFINITIONS */

#ifdef __cplusplus
}
#endif

#endif /* WARDEN_H */
