//! The open-loop publisher: sends at a fixed schedule over persistent
//! connections, whatever the server answers, and stamps every payload with
//! the time it was *scheduled* to leave, so a slow server shows up as
//! latency instead of silently slowing the load (no coordinated omission).
//! HTTP requests go over keep-alive connections, one awaiting its answer
//! per connection unless pipelining is asked for (a send that finds its
//! connection busy waits in that connection's queue, and the wait counts as
//! latency); WebSocket appends are fire-and-forget frames. One `poll` wakes
//! the thread on answers or, through a timerfd, on the next scheduled send.

use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};

use std::time::Duration;

use hdrhistogram::Histogram;

use crate::clock::now_ns;
use crate::http::parse_response;
use crate::pool::new_hist;
use crate::stamp::{self, STAMP_LEN};
use crate::ws::{self, Handshake, Masker};

/// A send later than this behind its schedule counts as late; a step with
/// more than 5% late sends has a generator that fell behind.
pub const LATE_NS: u64 = 5_000_000;

/// How requests travel.
#[derive(Debug, Clone)]
pub enum Transport {
    /// Pipelined HTTP/1.1; each target is a complete request.
    Http,
    /// A WebSocket opened with this upgrade request; each target is the
    /// payload of one text frame.
    Ws(Vec<u8>),
}

/// One message shape to send, with a stamp placeholder at `stamp_at`.
#[derive(Debug, Clone)]
pub struct Target {
    /// The request (HTTP) or frame payload (WebSocket).
    pub bytes: Vec<u8>,
    /// Offset of the `STAMP_LEN`-byte stamp in `bytes`.
    pub stamp_at: usize,
}

impl Target {
    /// A target whose stamp is the first `~` of `bytes`.
    pub fn new(bytes: Vec<u8>) -> Self {
        let stamp_at = bytes.iter().position(|&b| b == b'~').unwrap_or(0);
        Target { bytes, stamp_at }
    }
}

/// What to send.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Server address.
    pub addr: SocketAddr,
    /// Persistent connections to spread the sends over.
    pub conns: usize,
    /// How the messages travel.
    pub transport: Transport,
    /// Message shapes, used in turn.
    pub targets: Vec<Target>,
    /// Messages per second.
    pub rate: f64,
    /// How long to send.
    pub duration: Duration,
    /// Step number written into the stamps.
    pub step: u8,
    /// Unsent bytes allowed per connection before further sends are dropped
    /// (the server is not reading).
    pub max_backlog: usize,
    /// How long to wait for outstanding answers after the last send.
    pub drain: Duration,
    /// HTTP requests sent ahead of their answers on one connection
    /// (1: no pipelining).
    pub depth: usize,
}

/// What happened.
#[derive(Debug)]
pub struct Report {
    /// Messages the schedule called for.
    pub scheduled: u64,
    /// Messages handed to the kernel or queued behind it.
    pub sent: u64,
    /// Messages dropped because the server stopped reading.
    pub dropped: u64,
    /// Successful answers (HTTP 2xx).
    pub ok: u64,
    /// Error answers (HTTP non-2xx, WebSocket error frames).
    pub errors: u64,
    /// The first error answer.
    pub first_error: Option<String>,
    /// Sends more than `LATE_NS` behind schedule.
    pub late: u64,
    /// Send lateness, µs.
    pub lateness: Histogram<u64>,
    /// Scheduled send to HTTP answer, µs.
    pub ack: Histogram<u64>,
    /// When sending started and ended (generator clock).
    pub span_ns: (u64, u64),
    /// When the last successful answer arrived.
    pub last_ok_ns: u64,
}

/// Why publishing could not run.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// Transport failure.
    #[error("publisher I/O: {0}")]
    Io(#[from] io::Error),
    /// The server refused or broke the protocol.
    #[error("publisher: {0}")]
    Protocol(String),
}

struct Conn {
    stream: mio::net::TcpStream,
    /// Requests or frames not yet fully written, from `out_start`.
    out: Vec<u8>,
    out_start: usize,
    /// HTTP: scheduled time and length of each request in `out`.
    queued: VecDeque<(u64, usize)>,
    /// HTTP: bytes of the first queued request already written.
    head_written: usize,
    /// HTTP: scheduled times of requests awaiting their answer.
    inflight: VecDeque<u64>,
    inbuf: Vec<u8>,
    http: bool,
}

impl Conn {
    fn backlog(&self) -> usize {
        self.out.len() - self.out_start
    }

    fn outstanding(&self) -> bool {
        self.backlog() > 0 || !self.inflight.is_empty()
    }
}

/// A timerfd, so one `poll` wakes on answers or on the next scheduled send
/// with sub-millisecond precision.
struct Timer(std::os::fd::OwnedFd);

impl Timer {
    fn new() -> io::Result<Timer> {
        // SAFETY: plain system call; the fd is owned at once.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor nobody else owns.
        Ok(Timer(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }))
    }

    fn raw(&self) -> i32 {
        std::os::fd::AsRawFd::as_raw_fd(&self.0)
    }

    /// Fires once, `ns` from now (at least 1 ns).
    fn arm(&self, ns: u64) -> io::Result<()> {
        let ns = ns.max(1);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: valid fd and a fully initialised itimerspec.
        if unsafe { libc::timerfd_settime(self.raw(), 0, &spec, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn clear(&self) {
        let mut b = [0u8; 8];
        // SAFETY: reading 8 bytes into a local buffer; EAGAIN is fine.
        unsafe { libc::read(self.raw(), b.as_mut_ptr().cast(), 8) };
    }
}

impl Report {
    /// Adds `other`'s counts and histograms to this report; the span covers
    /// both.
    fn merge(&mut self, other: Report) {
        self.scheduled += other.scheduled;
        self.sent += other.sent;
        self.dropped += other.dropped;
        self.ok += other.ok;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.late += other.late;
        // Every histogram of a report has the same bounds: adding cannot fail.
        let _ = self.lateness.add(&other.lateness);
        let _ = self.ack.add(&other.ack);
        self.span_ns = (
            self.span_ns.0.min(other.span_ns.0),
            self.span_ns.1.max(other.span_ns.1),
        );
        self.last_ok_ns = self.last_ok_ns.max(other.last_ok_ns);
    }
}

/// Runs `plans` at once, one thread each (a single plan on the calling
/// thread), and merges their reports: e.g. one group of appenders per node
/// of a cluster.
pub fn run_all(plans: &[Plan]) -> Result<Report, PublishError> {
    let Some((first, rest)) = plans.split_first() else {
        return Err(PublishError::Protocol("nothing to publish".into()));
    };
    if rest.is_empty() {
        return run(first);
    }
    std::thread::scope(|scope| {
        let others: Vec<_> = rest.iter().map(|p| scope.spawn(move || run(p))).collect();
        let mut rep = run(first)?;
        for handle in others {
            let other = handle
                .join()
                .map_err(|_| PublishError::Protocol("a publisher thread panicked".into()))??;
            rep.merge(other);
        }
        Ok(rep)
    })
}

/// Runs `plan` to completion on the calling thread.
pub fn run(plan: &Plan) -> Result<Report, PublishError> {
    let http = matches!(plan.transport, Transport::Http);
    let mut poll = mio::Poll::new()?;
    let mut events = mio::Events::with_capacity(256);
    let timer = Timer::new()?;
    let timer_token = mio::Token(usize::MAX);
    poll.registry().register(
        &mut mio::unix::SourceFd(&timer.raw()),
        timer_token,
        mio::Interest::READABLE,
    )?;
    let mut conns = Vec::new();
    for k in 0..plan.conns.max(1) {
        let mut c = open(plan)?;
        poll.registry().register(
            &mut c.stream,
            mio::Token(k),
            mio::Interest::READABLE | mio::Interest::WRITABLE,
        )?;
        conns.push(c);
    }
    let mut masker = Masker::new(0x5bd1_e995);
    let mut scratch = Vec::new();
    let mut rep = Report {
        scheduled: 0,
        sent: 0,
        dropped: 0,
        ok: 0,
        errors: 0,
        first_error: None,
        late: 0,
        lateness: new_hist(),
        ack: new_hist(),
        span_ns: (0, 0),
        last_ok_ns: 0,
    };
    let total = (plan.rate * plan.duration.as_secs_f64()).round() as u64;
    let interval = 1e9 / plan.rate.max(1e-3);
    let start = now_ns() + 1_000_000;
    let sched = |i: u64| start + (i as f64 * interval) as u64;
    rep.span_ns.0 = start;
    let n_conns = conns.len();
    // Connections with something to do: a readiness event or a new send.
    let mut touched = vec![true; n_conns];
    let mut i = 0u64;
    let mut drain_deadline = None;
    loop {
        let now = now_ns();
        if i < total && now >= sched(i) {
            let first_late = now - sched(i);
            let _ = rep
                .lateness
                .record((first_late / 1000).clamp(1, 100_000_000));
            while i < total && sched(i) <= now {
                let s = sched(i);
                if now - s > LATE_NS {
                    rep.late += 1;
                }
                let k = (i as usize) % n_conns;
                touched[k] = true;
                let c = &mut conns[k];
                let t = &plan.targets[(i as usize) % plan.targets.len()];
                rep.scheduled += 1;
                if c.backlog() > plan.max_backlog {
                    rep.dropped += 1;
                } else {
                    rep.sent += 1;
                    if http {
                        let at = c.out.len() + t.stamp_at;
                        c.out.extend_from_slice(&t.bytes);
                        stamp::write(&mut c.out[at..at + STAMP_LEN], plan.step, s);
                        c.queued.push_back((s, t.bytes.len()));
                    } else {
                        scratch.clear();
                        scratch.extend_from_slice(&t.bytes);
                        stamp::write(
                            &mut scratch[t.stamp_at..t.stamp_at + STAMP_LEN],
                            plan.step,
                            s,
                        );
                        ws::encode(&mut c.out, ws::OP_TEXT, &scratch, masker.next_mask());
                    }
                }
                i += 1;
            }
            if i == total {
                rep.span_ns.1 = now.max(sched(total));
            }
        }
        for (k, c) in conns.iter_mut().enumerate() {
            if std::mem::take(&mut touched[k]) {
                read(c, &mut rep, now_ns(), &mut masker)?;
                flush(c, plan.depth)?;
            }
        }
        let outstanding = conns.iter().any(Conn::outstanding);
        let timeout = if i >= total {
            if !outstanding {
                break;
            }
            let d = *drain_deadline.get_or_insert(now_ns() + plan.drain.as_nanos() as u64);
            if now_ns() > d {
                break;
            }
            Some(Duration::from_millis(1))
        } else {
            let now = now_ns();
            let next = sched(i);
            if next <= now {
                continue;
            }
            timer.arm(next - now)?;
            None
        };
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() != ErrorKind::Interrupted {
                return Err(e.into());
            }
        }
        for ev in events.iter() {
            if let Some(t) = touched.get_mut(ev.token().0) {
                *t = true;
            }
        }
        timer.clear();
    }
    if rep.span_ns.1 == 0 {
        rep.span_ns.1 = now_ns();
    }
    Ok(rep)
}

fn open(plan: &Plan) -> Result<Conn, PublishError> {
    let mut stream = TcpStream::connect_timeout(&plan.addr, Duration::from_secs(5))?;
    stream.set_nodelay(true)?;
    let mut inbuf = Vec::new();
    if let Transport::Ws(handshake) = &plan.transport {
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.write_all(handshake)?;
        let mut chunk = [0u8; 4096];
        loop {
            match ws::handshake_response(&inbuf) {
                Handshake::Incomplete => {}
                Handshake::Accepted(off) => {
                    inbuf.drain(..off);
                    break;
                }
                Handshake::Refused(s) => {
                    return Err(PublishError::Protocol(format!("upgrade refused: {s}")))
                }
            }
            let n = stream.read(&mut chunk)?;
            if n == 0 {
                return Err(PublishError::Protocol("closed during upgrade".into()));
            }
            inbuf.extend_from_slice(&chunk[..n]);
        }
    }
    stream.set_nonblocking(true)?;
    Ok(Conn {
        stream: mio::net::TcpStream::from_std(stream),
        out: Vec::with_capacity(1 << 16),
        out_start: 0,
        queued: VecDeque::new(),
        head_written: 0,
        inflight: VecDeque::new(),
        inbuf,
        http: matches!(plan.transport, Transport::Http),
    })
}

/// Writes what may go: for HTTP, whole requests while fewer than `depth`
/// await answers; for WebSocket, everything.
fn flush(c: &mut Conn, depth: usize) -> Result<(), PublishError> {
    loop {
        let end = if c.http {
            let Some(&(_, len)) = c.queued.front() else {
                break;
            };
            if c.inflight.len() >= depth.max(1) {
                break;
            }
            c.out_start + len
        } else {
            c.out.len()
        };
        let from = c.out_start + c.head_written;
        if from >= end {
            break;
        }
        match c.stream.write(&c.out[from..end]) {
            Ok(0) => {
                return Err(PublishError::Protocol(
                    "server closed the publish connection".into(),
                ))
            }
            Ok(n) => {
                c.head_written += n;
                if from + n == end {
                    c.out_start = end;
                    c.head_written = 0;
                    if c.http {
                        if let Some((s, _)) = c.queued.pop_front() {
                            c.inflight.push_back(s);
                        }
                    }
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    if c.out_start == c.out.len() {
        c.out.clear();
        c.out_start = 0;
    } else if c.out_start > 1 << 20 {
        c.out.drain(..c.out_start);
        c.out_start = 0;
    }
    Ok(())
}

fn read(c: &mut Conn, rep: &mut Report, now: u64, masker: &mut Masker) -> Result<(), PublishError> {
    let mut chunk = [0u8; 65536];
    loop {
        match c.stream.read(&mut chunk) {
            Ok(0) => {
                if c.inflight.is_empty() && c.inbuf.is_empty() {
                    return Err(PublishError::Protocol(
                        "server closed the publish connection".into(),
                    ));
                }
                break;
            }
            Ok(n) => c.inbuf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let mut pos = 0;
    if c.http {
        while let Some(r) =
            parse_response(&c.inbuf[pos..]).map_err(|e| PublishError::Protocol(e.to_string()))?
        {
            let sched = c.inflight.pop_front().unwrap_or(now);
            if (200..300).contains(&r.status) {
                rep.ok += 1;
                rep.last_ok_ns = now;
                let _ = rep
                    .ack
                    .record((now.saturating_sub(sched) / 1000).clamp(1, 100_000_000));
            } else {
                rep.errors += 1;
                if rep.first_error.is_none() {
                    let body = &c.inbuf[pos + r.body.start..pos + r.body.end];
                    rep.first_error = Some(format!(
                        "HTTP {}: {}",
                        r.status,
                        String::from_utf8_lossy(body)
                    ));
                }
            }
            pos += r.len;
        }
    } else {
        let mut pongs = Vec::new();
        while let Some((f, used)) =
            ws::parse(&c.inbuf[pos..]).map_err(|e| PublishError::Protocol(e.to_string()))?
        {
            let payload = &c.inbuf[pos + f.payload.start..pos + f.payload.end];
            match f.opcode {
                ws::OP_PING => ws::encode(&mut pongs, ws::OP_PONG, payload, masker.next_mask()),
                ws::OP_CLOSE => {
                    return Err(PublishError::Protocol(
                        "server closed the append socket".into(),
                    ))
                }
                _ if ws::find(payload, b"\"error\"").is_some() => {
                    rep.errors += 1;
                    if rep.first_error.is_none() {
                        rep.first_error = Some(String::from_utf8_lossy(payload).into_owned());
                    }
                }
                _ => {}
            }
            pos += used;
        }
        c.out.extend_from_slice(&pongs);
    }
    c.inbuf.drain(..pos);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(ok: u64, span: (u64, u64), ack_us: u64, error: Option<&str>) -> Report {
        let mut ack = new_hist();
        ack.record(ack_us).expect("in bounds");
        Report {
            scheduled: ok + 1,
            sent: ok + 1,
            dropped: 0,
            ok,
            errors: 1,
            first_error: error.map(str::to_owned),
            late: 1,
            lateness: new_hist(),
            ack,
            span_ns: span,
            last_ok_ns: span.1,
        }
    }

    #[test]
    fn merged_reports_add_counts_and_cover_both_spans() {
        let mut a = report(10, (100, 200), 1000, None);
        a.merge(report(5, (50, 150), 3000, Some("HTTP 503")));
        assert_eq!((a.scheduled, a.ok, a.errors, a.late), (17, 15, 2, 2));
        assert_eq!(a.first_error.as_deref(), Some("HTTP 503"));
        assert_eq!((a.span_ns, a.last_ok_ns), ((50, 200), 200));
        assert_eq!(a.ack.len(), 2);
        assert!(a.ack.max() >= 2990);
    }
}
