//! Executor tests with plain futures (no Wasm): ordering and a stress test
//! of wakes, yields and kills racing on two workers.
use super::*;
use crate::sched::{PolicyKind, TaskSched, Tree};
use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::task::Waker;
use std::task::{Context, Poll};

/// An executor of `workers` workers on a round-robin queue whose finish
/// callback counts the tasks finished.
fn counting_executor(
    workers: usize,
    tokio: &tokio::runtime::Runtime,
) -> (Executor, Arc<AtomicUsize>) {
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let exec = Executor::start(
        Threads::new(workers),
        Box::new(Tree::new(PolicyKind::RoundRobin)),
        tokio.handle().clone(),
        Arc::new(|| {}),
        Box::new(move |_, _| {
            d.fetch_add(1, Ordering::SeqCst);
        }),
    )
    .unwrap();
    (exec, done)
}

/// Spins (holding the thread) for `d` of wall time.
fn spin_for(d: Duration) {
    let t = std::time::Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// A future that yields `yields` times, half of them by waking itself
/// (a slice end) and half by having another thread wake it later (a
/// blocking call), and fails the test if it is ever polled concurrently.
struct Churn {
    yields: u32,
    in_poll: Arc<AtomicBool>,
}

impl Future for Churn {
    type Output = TaskStatus;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<TaskStatus> {
        assert!(
            !self.in_poll.swap(true, Ordering::SeqCst),
            "polled twice at once"
        );
        let r = if self.yields == 0 {
            Poll::Ready(TaskStatus::Exited(0))
        } else {
            self.yields -= 1;
            if self.yields.is_multiple_of(2) {
                cx.waker().wake_by_ref();
            } else {
                let w = cx.waker().clone();
                std::thread::spawn(move || w.wake());
            }
            Poll::Pending
        };
        self.in_poll.store(false, Ordering::SeqCst);
        r
    }
}

/// Many tasks yielding, being woken from other threads, suspended,
/// resumed and killed at random moments: every task finishes exactly once
/// (a lost wake-up would leave one unfinished), none is polled by two
/// workers at once (that panics inside the poll, and the task would end
/// trapped), and the executor ends empty.
#[test]
fn stress_wake_yield_suspend_kill() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let finished = Arc::new(Mutex::new(HashMap::<u64, (u32, bool)>::new()));
    let trapped = Arc::new(Mutex::new(Vec::new()));
    let (f, tr) = (finished.clone(), trapped.clone());
    let exec = Executor::start(
        Threads::new(2),
        Box::new(Tree::new(PolicyKind::RoundRobin)),
        tokio.handle().clone(),
        Arc::new(|| {}),
        Box::new(move |shared, status| {
            let mut m = f.lock().unwrap();
            let e = m.entry(shared.id.0).or_default();
            e.0 += 1;
            e.1 = matches!(status, TaskStatus::Killed(_));
            if let TaskStatus::Trapped(why) = status {
                tr.lock().unwrap().push(why);
            }
        }),
    )
    .unwrap();
    const TASKS: u64 = 400;
    let mut seed = 0x2545F4914F6CDD1Du64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for id in 0..TASKS {
        let shared = Arc::new(TaskShared::new(TaskId(id), format!("t{id}"), None, None));
        let fut = Churn {
            yields: (rand() % 50) as u32,
            in_poll: Arc::new(AtomicBool::new(false)),
        };
        exec.spawn(shared, Box::pin(fut), &TaskSched::default());
        match rand() % 6 {
            0 | 1 => {
                exec.kill(TaskId(rand() % (id + 1)), "random kill");
            }
            2 => {
                exec.suspend(TaskId(rand() % (id + 1)));
            }
            3 | 4 => {
                exec.resume(TaskId(rand() % (id + 1)));
            }
            _ => {}
        }
    }
    // Resume everything still suspended, racing its own wakes and yields.
    for _ in 0..3 {
        for id in 0..TASKS {
            exec.resume(TaskId(id));
        }
        std::thread::yield_now();
    }
    let start = std::time::Instant::now();
    while finished.lock().unwrap().len() < TASKS as usize {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "tasks never finished"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let m = finished.lock().unwrap();
    assert_eq!(*trapped.lock().unwrap(), Vec::<String>::new());
    assert!(m.values().all(|&(n, _)| n == 1), "a task finished twice");
    assert!(m.values().any(|&(_, killed)| killed));
    assert!(m.values().any(|&(_, killed)| !killed));
    assert_eq!(exec.stats().live, 0);
    assert_eq!(exec.stats().queued, 0);
}

/// The round-robin order is what tasks observe: with one worker, tasks
/// that always yield run in turn.
#[test]
fn one_worker_runs_yielding_tasks_in_turn() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let (exec, done) = counting_executor(1, &tokio);
    // Hold the single worker while queueing, so the order is known.
    let gate = Arc::new(Mutex::new(()));
    let g = gate.lock().unwrap();
    let gate2 = gate.clone();
    exec.spawn(
        Arc::new(TaskShared::new(TaskId(100), "gate".into(), None, None)),
        Box::pin(async move {
            drop(gate2.lock().unwrap());
            TaskStatus::Exited(0)
        }),
        &TaskSched::default(),
    );
    for id in 0..3u64 {
        let order = order.clone();
        let mut left = 3;
        exec.spawn(
            Arc::new(TaskShared::new(TaskId(id), format!("t{id}"), None, None)),
            Box::pin(std::future::poll_fn(move |cx| {
                order.lock().unwrap().push(id);
                left -= 1;
                if left == 0 {
                    return Poll::Ready(TaskStatus::Exited(0));
                }
                cx.waker().wake_by_ref();
                Poll::Pending
            })),
            &TaskSched::default(),
        );
    }
    drop(g);
    while done.load(Ordering::SeqCst) < 4 {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 2, 0, 1, 2, 0, 1, 2]);
}

/// A kill of a running task advances the epoch at once, on the killer's
/// thread, so the task meets it at its next epoch check instead of at the
/// timer's next tick; a kill of a queued or blocked task needs no epoch.
#[test]
fn killing_a_running_task_advances_the_epoch_at_once() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let killer = std::thread::current().id();
    let by_killer = Arc::new(AtomicUsize::new(0));
    let b = by_killer.clone();
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let exec = Executor::start(
        Threads::new(1),
        Box::new(Tree::new(PolicyKind::RoundRobin)),
        tokio.handle().clone(),
        Arc::new(move || {
            if std::thread::current().id() == killer {
                b.fetch_add(1, Ordering::SeqCst);
            }
        }),
        Box::new(move |_, _| {
            d.fetch_add(1, Ordering::SeqCst);
        }),
    )
    .unwrap();
    let running = Arc::new(AtomicBool::new(false));
    let shared = Arc::new(TaskShared::new(TaskId(1), "spin".into(), None, None));
    let (r, s) = (running.clone(), shared.clone());
    exec.spawn(
        shared,
        Box::pin(std::future::poll_fn(move |_| {
            r.store(true, Ordering::SeqCst);
            while !s.kill_requested() {
                std::hint::spin_loop();
            }
            Poll::Pending
        })),
        &TaskSched::default(),
    );
    while !running.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    assert!(exec.kill(TaskId(1), "test"));
    assert_eq!(
        by_killer.load(Ordering::SeqCst),
        1,
        "epoch advanced by the kill"
    );
    while done.load(Ordering::SeqCst) < 1 {
        std::thread::yield_now();
    }
    // Blocked: finished by the killer itself, with no epoch needed.
    exec.spawn(
        Arc::new(TaskShared::new(TaskId(2), "idle".into(), None, None)),
        Box::pin(std::future::pending()),
        &TaskSched::default(),
    );
    while exec.task_state(TaskId(2)) != Some("blocked") {
        std::thread::yield_now();
    }
    assert!(exec.kill(TaskId(2), "test"));
    assert_eq!(done.load(Ordering::SeqCst), 2);
    assert_eq!(by_killer.load(Ordering::SeqCst), 1);
}

/// A task that waits for a message in a shared box, as a server waits in
/// `recv`: it records the thread that polls it and spins `burn` on each
/// message before waiting again.
struct Server {
    inbox: ServerInbox,
    threads: ServerThreads,
    burn: Duration,
}

/// A [`Server`]'s next message (0 ends it) and its waker while it waits.
type ServerInbox = Arc<Mutex<(Option<u32>, Option<Waker>)>>;
/// The threads a [`Server`] was polled on, in order.
type ServerThreads = Arc<Mutex<Vec<std::thread::ThreadId>>>;

/// Spawns a [`Server`] as task `shared`, spinning `burn` per message.
fn spawn_server(
    exec: &Executor,
    shared: Arc<TaskShared>,
    burn: Duration,
    sched: &TaskSched,
) -> (ServerInbox, ServerThreads) {
    let inbox = ServerInbox::default();
    let threads = ServerThreads::default();
    let server = Server {
        inbox: inbox.clone(),
        threads: threads.clone(),
        burn,
    };
    exec.spawn(shared, Box::pin(server), sched);
    (inbox, threads)
}

impl Future for Server {
    type Output = TaskStatus;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<TaskStatus> {
        let mut inbox = self.inbox.lock().unwrap();
        match inbox.0.take() {
            Some(0) => Poll::Ready(TaskStatus::Exited(0)),
            Some(_) => {
                self.threads
                    .lock()
                    .unwrap()
                    .push(std::thread::current().id());
                spin_for(self.burn);
                inbox.1 = Some(cx.waker().clone());
                Poll::Pending
            }
            None => {
                inbox.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Host hand-off: a thread that is no worker gives a message to a waiting
/// server while a worker idles, and runs the server itself: on its own
/// thread, counted as a host poll, the server charged the wall time it
/// ran. With no worker idle (the only one held by another task), the
/// server is woken as usual and runs on that worker once it is free.
#[test]
fn host_hand_off_runs_a_waiting_server_on_the_calling_thread() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let (exec, done) = counting_executor(1, &tokio);
    let shared = Arc::new(TaskShared::new(TaskId(1), "server".into(), None, None));
    let (inbox, threads) = spawn_server(
        &exec,
        shared.clone(),
        Duration::from_millis(2),
        &TaskSched::default(),
    );
    let send = |msg: u32| {
        let waker = {
            let mut inbox = inbox.lock().unwrap();
            inbox.0 = Some(msg);
            inbox.1.take()
        };
        host_hand_off(waker.expect("the server waits"));
    };
    let wait_idle = || {
        while exec.task_state(TaskId(1)) != Some("blocked")
            || exec.shared.looking.load(Ordering::SeqCst) == 0
        {
            std::thread::yield_now();
        }
    };
    wait_idle();
    for _ in 0..3 {
        // The thread's own work between the server's slices (50 ms of
        // CPU) is not the server's.
        let t = crate::clock::thread_cpu_ns();
        while crate::clock::thread_cpu_ns() - t < 50_000_000 {
            std::hint::spin_loop();
        }
        send(1);
        wait_idle();
    }
    let me = std::thread::current().id();
    assert_eq!(*threads.lock().unwrap(), [me, me, me]);
    assert_eq!(exec.stats().host_polls, 3);
    let charged = shared.cpu.charged_ns();
    // Wall time: 6 ms, and whatever the system took from the polls (a
    // loaded machine); not the thread's own 100 ms and more.
    assert!(
        (6_000_000..60_000_000).contains(&charged),
        "charged {charged} ns for 6 ms"
    );

    // The only worker is busy: the message wakes the server, which runs
    // on the worker after the other task.
    let release = Arc::new(AtomicBool::new(false));
    let (r, started) = (release.clone(), Arc::new(AtomicBool::new(false)));
    let s = started.clone();
    exec.spawn(
        Arc::new(TaskShared::new(TaskId(2), "hog".into(), None, None)),
        Box::pin(std::future::poll_fn(move |_| {
            s.store(true, Ordering::SeqCst);
            while !r.load(Ordering::SeqCst) {
                std::hint::spin_loop();
            }
            Poll::Ready(TaskStatus::Exited(0))
        })),
        &TaskSched::default(),
    );
    while !started.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    send(1);
    assert_eq!(exec.stats().host_polls, 3, "no worker was idle");
    release.store(true, Ordering::SeqCst);
    wait_idle();
    let threads = threads.lock().unwrap();
    assert_eq!(threads.len(), 4);
    assert_ne!(threads[3], me);
    drop(threads);
    send(0);
    while done.load(Ordering::SeqCst) < 2 {
        std::thread::yield_now();
    }
}

/// A capped task may be held back while workers idle, so a host thread
/// never runs it: its call wakes it into the run queue, as usual.
#[test]
fn host_hand_off_leaves_a_capped_server_to_the_run_queue() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let (exec, _) = counting_executor(1, &tokio);
    let sched = TaskSched {
        cap: Some(crate::sched::Cap::new(0.5, 100_000_000)),
        ..TaskSched::default()
    };
    let (inbox, threads) = spawn_server(
        &exec,
        Arc::new(TaskShared::new(TaskId(1), "capped".into(), None, None)),
        Duration::ZERO,
        &sched,
    );
    let waiting = || {
        exec.task_state(TaskId(1)) == Some("blocked")
            && exec.shared.looking.load(Ordering::SeqCst) > 0
            && inbox.lock().unwrap().1.is_some()
    };
    while !waiting() {
        std::thread::yield_now();
    }
    let waker = {
        let mut inbox = inbox.lock().unwrap();
        inbox.0 = Some(1);
        inbox.1.take().unwrap()
    };
    host_hand_off(waker);
    while threads.lock().unwrap().is_empty() {
        std::thread::yield_now();
    }
    assert_ne!(threads.lock().unwrap()[0], std::thread::current().id());
    assert_eq!(exec.stats().host_polls, 0);
    exec.kill(TaskId(1), "done");
}

/// A server for the stress test: takes every message in its inbox per
/// poll, counting them, and fails the test if polled twice at once.
struct Inbox {
    queue: Mutex<(std::collections::VecDeque<u32>, Option<Waker>)>,
    taken: AtomicU64,
    in_poll: AtomicBool,
}

struct Drain(Arc<Inbox>);

impl Future for Drain {
    type Output = TaskStatus;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<TaskStatus> {
        assert!(
            !self.0.in_poll.swap(true, Ordering::SeqCst),
            "polled twice at once"
        );
        let mut q = self.0.queue.lock().unwrap();
        let mut end = false;
        while let Some(m) = q.0.pop_front() {
            end |= m == 0;
            if m != 0 {
                self.0.taken.fetch_add(1, Ordering::SeqCst);
            }
        }
        q.1 = Some(cx.waker().clone());
        drop(q);
        self.0.in_poll.store(false, Ordering::SeqCst);
        if end {
            Poll::Ready(TaskStatus::Exited(0))
        } else {
            Poll::Pending
        }
    }
}

/// Host threads giving messages to servers at random, half of them by
/// host hand-off and half by a plain wake, racing each other and the
/// workers: every message is taken exactly once (a lost wake-up would
/// leave one untaken), no server is polled on two threads at once, and
/// every server ends.
#[test]
fn stress_host_hand_offs_race_workers_and_each_other() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let exec = Arc::new(
        Executor::start(
            Threads::new(2),
            Box::new(Tree::new(PolicyKind::RoundRobin)),
            tokio.handle().clone(),
            Arc::new(|| {}),
            Box::new(move |_, status| {
                assert!(matches!(status, TaskStatus::Exited(0)), "{status:?}");
                d.fetch_add(1, Ordering::SeqCst);
            }),
        )
        .unwrap(),
    );
    const SERVERS: u64 = 8;
    const THREADS: u64 = 4;
    const MESSAGES: u64 = 5_000;
    let inboxes: Vec<Arc<Inbox>> = (0..SERVERS)
        .map(|id| {
            let inbox = Arc::new(Inbox {
                queue: Mutex::new((Default::default(), None)),
                taken: AtomicU64::new(0),
                in_poll: AtomicBool::new(false),
            });
            exec.spawn(
                Arc::new(TaskShared::new(TaskId(id), format!("s{id}"), None, None)),
                Box::pin(Drain(inbox.clone())),
                &TaskSched::default(),
            );
            inbox
        })
        .collect();
    for id in 0..SERVERS {
        while exec.task_state(TaskId(id)) != Some("blocked") {
            std::thread::yield_now();
        }
    }
    let send = |inbox: &Inbox, m: u32, by_hand_off: bool| {
        let waker = {
            let mut q = inbox.queue.lock().unwrap();
            q.0.push_back(m);
            q.1.take()
        };
        match waker {
            Some(w) if by_hand_off => host_hand_off(w),
            Some(w) => w.wake(),
            None => {}
        }
    };
    // Short tasks keep the workers busy part of the time, so that some
    // hand-offs find no idle worker and wake the server instead.
    let sending = AtomicBool::new(true);
    let mut busy = 0u64;
    std::thread::scope(|s| {
        s.spawn(|| {
            while sending.load(Ordering::SeqCst) {
                busy += 1;
                exec.spawn(
                    Arc::new(TaskShared::new(
                        TaskId(1000 + busy),
                        "busy".into(),
                        None,
                        None,
                    )),
                    Box::pin(std::future::poll_fn(|_| {
                        spin_for(Duration::from_micros(30));
                        Poll::Ready(TaskStatus::Exited(0))
                    })),
                    &TaskSched::default(),
                );
                spin_for(Duration::from_micros(60));
            }
        });
        let senders: Vec<_> = (0..THREADS)
            .map(|t| {
                let inboxes = &inboxes;
                s.spawn(move || {
                    let mut seed = 0x9E3779B97F4A7C15u64 ^ (t + 1);
                    for _ in 0..MESSAGES {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        let inbox = &inboxes[(seed % SERVERS) as usize];
                        send(inbox, 1, seed & 0x100 != 0);
                        for _ in 0..(seed >> 60) * 64 {
                            std::hint::spin_loop();
                        }
                    }
                })
            })
            .collect();
        for sender in senders {
            sender.join().unwrap();
        }
        sending.store(false, Ordering::SeqCst);
    });
    let start = std::time::Instant::now();
    let taken = || {
        inboxes
            .iter()
            .map(|i| i.taken.load(Ordering::SeqCst))
            .sum::<u64>()
    };
    while taken() < THREADS * MESSAGES {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{} of {} messages taken",
            taken(),
            THREADS * MESSAGES
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(taken(), THREADS * MESSAGES);
    for inbox in &inboxes {
        send(inbox, 0, true);
    }
    while done.load(Ordering::SeqCst) < (SERVERS + busy) as usize {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "servers never ended"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // Both ways were taken: servers ran on the senders' threads, and on
    // workers after their first poll.
    let stats = exec.stats();
    assert!(stats.host_polls > 0, "{stats:?}");
    assert!(
        stats.polls - stats.host_polls > SERVERS + busy,
        "{stats:?}, {busy} busy tasks"
    );
    assert_eq!(stats.live, 0);
}

/// A task blocking its worker's thread inside a poll (as a read of a FIFO
/// on the worker would) does not stall the tasks queued behind it: after
/// [`spare::STUCK`] ticks a spare thread runs them, and it ends once the
/// worker is free again.
#[test]
fn a_spare_runs_the_queue_while_the_only_worker_is_stuck() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let (exec, done) = counting_executor(1, &tokio);
    let (release, blocked) = std::sync::mpsc::channel::<()>();
    let (entered, inside) = std::sync::mpsc::channel::<()>();
    exec.spawn(
        Arc::new(TaskShared::new(TaskId(1), "stuck".into(), None, None)),
        Box::pin(async move {
            entered.send(()).unwrap();
            blocked.recv().unwrap();
            TaskStatus::Exited(0)
        }),
        &TaskSched::default(),
    );
    inside.recv().unwrap();
    for id in 2..12u64 {
        let fut = Churn {
            yields: 4,
            in_poll: Arc::new(AtomicBool::new(false)),
        };
        let shared = Arc::new(TaskShared::new(TaskId(id), format!("t{id}"), None, None));
        exec.spawn(shared, Box::pin(fut), &TaskSched::default());
    }
    let start = std::time::Instant::now();
    while done.load(Ordering::SeqCst) < 10 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "tasks behind a stuck worker never ran ({} done, {} spares)",
            done.load(Ordering::SeqCst),
            exec.stats().spares
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(exec.stats().spares, 1, "one spare stands in");
    release.send(()).unwrap();
    while done.load(Ordering::SeqCst) < 11 || exec.stats().spares != 0 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the spare never ended"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}
