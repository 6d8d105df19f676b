/* Calls every function of the SDK, so that this module imports every
 * `warden` host function; prints "abi: ok" when each behaves. */
#include <string.h>
#include "warden.h"
#include "checks.h"

int main(void) {
    char buf[64];
    size_t nh = 0;
    uint64_t call = 0;
    warden_handle s = warden_service_create();
    warden_handle p = warden_portal_create(s);
    CHECK(s >= 0 && p >= 0, 1);
    CHECK(warden_name_register("abi", p), 0);
    CHECK(warden_name_register("abi", p), WARDEN_EEXISTS);
    CHECK(warden_name_register("not-mine", p), WARDEN_EDENIED);
    warden_handle again = warden_name_lookup("abi", 0);
    CHECK(again >= 0, 1);
    warden_handle spare = warden_portal_create(s);
    CHECK(warden_portal_revoke(spare), 0);
    CHECK(warden_portal_revoke(s), WARDEN_EBADHANDLE);
    CHECK(warden_name_lookup("absent", 1000 * 1000), WARDEN_ETIMEOUT);
    CHECK(warden_name_lookup("forbidden", -1), WARDEN_EDENIED);
    CHECK(warden_call(again, "x", 1, NULL, 0, buf, sizeof buf, NULL, &nh), WARDEN_EDEADLOCK);
    CHECK(warden_call_timeout(again, "x", 1, NULL, 0, buf, sizeof buf, NULL, &nh, 0),
          WARDEN_EDEADLOCK);
    CHECK(warden_call_timeout(-1, "x", 1, NULL, 0, buf, sizeof buf, NULL, &nh, -1),
          WARDEN_EBADHANDLE);
    CHECK(warden_recv(p, &call, buf, sizeof buf, NULL, &nh), WARDEN_EBADHANDLE);
    CHECK(warden_reply(call, "x", 1, NULL, 0), WARDEN_EBADHANDLE);
    CHECK(warden_call_origin(call, buf, sizeof buf), WARDEN_EBADHANDLE);
    warden_handle d = warden_dup(p);
    CHECK(d >= 0 && d != p, 1);
    CHECK(warden_close(d), 0);
    warden_handle m = warden_mem_create(64);
    warden_handle v = warden_mem_view(m, 8, 8, 0);
    CHECK(warden_mem_write(v, 0, "abcdefgh", 8), 8);
    CHECK(warden_mem_read(m, 8, buf, 8), 8);
    CHECK(warden_mem_size(v), 8);
    CHECK(warden_mem_revoke(v) >= 0, 1);
    warden_handle pages = warden_mem_create(4096);
    char *area = warden_map_area(4096);
    CHECK(warden_mem_map(pages, 0, 4096, area, WARDEN_MAP_READ | WARDEN_MAP_WRITE), 0);
    area[1] = 'm';
    CHECK(warden_mem_unmap(area, 4096), 0);
    warden_handle pm = warden_permit_grant(buf, sizeof buf, 1);
    CHECK(warden_permit_write(pm, 0, "zz", 2), 2);
    CHECK(warden_permit_read(pm, 0, buf + 10, 2), 2);
    CHECK(warden_permit_map(pm, 0, 4096, area, WARDEN_MAP_READ), WARDEN_ERANGE);
    CHECK(memcmp(buf + 10, "zz", 2), 0);
    CHECK(warden_permit_revoke(pm), 0);
    CHECK(strcmp(warden_strerror(WARDEN_EPEERDIED), "peer died"), 0);

    /* Nested tasks: no module was granted to this task. */
    CHECK(warden_module_lookup("worker"), WARDEN_EDENIED);
    warden_budget b = {1 << 20, 0, 1};
    CHECK(warden_task_spawn(p, NULL, 0, &b, NULL, 0), WARDEN_EBADHANDLE);
    CHECK(warden_task_kill(p), WARDEN_EBADHANDLE);
    CHECK(warden_task_wait(p, 0, NULL), WARDEN_EBADHANDLE);
    CHECK(warden_task_suspend(p), WARDEN_EBADHANDLE);
    CHECK(warden_task_resume(p), WARDEN_EBADHANDLE);
    CHECK(warden_task_granted(0), WARDEN_EINVAL);
    warden_event ev;
    CHECK(warden_task_event(p, 0, &ev), WARDEN_EBADHANDLE);
    CHECK(warden_task_raise(p, 1 << 20, 0), WARDEN_EBADHANDLE);
    warden_supervisor_spec sspec = {WARDEN_ONE_FOR_ONE, 1, 1000000000ull, 0};
    warden_handle sup = warden_supervisor_create(&sspec);
    CHECK(sup >= 0, 1);
    CHECK(warden_supervisor_spawn(sup, WARDEN_PERMANENT, p, NULL, 0, &b, NULL, 0), WARDEN_EBADHANDLE);
    warden_supervisor_event sev;
    CHECK(warden_supervisor_wait(sup, 0, &sev), WARDEN_ETIMEOUT);
    CHECK(warden_supervisor_child(sup, 0), WARDEN_EINVAL);
    CHECK(warden_close(sup), 0);
    CHECK(warden_namespace_bind("abi", p), 0);

    /* Sockets: no address is granted to this task. */
    CHECK(warden_tcp_listen("127.0.0.1:0"), WARDEN_EDENIED);
    CHECK(warden_tcp_listen("no address"), WARDEN_EINVAL);
    CHECK(warden_tcp_connect("127.0.0.1:1", 0), WARDEN_EDENIED);
    CHECK(warden_tcp_accept(p, 0), WARDEN_EBADHANDLE);
    CHECK(warden_sock_send(p, "x", 1, 0), WARDEN_EBADHANDLE);
    CHECK(warden_sock_recv(p, buf, 1, 0), WARDEN_EBADHANDLE);
    CHECK(warden_sock_shutdown(p), WARDEN_EBADHANDLE);
    CHECK(warden_sock_addr(p, 0, buf, sizeof buf), WARDEN_EBADHANDLE);
    warden_pollfd fds[1] = {{s, WARDEN_POLL_IN, 0}};
    CHECK(warden_poll(fds, 1, 0), 0);
    fds[0].handle = p;
    CHECK(warden_poll(fds, 1, 0), WARDEN_EBADHANDLE);
    warden_device_info_t info;
    CHECK(warden_device_open("disk0"), WARDEN_EDENIED);
    CHECK(warden_device_info(p, &info), WARDEN_EBADHANDLE);
    CHECK(warden_device_read(p, 0, 1, buf, sizeof buf), WARDEN_EBADHANDLE);
    CHECK(warden_device_write(p, 0, 1, buf, sizeof buf), WARDEN_EBADHANDLE);
    CHECK(warden_device_sync(p), WARDEN_EBADHANDLE);
    printf(failures ? "abi: %d failures\n" : "abi: ok\n", failures);
    return failures;
}
