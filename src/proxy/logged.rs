//! Access-log bookkeeping that follows a request to its very end: the line is written
//! when the response body has been sent (or abandoned), with the bytes actually sent.
//! A request dropped before it has a response (the client went away) is logged as 499.

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::HOST;
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};

use super::explain::Explain;
use super::forward::retry::Failed;
use crate::trace::Traced;
use super::request_id::RequestId;
use crate::limit::keys::Keys;
use crate::limit::outcome::{InFlight, Outcome};
use crate::limit::rule::LimitRule;
use crate::log::{AccessLog, Captured, Logs, Record};
use crate::metrics::cells::Aligned;
use crate::metrics::{LocationCell, LocationStats};
use crate::upstream::{Lease, ResponseBody};
use crate::wire::body::BodyError;

/// nginx's status for "client closed the connection before the response".
const CLIENT_CLOSED: u16 = 499;

/// nginx's status for "closed without an answer" (`return 444`).
const UNANSWERED: u16 = 444;

/// A log line being filled in. Boxed so the request future stays small.
struct Entry {
    log: Arc<AccessLog>,
    record: Box<Record>,
}

impl Entry {
    fn write(self, (head_bytes, body_bytes): (u64, u64), request_time: Duration) {
        let mut record = self.record;
        record.head_bytes = head_bytes;
        record.body_bytes = body_bytes;
        record.request_time = request_time;
        self.log.write(&record);
    }
}

/// The log line and counts of a request that has no response yet.
pub(super) struct Pending<'a> {
    /// Its line, when any log writes one.
    record: Option<Box<Record>>,
    /// Where its line goes: `[log]`'s until a site or location says otherwise.
    log: Option<&'a Arc<AccessLog>>,
    /// A log writes `$limit_key`: the deciding key is kept as text.
    limit_key: bool,
    /// In-flight counts of `concurrency` zones, handed on to the response body.
    in_flight: Vec<InFlight>,
    /// Where the request is counted: its location's, once routed.
    stats: &'a LocationStats,
    worker: usize,
    start: Instant,
    /// A response was made: the response body counts and logs the request.
    answered: bool,
    /// The request asked why (`[admin] explain`): what decided, for its answer's header.
    explain: Option<Box<Explain>>,
    /// The request's span, when it is sampled (`[trace]`).
    traced: Option<Box<Traced>>,
}

/// What follows a request to the end of its answer, besides its counts: its log line,
/// whether it asked why (`[admin] explain`), its span.
pub(super) struct Followers<'a> {
    pub logs: &'a Logs,
    pub explain: bool,
    pub traced: Option<Box<Traced>>,
}

impl super::Pipeline {
    /// What follows `req` (from `client`, arrived `now`): its log line, and, before
    /// anything reads its headers, whether it asks why (the token never forwarded nor
    /// logged) and whether its trace is kept (its `traceparent` then names its span).
    pub(super) fn followers<B>(&self, req: &mut Request<B>, client: IpAddr, now: Instant) -> Followers<'_> {
        let explain = super::explain::asked(req, self.explain.as_ref());
        let traced = self.tracer.as_ref().and_then(|tracer| {
            let span = tracer.begin(req, client, &mut super::request_id::next)?;
            Some(Box::new(Traced::new(Arc::clone(tracer), span, now)))
        });
        Followers {
            logs: &self.logs,
            explain,
            traced,
        }
    }
}

impl<'a> Pending<'a> {
    /// `start` is when the request arrived (`$request_time` counts from it); the
    /// request is counted in `stats` until [`Pending::route`] says otherwise.
    pub(super) fn new<B>(
        Followers { logs, explain, traced }: Followers<'a>,
        req: &Request<B>,
        (client, conn): (IpAddr, &super::Conn),
        start: Instant,
        stats: &'a LocationStats,
        worker: usize,
    ) -> Pending<'a> {
        let record = logs.any().then(|| {
            Box::new(Record {
                client,
                method: req.method().clone(),
                uri: req.uri().clone(),
                version: req.version(),
                host: req.headers().get(HOST).cloned(),
                https: conn.https,
                headers: Captured::of(logs.headers(), req.headers()),
                authorization: req.headers().get(http::header::AUTHORIZATION).cloned(),
                subject: None,
                status: StatusCode::from_u16(CLIENT_CLOSED).unwrap_or(StatusCode::BAD_REQUEST),
                body_bytes: 0,
                head_bytes: 0,
                request_time: Duration::ZERO,
                upstream_time: None,
                upstream_began: None,
                upstream_addr: None,
                upstream_status: None,
                limit_status: "-",
                request_id: logs.wants_request_id().then(|| RequestId::new().into_bytes()),
                limit_zone: None,
                limit_remaining: None,
                limit_key: None,
                site: None,
                location: None,
                tls: conn.tls_names,
            })
        });
        Pending {
            record,
            log: logs.main(),
            limit_key: logs.wants_limit_key(),
            in_flight: Vec::new(),
            stats,
            worker,
            start,
            answered: false,
            explain: explain.then(Box::default),
            traced,
        }
    }

    /// Refused before its limits, by what `what` says (asked only when explaining).
    pub(super) fn refused_by(&mut self, what: impl FnOnce() -> String) {
        if let Some(explain) = &mut self.explain {
            explain.refused(what());
        }
    }

    /// The request's id, when its log line has one (then header rules and `return`
    /// texts use the same).
    pub(super) fn request_id(&self) -> Option<RequestId> {
        let id = self.record.as_ref()?.request_id?;
        Some(RequestId::from_bytes(id))
    }

    /// The request's location: it is counted there, and named in its line.
    pub(super) fn route(&mut self, location: &'a super::Location) {
        self.stats = &location.stats;
        if let Some(explain) = &mut self.explain {
            explain.located(&location.names.0, &location.names.1);
        }
        if let Some(traced) = &mut self.traced {
            traced.located(&location.names.0, &location.names.1);
        }
        self.log = location.log.as_ref();
        if let Some(record) = &mut self.record {
            let site = &location.names.0;
            record.site = (!site.is_empty()).then(|| Arc::clone(site));
            record.location = Some(Arc::clone(&location.names.1));
        }
    }

    /// The request ended in `location` (another than its own after an internal redirect:
    /// `try_files`, a rewrite, an error page): its line goes to that location's log, as
    /// nginx's does.
    pub(super) fn ended_at(&mut self, location: &'a super::Location) {
        self.log = location.log.as_ref();
    }

    /// The request's site has no location for it: it is logged where the site says.
    pub(super) fn site(&mut self, site: &'a super::site::Site) {
        self.log = site.log.as_ref();
    }

    /// The request's verified token names this user (`sub`): the line's `remote_user`.
    pub(super) fn subject(&mut self, subject: &[u8]) {
        if let Some(record) = &mut self.record {
            record.subject = Some(subject.into());
        }
    }

    /// Records the limit outcome (`$limit_status`) and the zone that decided it in
    /// `rules` (with its key from `keys`, when the line names it).
    pub(super) fn limit(&mut self, outcome: &Outcome, rules: &[LimitRule], keys: Option<&Keys>) {
        if let Some(explain) = &mut self.explain {
            explain.limited(outcome, rules, keys);
        }
        if let Some(traced) = &mut self.traced {
            traced.limited(outcome, rules, keys, crate::clock::now());
        }
        let (Some(record), Some(status)) = (&mut self.record, outcome.status) else {
            return;
        };
        record.limit_status = status.as_str();
        let Some((rule, remaining)) = deciding(outcome) else {
            return;
        };
        let Some(zone) = rules.get(rule).map(|rule| &rule.zone) else {
            return;
        };
        record.limit_zone = Some(Arc::clone(&zone.name));
        record.limit_remaining = Some(remaining);
        if self.limit_key {
            let key = keys.and_then(|keys| keys.get(rule));
            record.limit_key = key.map(|key| zone.template.text_of(key).into_boxed_str());
        }
    }

    /// The line, taken to be written to the log it goes to (none: it is not written).
    fn entry(&mut self) -> Option<Entry> {
        let log = Arc::clone(self.log?);
        Some(Entry {
            log,
            record: self.record.take()?,
        })
    }

    /// Keeps in-flight counts until the response body ends or is abandoned.
    pub(super) fn hold(&mut self, in_flight: Vec<InFlight>) {
        self.in_flight = in_flight;
    }

    /// The upstream's gate shed the request (`$limit_req_status` `SHED`).
    pub(super) fn shed(&mut self) {
        if let Some(record) = &mut self.record {
            record.limit_status = "SHED";
        }
    }

    /// The server `addr` answered `status`, its head `time` after it was picked, after
    /// the tries that `failed` (each a span of the request's trace).
    pub(super) fn upstream(&mut self, addr: SocketAddr, status: StatusCode, time: Duration, failed: &[Failed]) {
        if self.traced.is_none() && self.record.is_none() {
            return;
        }
        let since_start = crate::clock::now().saturating_duration_since(self.start);
        self.failed_tries(failed);
        if let Some(traced) = &mut self.traced {
            let began = since_start.saturating_sub(time);
            traced.upstream(addr, status.as_u16(), (began, time), &mut super::request_id::next);
        }
        if let Some(record) = &mut self.record {
            record.upstream_began = Some(since_start.saturating_sub(time));
            record.upstream_addr = Some(addr);
            record.upstream_status = Some(status);
            record.upstream_time = Some(time);
        }
    }

    /// The tries that `failed`, whether another answered or none: each a span of the
    /// request's trace.
    pub(super) fn failed_tries(&mut self, failed: &[Failed]) {
        if let Some(traced) = &mut self.traced {
            for failed in failed {
                traced.failed_try(failed.server, failed.reason, failed.at, &mut super::request_id::next);
            }
        }
    }

    /// Attaches the line to the response body; it is written when the body ends.
    pub(super) fn finish(
        mut self,
        mut response: Response<ResponseBody>,
        lease: Option<Lease>,
    ) -> Response<Logged> {
        let mut entry = self.entry();
        if let Some(entry) = &mut entry {
            entry.record.status = response.status();
        }
        if let Some(explain) = self.explain.take() {
            let header = explain.header(response.status());
            response.headers_mut().insert(super::explain::DECISION, header);
        }
        let in_flight = std::mem::take(&mut self.in_flight);
        let status = response.status().as_u16();
        let counted = self.stats.cell(self.worker);
        // Counted by the response body from here on.
        self.answered = true;
        let traced = self.traced.take();
        response.map(|inner| Logged {
            inner,
            entry,
            traced,
            head: 0,
            sent: 0,
            ended: false,
            unanswered: false,
            lease,
            in_flight,
            counted,
            status,
            start: self.start,
        })
    }

    /// No answer at all (`limit_action = "close"`): logged and counted as 444 with no
    /// bytes, as nginx logs it; the connection closes (HTTP/2: resets the stream) instead
    /// of sending it. A flag rather than an extension: a refusal allocates nothing for it.
    pub(super) fn unanswered(self) -> Response<Logged> {
        let mut response = Response::new(ResponseBody::Empty);
        *response.status_mut() = StatusCode::from_u16(UNANSWERED).unwrap_or(StatusCode::BAD_REQUEST);
        let mut response = self.finish(response, None);
        response.body_mut().unanswered = true;
        response
    }
}

/// The item of the location's list whose decision the line reports, and what it had
/// left: the ban's or the refusal's, else the zone nearest its limit (the first of
/// equals).
fn deciding(outcome: &Outcome) -> Option<(usize, u64)> {
    let decided = outcome.banned.map(|banned| banned.rule).or(outcome.rejected_by);
    if let Some(rule) = decided {
        let remaining = outcome.applied.iter().find(|a| a.rule == rule).map_or(0, |a| a.decision.remaining);
        return Some((rule, remaining));
    }
    let nearest = outcome.applied.iter().min_by_key(|applied| applied.decision.remaining)?;
    Some((nearest.rule, nearest.decision.remaining))
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let elapsed = crate::clock::now().saturating_duration_since(self.start);
        self.stats.finish(self.worker, CLIENT_CLOSED, elapsed, 0);
        if let Some(entry) = self.entry() {
            entry.write((0, 0), elapsed);
        }
        if let Some(traced) = self.traced.take() {
            traced.end(CLIENT_CLOSED, 0, elapsed);
        }
    }
}

/// A response body that counts what it sends and logs the request when dropped.
pub struct Logged {
    inner: ResponseBody,
    entry: Option<Entry>,
    /// The request's span, ended with the answer (`[trace]`).
    traced: Option<Box<Traced>>,
    /// The bytes sent besides the body: its head ([`Logged::head_sent`]), and a chunked
    /// body's framing ([`Logged::add_framing`]).
    head: u64,
    sent: u64,
    /// The body has been read to its end.
    ended: bool,
    /// Not to be sent: the connection closes unanswered ([`Pending::unanswered`]).
    unanswered: bool,
    /// The upstream server's load count and connection, released when the body ends.
    lease: Option<Lease>,
    /// Released when the body ends (dropped with it).
    in_flight: Vec<InFlight>,
    /// The worker's counts of the request's location.
    counted: Arc<Aligned<LocationCell>>,
    status: u16,
    start: Instant,
}

impl Logged {
    /// The answer is not to be sent ([`Pending::unanswered`]).
    pub(crate) fn is_unanswered(&self) -> bool {
        self.unanswered
    }

    /// Appends the header lines its answer has written beforehand ([`Rendered`]), which
    /// HTTP/1.1 sends as they are.
    ///
    /// [`Rendered`]: crate::wire::body::Rendered
    pub(crate) fn write_lines(&self, out: &mut Vec<u8>) {
        self.inner.write_lines(out);
    }

    /// Appends the whole body when it is tollgate's own and at most `most` bytes long,
    /// counted as sent, as if it had been read to its end; `false` (nothing written) for
    /// any other.
    pub(crate) fn write_whole(&mut self, out: &mut Vec<u8>, most: u64) -> bool {
        let Some(written) = self.inner.write_whole(out, most) else {
            return false;
        };
        self.sent += written;
        self.ended = true;
        self.in_flight.clear();
        true
    }

    /// The file the body sends, for a connection that sends it itself (`sendfile`);
    /// what it sends that way it counts with [`Logged::add_sent`].
    pub(crate) fn file_mut(&mut self) -> Option<&mut crate::wire::body::file::FileBody> {
        self.inner.file_mut()
    }

    /// The answer's head took `n` bytes (`$bytes_sent`).
    pub(crate) fn head_sent(&mut self, n: u64) {
        self.head = n;
    }

    /// A chunked body's framing took `n` more bytes (`$bytes_sent`).
    pub(crate) fn add_framing(&mut self, n: u64) {
        self.head += n;
    }

    /// Whether its line writes `$bytes_sent`: then a connection that sends the head as
    /// frames says how long it would be as HTTP/1.1 text ([`Logged::head_sent`]).
    pub(crate) fn wants_head_size(&self) -> bool {
        self.entry.as_ref().is_some_and(|entry| entry.log.wants_bytes_sent())
    }

    /// Counts `n` bytes sent other than through [`Body::poll_frame`].
    pub(crate) fn add_sent(&mut self, n: u64) {
        self.sent += n;
    }

    /// Moves those lines into `headers`, for a connection that sends a map (HTTP/2).
    pub(crate) fn lines_into(&mut self, headers: &mut http::HeaderMap) {
        if let ResponseBody::Rendered(rendered) = &mut self.inner {
            rendered.lines_into(headers);
        }
    }
}

impl Body for Logged {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.sent += data.len() as u64;
                }
            }
            Poll::Ready(None) => {
                this.ended = true;
                this.in_flight.clear();
            }
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            let conn = match &mut self.inner {
                ResponseBody::Upstream(body) => body.take_reusable(),
                _ => None,
            };
            lease.end(conn);
        }
        let elapsed = crate::clock::now().saturating_duration_since(self.start);
        self.counted.finish(self.status, elapsed, self.sent);
        if let Some(entry) = self.entry.take() {
            entry.write((self.head, self.sent), elapsed);
        }
        if let Some(traced) = self.traced.take() {
            traced.end(self.status, self.sent, elapsed);
        }
    }
}
