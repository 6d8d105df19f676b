/* The NFS task: a TCP listener on the address its manifest grants, ONC
 * RPC (RFC 5531) calls in records (each record one or more fragments, a
 * 4-byte header with the last-fragment bit), NFS version 3 and MOUNT
 * version 3 on the one port.
 *
 *   nfs FS ADDR EXPORT [--allow-uid LIST]
 *
 * FS is the file-system task's service (the manifest's `uses`), ADDR the
 * address to listen on (its `listen`), EXPORT the path clients mount.
 * Prints "nfs: serving EXPORT on ADDR" once listening.
 *
 * The export rule: with --allow-uid (uids and ranges, "1000,2000-2999"),
 * every call but NULL must carry AUTH_UNIX credentials whose uid is in
 * LIST; others are denied AUTH_ERROR AUTH_TOOWEAK. Without it, any
 * credentials are taken. AUTH_UNIX credentials that do not decode (a
 * machine name over 255 bytes, more than 16 groups) are AUTH_BADCRED.
 * Uids are not mapped: files belong to whoever the file system says.
 *
 * A hostile client holds its connection and nothing else: a record over
 * MAX_RECORD bytes, or one whose fragments do not add up, closes the
 * connection; a record must arrive whole within RECORD_SECONDS of its
 * first byte, however it trickles in; a connection that has not sent a
 * whole call within QUIET_SECONDS of opening is closed; a reply the
 * client does not read within SEND_SECONDS closes it. At most MAX_CONNS
 * connections are held: a new one past that takes the place of the
 * connection that has waited longest without completing a call (one that
 * never completed any goes first), so connections held open or trickling
 * cannot lock a working client out; and one client address holds at most
 * PER_CLIENT of them (its own are replaced the same way past that), so a
 * single host cannot take every place from the others. Calls that do not decode are answered
 * GARBAGE_ARGS, unknown programs PROG_UNAVAIL, other versions
 * PROG_MISMATCH, credentials or verifiers over 400 bytes AUTH_ERROR
 * (AUTH_BADCRED, AUTH_BADVERF), as RFC 5531 says. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nfs.h"

#define MAX_CONNS 64
#define PER_CLIENT 32
#define MAX_RECORD (256u * 1024u)
#define RECORD_SECONDS 10
#define QUIET_SECONDS 10
#define SEND_SECONDS 10
#define MAX_AUTH 400

const char *export_path;

/* The uids the export allows (ranges lo..hi); `rule_given` 0: any. */
#define MAX_RULES 32
static uint32_t allow_lo[MAX_RULES], allow_hi[MAX_RULES];
static int rules, rule_given;

typedef struct {
    uint8_t *buf;     /* the record being received */
    size_t len;       /* bytes of it so far (headers removed) */
    uint8_t head[4];  /* the fragment header being received */
    size_t head_len;
    size_t frag_left; /* bytes left of the current fragment */
    int last;         /* the current fragment is the record's last */
    int64_t began;    /* when the record's first byte came (0: none yet), s */
    int64_t done;     /* when it last completed a call, or opened, s */
    int proven;       /* it has completed a call */
    uint64_t order;   /* when, among all connections, it last completed a
                         call or opened: the larger, the later */
    char peer[48];    /* the client's address, without its port */
} conn;

static uint64_t next_order;

static warden_pollfd fds[MAX_CONNS + 1];
static conn conns[MAX_CONNS + 1];
static uint8_t reply[MAX_RECORD + 1024];

static int64_t now(void) {
    extern int clock_gettime(int, void *);
    struct { int64_t s; long ns; } ts = {0, 0};
    clock_gettime(1, &ts);
    return ts.s;
}

static int send_all(warden_handle c, const uint8_t *p, size_t n) {
    while (n > 0) {
        int64_t w = warden_sock_send(c, p, n, (int64_t)SEND_SECONDS * 1000000000);
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Whether a call with this credential may go on: 0, or the AUTH_ERROR
 * status to deny it with (1 AUTH_BADCRED, 5 AUTH_TOOWEAK). */
static uint32_t admitted(uint32_t flavor, const uint8_t *cred, uint32_t len, uint32_t proc) {
    uint32_t uid = 0;
    if (flavor == 1) { /* AUTH_UNIX: stamp, machine name, uid, gid, gids */
        xdr_in c = {cred, len, 0, 0};
        uint32_t n;
        x_u32(&c);
        x_opaque(&c, 255, &n);
        uid = x_u32(&c);
        x_u32(&c);
        uint32_t groups = x_u32(&c);
        if (groups > 16) return 1;
        for (uint32_t i = 0; i < groups; i++) x_u32(&c);
        if (c.bad) return 1;
    }
    if (!rule_given || proc == 0) return 0;
    if (flavor != 1) return 5;
    for (int i = 0; i < rules; i++)
        if (uid >= allow_lo[i] && uid <= allow_hi[i]) return 0;
    return 5;
}

/* Reads an --allow-uid LIST ("1000,2000-2999"); -1 if it is not one. */
static int parse_rule(const char *list) {
    rule_given = 1;
    const char *p = list;
    while (*p) {
        char *end;
        unsigned long lo = strtoul(p, &end, 10), hi = lo;
        if (end == p || lo > 0xffffffffUL) return -1;
        p = end;
        if (*p == '-') {
            hi = strtoul(++p, &end, 10);
            if (end == p || hi > 0xffffffffUL || hi < lo) return -1;
            p = end;
        }
        if (rules == MAX_RULES) return -1;
        allow_lo[rules] = (uint32_t)lo;
        allow_hi[rules++] = (uint32_t)hi;
        if (*p == ',') p++;
        else if (*p) return -1;
    }
    return rules ? 0 : -1;
}

/* Answers the RPC call in `rec`: the reply's length in `reply` (after its
 * record header), or 0 to close the connection (not a call). */
static size_t answer(const uint8_t *rec, size_t len) {
    xdr_in x = {rec, len, 0, 0};
    xdr_out o = {reply + 4, sizeof reply - 4, 0, 0};
    uint32_t xid = x_u32(&x), type = x_u32(&x), rpcvers = x_u32(&x);
    uint32_t prog = x_u32(&x), vers = x_u32(&x), proc = x_u32(&x), blen;
    if (x.bad || type != 0) return 0;
    o_u32(&o, xid);
    o_u32(&o, 1); /* REPLY */
    uint32_t flavor = x_u32(&x);
    const uint8_t *cred = x_opaque(&x, MAX_AUTH, &blen); /* credential */
    uint32_t auth = x.bad ? 1 : 0; /* AUTH_BADCRED */
    if (!auth) auth = admitted(flavor, cred, blen, proc);
    x_u32(&x);
    uint32_t vlen;
    x_opaque(&x, MAX_AUTH, &vlen); /* verifier */
    if (!auth && x.bad) auth = 2;  /* AUTH_BADVERF */
    if (auth && rpcvers == 2) {
        o_u32(&o, 1); /* MSG_DENIED */
        o_u32(&o, 1); /* AUTH_ERROR */
        o_u32(&o, auth);
        return o.len;
    }
    if (rpcvers != 2) {
        o_u32(&o, 1); /* MSG_DENIED */
        o_u32(&o, 0); /* RPC_MISMATCH */
        o_u32(&o, 2);
        o_u32(&o, 2);
        return o.len;
    }
    o_u32(&o, 0); /* MSG_ACCEPTED */
    o_u32(&o, 0); /* verifier: AUTH_NONE */
    o_u32(&o, 0);
    size_t status_at = o.len;
    o_u32(&o, 0); /* SUCCESS, unless changed below */
    int known = prog == NFS_PROGRAM || prog == MOUNT_PROGRAM;
    uint32_t accept = !known ? 1 : vers != 3 ? 2 : 0;
    if (!accept) {
        accept = (uint32_t)(prog == NFS_PROGRAM ? nfs3_proc(proc, &x, &o) : mount_proc(proc, &x, &o));
        if (o.full) accept = 5; /* SYSTEM_ERR: the results did not fit */
    }
    if (accept) {
        o.len = status_at;
        o.full = 0;
        o_u32(&o, accept);
        if (accept == 2) {
            o_u32(&o, 3);
            o_u32(&o, 3);
        }
    }
    return o.len;
}

/* Takes `n` received bytes of connection `c`, at time `t`, into its
 * record; answers each record completed. -1 closes it. */
static int take(warden_handle h, conn *c, const uint8_t *p, size_t n, int64_t t) {
    while (n > 0) {
        if (!c->began) c->began = t;
        if (c->head_len < 4) {
            size_t k = 4 - c->head_len < n ? 4 - c->head_len : n;
            memcpy(c->head + c->head_len, p, k);
            c->head_len += k, p += k, n -= k;
            if (c->head_len < 4) return 0;
            uint32_t h32 = (uint32_t)c->head[0] << 24 | (uint32_t)c->head[1] << 16 | (uint32_t)c->head[2] << 8 | c->head[3];
            c->last = h32 >> 31;
            c->frag_left = h32 & 0x7fffffffu;
            if (c->len + c->frag_left > MAX_RECORD) return -1;
        }
        size_t k = c->frag_left < n ? c->frag_left : n;
        memcpy(c->buf + c->len, p, k);
        c->len += k, c->frag_left -= k, p += k, n -= k;
        if (c->frag_left) return 0;
        c->head_len = 0;
        if (!c->last) continue;
        size_t len = answer(c->buf, c->len);
        c->len = 0;
        c->began = 0;
        if (!len) return -1;
        c->proven = 1;
        c->done = t;
        c->order = ++next_order;
        uint32_t mark = 0x80000000u | (uint32_t)len;
        uint8_t m[4] = {(uint8_t)(mark >> 24), (uint8_t)(mark >> 16), (uint8_t)(mark >> 8), (uint8_t)mark};
        memcpy(reply, m, 4);
        if (send_all(h, reply, len + 4) < 0) return -1;
    }
    return 0;
}

static void drop(size_t i, size_t *n) {
    warden_close(fds[i].handle);
    free(conns[i].buf);
    fds[i] = fds[*n - 1];
    conns[i] = conns[*n - 1];
    (*n)--;
}

/* The connection a new one replaces when all are taken (of those from
 * `peer`, if given): of those that never completed a call, the oldest;
 * else the one that has waited longest since its last call. 0: none. */
static size_t victim(size_t n, const char *peer) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++) {
        const conn *a = &conns[i];
        if (peer && strcmp(a->peer, peer) != 0) continue;
        const conn *b = &conns[best];
        if (!best || (a->proven != b->proven ? !a->proven : a->order < b->order)) best = i;
    }
    return best;
}

/* The client address of connection `c`, without its port. */
static void peer_of(warden_handle c, char *out, size_t cap) {
    int32_t len = warden_sock_addr(c, 1, out, cap - 1);
    if (len < 0 || (size_t)len >= cap) len = 0;
    out[len] = 0;
    char *colon = strrchr(out, ':');
    if (colon) *colon = 0;
}

static void accept_all(warden_handle l, size_t *n) {
    warden_handle c;
    while ((c = warden_tcp_accept(l, 0)) >= 0) {
        char peer[48];
        peer_of(c, peer, sizeof peer);
        size_t same = 0;
        for (size_t i = 1; i < *n; i++) same += strcmp(conns[i].peer, peer) == 0;
        if (same >= PER_CLIENT) drop(victim(*n, peer), n);
        else if (*n > MAX_CONNS) drop(victim(*n, NULL), n);
        uint8_t *buf = malloc(MAX_RECORD);
        if (!buf) {
            warden_close(c);
            continue;
        }
        fds[*n] = (warden_pollfd){c, WARDEN_POLL_IN, 0};
        conns[*n] = (conn){buf, 0, {0}, 0, 0, 0, 0, now(), 0, ++next_order, {0}};
        memcpy(conns[*n].peer, peer, sizeof peer);
        (*n)++;
    }
}

/* Whether connection `c` has had its time at `t`: a record begun more
 * than RECORD_SECONDS ago, or no call completed within QUIET_SECONDS of
 * opening. */
static int overdue(const conn *c, int64_t t) {
    if (c->began && t - c->began > RECORD_SECONDS) return 1;
    return !c->proven && !c->began && t - c->done > QUIET_SECONDS;
}

int main(int argc, char **argv) {
    int usage = argc != 4 && argc != 6;
    if (argc == 6 && (strcmp(argv[4], "--allow-uid") != 0 || parse_rule(argv[5]) != 0)) usage = 1;
    if (usage) {
        fprintf(stderr, "usage: nfs FS ADDR EXPORT [--allow-uid UID,FIRST-LAST,...]\n");
        return 2;
    }
    export_path = argv[3];
    if (fsc_init(argv[1]) != 0) {
        fprintf(stderr, "nfs: no file system %s\n", argv[1]);
        return 1;
    }
    warden_handle l = warden_tcp_listen(argv[2]);
    if (l < 0) {
        fprintf(stderr, "nfs: cannot listen on %s: %s\n", argv[2], warden_strerror(l));
        return 1;
    }
    char addr[64] = "";
    warden_sock_addr(l, 0, addr, sizeof addr);
    printf("nfs: serving %s on %s\n", export_path, addr);
    fflush(stdout);
    static uint8_t in[64 * 1024];
    size_t n = 1;
    fds[0] = (warden_pollfd){l, WARDEN_POLL_IN, 0};
    for (;;) {
        if (warden_poll(fds, n, 1000000000) < 0) return 1;
        if (fds[0].revents) accept_all(l, &n);
        int64_t t = now();
        for (size_t i = n; i-- > 1;) {
            if (!fds[i].revents) {
                if (overdue(&conns[i], t)) drop(i, &n);
                continue;
            }
            int64_t got = warden_sock_recv(fds[i].handle, in, sizeof in, 0);
            if (got == WARDEN_ETIMEOUT) continue;
            if (got <= 0 || take(fds[i].handle, &conns[i], in, (size_t)got, t) < 0 ||
                overdue(&conns[i], t))
                drop(i, &n);
        }
    }
}
