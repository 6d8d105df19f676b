//! One request on one route: admitted within the route's limits, then
//! answered by a fresh task (WAGI) or by a servlet's service, with every
//! fault turned into an HTTP answer.

mod component;
mod module;
mod running;
mod served;
mod servlet;
mod streamed;
mod traced;

pub(crate) use module::RouteModule;
use running::Running;

use traced::{Traced, REQUEST_TRACE};

use super::cgi;
use super::config::{Handler, RouteSpec};
use crate::ipc::client::HostClient;
use crate::runtime::RouteStats;
use crate::runtime::{Error, Runtime};
use crate::serving::budget;
use crate::serving::conn::respond;
use crate::serving::conn::RequestBody;
use crate::task::{Output, TaskStatus};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::http::request::Parts;
use hyper::{Request, Response};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

/// Time allowed for a request body to arrive.
const BODY_TIMEOUT: Duration = Duration::from_secs(10);

type Answer = Response<Full<Bytes>>;

/// A route as the server keeps it.
pub struct Route {
    pub spec: RouteSpec,
    pub stats: Arc<RouteStats>,
    name: Arc<str>,
    slots: Arc<tokio::sync::Semaphore>,
    /// The servlet route's client identity.
    client: Option<HostClient>,
    /// Numbers the route's per-request tasks.
    seq: AtomicU64,
    /// A per-request route's task template, as a live upgrade last set it.
    module: Option<RouteModule>,
}

/// Decrements a gauge when dropped.
struct Gauge<'a>(&'a std::sync::atomic::AtomicI64);

impl<'a> Gauge<'a> {
    fn up(g: &'a std::sync::atomic::AtomicI64) -> Self {
        g.fetch_add(1, Ordering::Relaxed);
        Gauge(g)
    }
}

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn text(status: u16, why: impl std::fmt::Display) -> Answer {
    respond(
        status,
        "text/plain; charset=utf-8",
        format!("{why}\n"),
        false,
    )
}

impl Route {
    pub fn new(rt: &Runtime, spec: RouteSpec, server: &str) -> Route {
        let kind = match spec.handler {
            Handler::Module(_) => "module",
            Handler::Service(_) => "service",
            Handler::Component(_) => "component",
        };
        let stats = Arc::new(RouteStats::new(&spec.name, &spec.path, server, kind));
        rt.register_route(stats.clone());
        let client = matches!(spec.handler, Handler::Service(_))
            .then(|| rt.host_client(format!("http {}", spec.name)));
        let module = match &spec.handler {
            Handler::Module(t) | Handler::Component(t) => Some(RouteModule::new(t)),
            Handler::Service(_) => None,
        };
        Route {
            module,
            name: spec.name.as_str().into(),
            slots: Arc::new(tokio::sync::Semaphore::new(spec.max_concurrent)),
            stats,
            client,
            seq: AtomicU64::new(0),
            spec,
        }
    }

    /// The route's per-request template now (see [`RouteModule`]).
    fn template(&self) -> Arc<crate::task::TaskSpec> {
        self.module.as_ref().expect("a per-request route").get()
    }

    /// Its template's handle, for a per-request route.
    pub(crate) fn module(&self) -> Option<&RouteModule> {
        self.module.as_ref()
    }

    /// Answers `req` and counts it.
    pub async fn answer(
        &self,
        rt: &Runtime,
        req: Request<RequestBody>,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Answer {
        let start = Instant::now();
        let Some(spans) = rt.spans() else {
            let answer = self.admit(rt, req, local, remote, start).await;
            self.stats.record(answer.status().as_u16(), start.elapsed());
            return answer;
        };
        let traced = Traced::begin(&req, &self.spec.path, remote);
        let admitted = self.admit(rt, req, local, remote, start);
        let scope = Some((traced.at, spans.clone()));
        let mut answer = REQUEST_TRACE.scope(scope, admitted).await;
        self.stats.record(answer.status().as_u16(), start.elapsed());
        traced.end(spans, &mut answer, &self.name);
        answer
    }

    async fn admit(
        &self,
        rt: &Runtime,
        req: Request<RequestBody>,
        local: SocketAddr,
        remote: SocketAddr,
        start: Instant,
    ) -> Answer {
        let (parts, body) = req.into_parts();
        let held = body.held();
        let body = match self.body(&parts, body).await {
            Ok(b) => b,
            Err(answer) => return answer,
        };
        // A servlet that gets its body whole gets it before it holds a
        // slot, as a slow client must not hold one.
        let body = match &self.spec.handler {
            Handler::Service(name) if !self.servlet_streams(name) => {
                match self.whole_body(body).await {
                    Ok(b) => streamed::Input::Whole(b),
                    Err(answer) => return answer,
                }
            }
            _ => body,
        };
        let deadline = start + self.spec.timeout;
        let (slot, body) = match self.slot_reading(body, deadline).await {
            Ok(x) => x,
            Err(answer) => return answer,
        };
        let _in_flight = Gauge::up(&self.stats.in_flight);
        match &self.spec.handler {
            Handler::Module(template) => {
                let meta = cgi::Meta {
                    parts: &parts,
                    route: self.spec.prefix(),
                    body_len: self.length_of(&parts, &body),
                    local,
                    remote,
                };
                let env = cgi::environment(&meta, &template.env);
                self.per_request(rt, env, body, held, deadline, slot).await
            }
            Handler::Service(name) => match self.component_servlet(name) {
                Some(servlet) => {
                    let request = component::request(parts, self.upload(body), local);
                    self.served((name, servlet), request, deadline, slot).await
                }
                None => self.servlet(name, &parts, body, deadline, held, slot).await,
            },
            Handler::Component(_) => {
                let body = self.upload(body);
                let request = component::request(parts, body, local);
                let template = self.template();
                self.component(rt, &template, request, deadline, slot).await
            }
        }
    }

    /// A handler slot, by `deadline`, or the 503 without one.
    async fn slot(&self, deadline: Instant) -> Result<OwnedSemaphorePermit, Answer> {
        if let Ok(p) = self.slots.clone().try_acquire_owned() {
            return Ok(p);
        }
        if self.stats.queued.load(Ordering::Relaxed) >= self.spec.max_queue as i64 {
            return Err(text(
                503,
                "busy: every handler slot is taken and the queue is full",
            ));
        }
        let _queued = Gauge::up(&self.stats.queued);
        match tokio::time::timeout_at(deadline, self.slots.clone().acquire_owned()).await {
            Ok(Ok(p)) => Ok(p),
            _ => Err(text(503, "busy: no handler slot came free in time")),
        }
    }

    /// A handler slot for a request with `body`; a body still arriving
    /// goes on being read (and charged) while the request waits, so that
    /// what is queued is held within the budgets as a whole body is,
    /// never in the protocol's buffers.
    async fn slot_reading(
        &self,
        body: streamed::Input,
        deadline: Instant,
    ) -> Result<(OwnedSemaphorePermit, streamed::Input), Answer> {
        let streamed::Input::Partial(first, mut rest) = body else {
            return Ok((self.slot(deadline).await?, body));
        };
        let mut have = first.to_vec();
        let limit = usize::try_from(self.spec.max_body).unwrap_or(usize::MAX);
        let read = tokio::select! {
            biased;
            slot = self.slot(deadline) => Err(slot?),
            read = collect_into(&mut have, &mut rest, limit, usize::MAX) => Ok(read),
        };
        match read {
            Err(slot) => Ok((slot, streamed::Input::Partial(have.into(), rest))),
            Ok(Ok(_)) => Ok((
                self.slot(deadline).await?,
                streamed::Input::Whole(have.into()),
            )),
            Ok(Err(why)) => Err(self.unread(why)),
        }
    }

    /// The answer for a body that could not be read (`Some`: over a
    /// budget; `None`: over `max_body` or broken off).
    fn unread(&self, why: Option<budget::Full>) -> Answer {
        match why {
            Some(full) => respond(503, "text/plain", format!("busy: {full}\n"), true),
            None => respond(
                413,
                "text/plain",
                format!("request body over {} bytes\n", self.spec.max_body),
                true,
            ),
        }
    }

    /// The CGI `CONTENT_LENGTH` of a request with `body`: its length if
    /// read whole, else the length the client declared (if it did).
    fn length_of(&self, parts: &Parts, body: &streamed::Input) -> Option<u64> {
        match body {
            streamed::Input::Whole(b) => Some(b.len() as u64),
            streamed::Input::Partial(..) => declared_length(parts),
        }
    }

    /// `body` as a handler reads it: as it arrives, within `max_body`.
    fn upload(&self, body: streamed::Input) -> crate::pipe::Upload {
        match body {
            streamed::Input::Whole(b) => {
                Box::pin(Full::new(b).map_err(|never: std::convert::Infallible| match never {}))
            }
            streamed::Input::Partial(first, rest) => {
                streamed::upload(first, rest, self.spec.max_body)
            }
        }
    }

    /// The request's body, within the route's size and time limits: read
    /// whole, or its first [`streamed::STREAM_AT`] bytes and the rest to
    /// come.
    async fn body(&self, parts: &Parts, mut body: RequestBody) -> Result<streamed::Input, Answer> {
        let max = self.spec.max_body;
        if declared_length(parts).is_some_and(|n| n > max) {
            return Err(self.unread(None));
        }
        let limit = usize::try_from(max).unwrap_or(usize::MAX);
        // A body that may be longer than its first bytes is streamed.
        let enough = match limit > streamed::STREAM_AT {
            true => streamed::STREAM_AT,
            false => usize::MAX,
        };
        match tokio::time::timeout(BODY_TIMEOUT, collect(&mut body, limit, enough)).await {
            Ok(Ok((bytes, true))) => Ok(streamed::Input::Whole(bytes)),
            Ok(Ok((bytes, false))) => Ok(streamed::Input::Partial(bytes, body)),
            Ok(Err(why)) => Err(self.unread(why)),
            Err(_) => Err(respond(
                408,
                "text/plain",
                "request body not received in time\n",
                true,
            )),
        }
    }

    /// The next per-request task of `template`: numbered, labelled
    /// with the route.
    fn numbered(&self, template: &crate::task::TaskSpec) -> crate::task::TaskSpec {
        let mut spec = template.clone();
        spec.trace = REQUEST_TRACE
            .try_with(|t| t.as_ref().map(|(at, _)| *at))
            .ok()
            .flatten();
        spec.name = format!(
            "{}#{}",
            self.name,
            self.seq.fetch_add(1, Ordering::Relaxed) + 1
        );
        spec.label = Some(self.name.clone());
        spec
    }

    /// The next per-request task: the route's template, numbered, with
    /// `body` as its stdin and its stdout streamed into `out`.
    fn task_spec(
        &self,
        body: streamed::Input,
        out: crate::pipe::PipeWriter,
    ) -> crate::task::TaskSpec {
        let mut spec = self.numbered(&self.template());
        match body {
            streamed::Input::Whole(b) => spec.stdio.stdin_bytes = Some(b),
            partial => {
                let upload = self.upload(partial);
                spec.stdio.stdin_stream = Some(crate::pipe::StreamedInput::new(upload));
            }
        }
        spec.stdio.stdout = Output::Stream(out);
        spec
    }

    /// WAGI: a fresh task from the route's module answers on stdout (see
    /// `streamed`).
    async fn per_request(
        &self,
        rt: &Runtime,
        env: crate::host::Strings,
        body: streamed::Input,
        held: Option<Arc<budget::Held>>,
        deadline: Instant,
        slot: OwnedSemaphorePermit,
    ) -> Answer {
        let meter = held.map(|h| h as Arc<dyn crate::pipe::Meter>);
        let limit = self.spec.max_response as u64;
        let (out, mut pipe) = crate::pipe::pipe(streamed::WINDOW, limit, meter);
        let spec = self.task_spec(body, out);
        let (id, mut ended, done) = match rt.spawn_ending(&spec, env) {
            Ok(x) => x,
            Err(e) => return refused(e),
        };
        let mut running = Running::new(rt, id, done, slot);
        // Within its first moments, the handler is heard from only when it
        // ends or fills its pipe: most end, and are answered whole.
        let mut timer = Box::pin(tokio::time::sleep_until(
            deadline.min(Instant::now() + streamed::GRACE),
        ));
        let first = tokio::select! {
            biased;
            status = running.ending(&mut ended) => Some(status),
            () = std::future::poll_fn(|cx| pipe.poll_full(cx)) => None,
            () = &mut timer => None,
        };
        if let Some(status) = first {
            return self.whole(status, Vec::new(), &mut pipe, &mut running);
        }
        // Still going: its answer streams once its head is complete.
        pipe.eager();
        timer.as_mut().reset(deadline);
        let mut head = Vec::new();
        let second = tokio::select! {
            biased;
            status = running.ending(&mut ended) => Ok(status),
            read = streamed::read_head(&mut pipe, &mut head) => Err(read),
            () = &mut timer => {
                running.end("over its route's timeout").await;
                return text(504, format!("handler over its {:?} timeout", self.spec.timeout));
            }
        };
        match second {
            Ok(status) => self.whole(status, head, &mut pipe, &mut running),
            Err(Err(fault)) => {
                running.end("its response stream failed").await;
                self.faulted(fault)
            }
            Err(Ok(())) => match ended.try_recv() {
                Ok(status) => self.whole(Some(status), head, &mut pipe, &mut running),
                Err(_) => self.streaming(head, pipe, running, ended, deadline),
            },
        }
    }

    /// The whole answer of a handler that ended as `status` (`None`: the
    /// runtime dropped it), having written `head` and what `pipe` holds.
    fn whole(
        &self,
        status: Option<TaskStatus>,
        head: Vec<u8>,
        pipe: &mut crate::pipe::PipeReader,
        running: &mut Running,
    ) -> Answer {
        running.set_ended();
        let Some(status) = status else {
            return text(503, "the runtime is stopping");
        };
        let rest = match pipe.take_all() {
            Ok(rest) => rest,
            Err(fault) => return self.faulted(fault),
        };
        if let Some(fault) = fault(&status) {
            return fault;
        }
        if head.is_empty() {
            return cgi_answer(rest).unwrap_or_else(|malformed| malformed);
        }
        let mut out = head;
        out.extend_from_slice(&rest);
        from_cgi(out)
    }

    /// The answer of a handler still running once its head is read: the
    /// head and what came with it, the rest streamed.
    fn streaming(
        &self,
        head: Vec<u8>,
        pipe: crate::pipe::PipeReader,
        running: Running,
        ended: tokio::sync::oneshot::Receiver<TaskStatus>,
        deadline: Instant,
    ) -> Answer {
        match cgi_answer(head.into()) {
            Ok(answer) => {
                let tail = streamed::Tail::new(pipe, running, ended, deadline);
                streamed::with_tail(answer, tail)
            }
            // Dropping `running` kills the task.
            Err(malformed) => malformed,
        }
    }

    /// The answer for a response stream that failed before its head was
    /// out.
    fn faulted(&self, fault: crate::pipe::Fault) -> Answer {
        match fault {
            crate::pipe::Fault::TooLong(_) => self.over_max_response(),
            crate::pipe::Fault::Budget(why) => text(503, format!("busy: {why}")),
        }
    }

    /// The 502 for a response over `max_response`.
    fn over_max_response(&self) -> Answer {
        text(
            502,
            format!("handler's response over {} bytes", self.spec.max_response),
        )
    }
}

/// The answer for a per-request task that ended as `status`, unless it
/// exited 0: a handler's fault.
fn fault(status: &TaskStatus) -> Option<Answer> {
    Some(match status {
        TaskStatus::Exited(0) => return None,
        TaskStatus::Exited(code) => text(500, format!("handler exited with code {code}")),
        TaskStatus::Killed(r) if r.contains("memory limit") => {
            text(500, format!("handler killed: {r}"))
        }
        TaskStatus::Killed(r) => text(503, format!("handler killed: {r}")),
        TaskStatus::Trapped(r) => text(500, format!("handler failed: {r}")),
    })
}

/// The answer when a per-request task could not be spawned: 503 when
/// the runtime is full, else 500.
fn refused(e: Error) -> Answer {
    match e {
        e @ (Error::Full(_) | Error::Mappings(_) | Error::Memory(_)) => text(503, e),
        e => text(500, e),
    }
}

/// A body's bytes, at most `limit` of them, in one buffer of their own:
/// each frame is copied and let go at once, so the protocol's read
/// buffers it was cut from are freed as the body arrives (and no second
/// copy joins the frames at the end). `Err(Some)` if a frame did not fit
/// the request's budget, `Err(None)` if the body is over `limit` or broke
/// off. (Reserving the declared length up front measured worse: the
/// host's peak RSS under a flood of bodies refused half way rose by a
/// third.)
///
/// Reading stops early once `enough` bytes are in (the rest is to be
/// streamed): the bytes, and whether the body ended.
async fn collect(
    body: &mut RequestBody,
    limit: usize,
    enough: usize,
) -> Result<(Bytes, bool), Option<budget::Full>> {
    let mut out = Vec::new();
    let ended = collect_into(&mut out, body, limit, enough).await?;
    Ok((Bytes::from(out), ended))
}

/// As `collect`, into `out` (which holds all that was read even if the
/// future is dropped): whether the body ended.
async fn collect_into(
    out: &mut Vec<u8>,
    body: &mut RequestBody,
    limit: usize,
    enough: usize,
) -> Result<bool, Option<budget::Full>> {
    while out.len() < enough {
        let Some(frame) = body.frame().await else {
            return Ok(true);
        };
        let frame = frame.map_err(|e| e.downcast_ref::<budget::Full>().copied())?;
        if let Some(data) = frame.data_ref() {
            if out.len() + data.len() > limit {
                return Err(None);
            }
            out.extend_from_slice(data);
        }
    }
    Ok(hyper::body::Body::is_end_stream(body))
}

/// The body length a request's head declares.
fn declared_length(parts: &Parts) -> Option<u64> {
    parts
        .headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
}

/// The HTTP answer a CGI response stands for (502 if malformed).
fn from_cgi(out: Vec<u8>) -> Answer {
    cgi_answer(out.into()).unwrap_or_else(|malformed| malformed)
}

/// The HTTP answer a CGI response stands for, or the 502 if malformed.
fn cgi_answer(out: Bytes) -> Result<Answer, Answer> {
    let parsed = match cgi::parse(&out) {
        Ok(p) => p,
        Err(why) => {
            return Err(text(
                502,
                format!("malformed response from the handler: {why}"),
            ))
        }
    };
    let body = out.slice(parsed.body_at..);
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = parsed.status;
    let headers = r.headers_mut();
    for (name, value) in parsed.headers {
        headers.append(name, value);
    }
    Ok(r)
}
