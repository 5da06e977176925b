//! Long thread histories over HTTP: a closed-loop, pipelined pre-fill of
//! threads, and pagers that read them back page by page
//! (`GET /v1/threads/:id/events?fromSeq=&limit=1000`) in a loop.
//!
//! The pre-fill is setup, not a measurement: every connection keeps `depth`
//! appends in flight and sends more as answers come back, so the server's
//! append rate, not a schedule, sets its pace. The pagers are one mio event
//! loop: each pager has one request in flight (a reader needs `nextSeq`
//! before it can ask for the next page), reads the whole answer, takes
//! `nextSeq` from the end of the body and asks again; past the head it
//! starts over from `fromSeq=1`. With a page rate, each pager asks for its
//! next page no earlier than its share of the rate allows (a pager behind
//! its schedule asks at once, but does not catch up in a burst); without
//! one they read as fast as the server answers.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::clock::now_ns;
use crate::http::parse_response;
use crate::pool::new_hist;
use crate::servers::TOKEN;
use crate::ws::find;

/// Events a pager asks for per page (the API's maximum).
pub const PAGE_LIMIT: u64 = 1000;

/// Why filling or paging failed.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// Transport failure.
    #[error("history I/O: {0}")]
    Io(#[from] io::Error),
    /// The server refused or broke the protocol.
    #[error("history: {0}")]
    Protocol(String),
}

fn protocol(msg: impl Into<String>) -> HistoryError {
    HistoryError::Protocol(msg.into())
}

/// Appends `events` copies of `request` (one complete HTTP append request)
/// over one keep-alive connection, `depth` requests in flight.
fn fill_conn(
    addr: SocketAddr,
    request: &[u8],
    events: u64,
    depth: u64,
) -> Result<(), HistoryError> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let depth = depth.max(1);
    let (mut sent, mut answered) = (0u64, 0u64);
    let mut out = Vec::with_capacity(request.len() * depth as usize);
    let mut inbuf = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    while answered < events {
        out.clear();
        while sent < events && sent - answered < depth {
            out.extend_from_slice(request);
            sent += 1;
        }
        if !out.is_empty() {
            s.write_all(&out)?;
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(protocol("the server closed a fill connection"));
        }
        inbuf.extend_from_slice(&chunk[..n]);
        let mut pos = 0;
        while let Some(r) = parse_response(&inbuf[pos..]).map_err(|e| protocol(e.to_string()))? {
            if !(200..300).contains(&r.status) {
                return Err(protocol(format!(
                    "fill append answered HTTP {}: {}",
                    r.status,
                    String::from_utf8_lossy(&inbuf[pos + r.body.start..pos + r.body.end])
                )));
            }
            answered += 1;
            pos += r.len;
        }
        inbuf.drain(..pos);
    }
    Ok(())
}

/// What a fill did.
#[derive(Debug, Clone, Serialize)]
pub struct FillReport {
    /// Events appended, over every thread.
    pub events: u64,
    /// Connections used.
    pub conns: usize,
    /// Requests in flight per connection.
    pub depth: u64,
    /// Wall time, seconds.
    pub secs: f64,
    /// `events / secs`.
    pub events_per_sec: f64,
}

/// Appends `per_thread` events to each of `requests` (one complete HTTP
/// append request per thread), over `conns_per_thread` keep-alive
/// connections per thread with `depth` requests in flight on each.
pub fn fill(
    addr: SocketAddr,
    requests: &[Vec<u8>],
    per_thread: u64,
    conns_per_thread: usize,
    depth: u64,
) -> Result<FillReport, HistoryError> {
    let k = conns_per_thread.max(1) as u64;
    let start = now_ns();
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for req in requests {
            for c in 0..k {
                // Connection c takes an equal share, the first ones the remainder.
                let n = per_thread / k + u64::from(c < per_thread % k);
                handles.push(scope.spawn(move || fill_conn(addr, req, n, depth)));
            }
        }
        handles.into_iter().try_for_each(|h| {
            h.join()
                .unwrap_or_else(|_| Err(protocol("a fill thread panicked")))
        })
    })?;
    let secs = ((now_ns() - start) as f64 / 1e9).max(1e-9);
    let events = per_thread * requests.len() as u64;
    Ok(FillReport {
        events,
        conns: requests.len() * k as usize,
        depth,
        secs,
        events_per_sec: events as f64 / secs,
    })
}

/// The `nextSeq` at the end of a history page's JSON body: `Ok(None)` for
/// `null` (the page reached the head).
pub fn next_seq(body: &[u8]) -> Result<Option<u64>, String> {
    const KEY: &[u8] = b"\"nextSeq\":";
    let tail = &body[body.len().saturating_sub(64)..];
    let at = tail
        .windows(KEY.len())
        .rposition(|w| w == KEY)
        .ok_or_else(|| {
            format!(
                "no nextSeq at the end of {:?}",
                String::from_utf8_lossy(tail)
            )
        })?;
    let value = tail[at + KEY.len()..]
        .iter()
        .skip_while(|b| b.is_ascii_whitespace())
        .take_while(|b| b.is_ascii_alphanumeric())
        .map(|&b| b as char)
        .collect::<String>();
    if value == "null" {
        return Ok(None);
    }
    value
        .parse()
        .map(Some)
        .map_err(|_| format!("nextSeq is {value:?}"))
}

/// Events in a page that started at `from` of a thread whose head is
/// `head`, given the page's `nextSeq`.
pub fn page_events(from: u64, head: u64, next: Option<u64>) -> Result<u64, String> {
    match next {
        Some(n) if n > from && n - from <= PAGE_LIMIT && n <= head => Ok(n - from),
        Some(n) => Err(format!("nextSeq {n} after fromSeq {from} (head {head})")),
        None if from > head => Ok(0),
        None if head + 1 - from <= PAGE_LIMIT => Ok(head + 1 - from),
        None => Err(format!(
            "nextSeq null after fromSeq {from}, {} events short of head {head}",
            head + 1 - from
        )),
    }
}

/// The request for one page.
pub fn page_request(addr: SocketAddr, thread: &str, from: u64) -> Vec<u8> {
    format!(
        "GET /v1/threads/{thread}/events?fromSeq={from}&limit={PAGE_LIMIT} HTTP/1.1\r\n\
         Host: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    )
    .into_bytes()
}

/// One pager: a thread to read and where it is.
#[derive(Debug, Clone)]
pub struct PagerSpec {
    /// The thread it pages through.
    pub thread: String,
    /// The thread's head (it is not appended to while paged).
    pub head: u64,
    /// The first `fromSeq`.
    pub from: u64,
}

struct PagerConn {
    stream: mio::net::TcpStream,
    spec: PagerSpec,
    from: u64,
    /// The answer is in and the next request waits for `due`.
    idle: bool,
    /// When the next request may leave (paced pagers).
    due: u64,
    out: Vec<u8>,
    out_pos: usize,
    sent_at: u64,
    inbuf: Vec<u8>,
    /// The page's events were counted one by one once (the first page).
    checked: bool,
}

/// Counters of the pagers.
#[derive(Debug)]
pub struct PagerStats {
    /// Pagers that ran.
    pub pagers: usize,
    /// Pages/s asked for, all pagers.
    pub rate: Option<f64>,
    /// Seconds from start to stop.
    pub secs: f64,
    /// Complete pages read (HTTP 200).
    pub pages: u64,
    /// Events in those pages.
    pub events: u64,
    /// Response bytes read.
    pub bytes: u64,
    /// Error answers.
    pub errors: u64,
    /// The first error answer.
    pub first_error: Option<String>,
    /// Request written → whole page read, µs.
    pub latency: Histogram<u64>,
}

/// What the pagers did, for results.
#[derive(Debug, Clone, Serialize)]
pub struct PagerSummary {
    /// Concurrent pagers.
    pub pagers: usize,
    /// Pages/s asked for, all pagers (`None`: as fast as answered).
    pub target_pages_per_sec: Option<f64>,
    /// Events asked for per page.
    pub page_limit: u64,
    /// Seconds the pagers ran.
    pub secs: f64,
    /// Pages read.
    pub pages: u64,
    /// Events read.
    pub events: u64,
    /// Pages per second, all pagers.
    pub pages_per_sec: f64,
    /// Events per second, all pagers.
    pub events_per_sec: f64,
    /// Response bytes per second, MiB.
    pub mib_per_sec: f64,
    /// Page latency (request written → last byte), 50th percentile, ms.
    pub page_p50_ms: f64,
    /// 99th percentile, ms.
    pub page_p99_ms: f64,
    /// Slowest page, ms.
    pub page_max_ms: f64,
    /// Error answers.
    pub errors: u64,
    /// The first error answer.
    pub first_error: Option<String>,
}

impl PagerStats {
    /// Rates and percentiles.
    pub fn summary(&self) -> PagerSummary {
        let secs = self.secs.max(1e-3);
        let ms = |q: f64| {
            if self.latency.is_empty() {
                0.0
            } else {
                self.latency.value_at_quantile(q) as f64 / 1000.0
            }
        };
        PagerSummary {
            pagers: self.pagers,
            target_pages_per_sec: self.rate,
            page_limit: PAGE_LIMIT,
            secs: self.secs,
            pages: self.pages,
            events: self.events,
            pages_per_sec: self.pages as f64 / secs,
            events_per_sec: self.events as f64 / secs,
            mib_per_sec: self.bytes as f64 / secs / (1024.0 * 1024.0),
            page_p50_ms: ms(0.5),
            page_p99_ms: ms(0.99),
            page_max_ms: self.latency.max() as f64 / 1000.0,
            errors: self.errors,
            first_error: self.first_error.clone(),
        }
    }
}

/// Pagers running on their own thread until stopped.
pub struct Pagers {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Result<PagerStats, HistoryError>>,
}

impl Pagers {
    /// Connects one keep-alive connection per spec and starts paging, at
    /// `rate` pages/s over all pagers (`None`: as fast as answered).
    pub fn start(
        addr: SocketAddr,
        specs: Vec<PagerSpec>,
        rate: Option<f64>,
    ) -> Result<Pagers, HistoryError> {
        let poll = mio::Poll::new()?;
        let mut conns = Vec::new();
        for (k, spec) in specs.into_iter().enumerate() {
            let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
            s.set_nodelay(true)?;
            s.set_nonblocking(true)?;
            let mut stream = mio::net::TcpStream::from_std(s);
            poll.registry().register(
                &mut stream,
                mio::Token(k),
                mio::Interest::READABLE | mio::Interest::WRITABLE,
            )?;
            conns.push(PagerConn {
                stream,
                from: spec.from,
                idle: true,
                due: 0,
                spec,
                out: Vec::new(),
                out_pos: 0,
                sent_at: 0,
                inbuf: Vec::with_capacity(1 << 18),
                checked: false,
            });
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("bench-pagers".into())
            .spawn(move || run_pagers(addr, poll, conns, rate, &flag))?;
        Ok(Pagers { stop, handle })
    }

    /// Stops paging and returns the counters.
    pub fn stop(self) -> Result<PagerStats, HistoryError> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .join()
            .unwrap_or_else(|_| Err(protocol("the pager thread panicked")))
    }
}

fn run_pagers(
    addr: SocketAddr,
    mut poll: mio::Poll,
    mut conns: Vec<PagerConn>,
    rate: Option<f64>,
    stop: &AtomicBool,
) -> Result<PagerStats, HistoryError> {
    let rate = rate.filter(|r| *r > 0.0);
    // Each pager's interval between requests; pagers start spread over one.
    let interval = rate.map_or(0, |r| (1e9 * conns.len() as f64 / r) as u64);
    let mut stats = PagerStats {
        pagers: conns.len(),
        rate,
        secs: 0.0,
        pages: 0,
        events: 0,
        bytes: 0,
        errors: 0,
        first_error: None,
        latency: new_hist(),
    };
    let start = now_ns();
    let mut chunk = vec![0u8; 1 << 18];
    let mut events = mio::Events::with_capacity(64);
    let n = conns.len() as u64;
    for (k, c) in conns.iter_mut().enumerate() {
        c.due = start + interval * k as u64 / n.max(1);
    }
    while !stop.load(Ordering::Relaxed) {
        let now = now_ns();
        let mut wake = now + 20_000_000;
        for c in conns.iter_mut().filter(|c| c.idle) {
            if c.due <= now {
                c.idle = false;
                // Behind schedule: ask now, without catching up in a burst.
                c.due = (c.due + interval).max(now);
                ask(addr, c);
                flush(c)?;
            } else {
                wake = wake.min(c.due);
            }
        }
        let timeout = Duration::from_nanos(wake.saturating_sub(now_ns()));
        if let Err(e) = poll.poll(&mut events, Some(timeout)) {
            if e.kind() != ErrorKind::Interrupted {
                return Err(e.into());
            }
        }
        for ev in events.iter() {
            let Some(c) = conns.get_mut(ev.token().0) else {
                continue;
            };
            if c.idle {
                continue;
            }
            flush(c)?;
            if read(c, &mut chunk, &mut stats)? {
                c.idle = true;
            }
        }
    }
    stats.secs = (now_ns() - start) as f64 / 1e9;
    Ok(stats)
}

/// Queues the request for the pager's next page.
fn ask(addr: SocketAddr, c: &mut PagerConn) {
    c.out = page_request(addr, &c.spec.thread, c.from);
    c.out_pos = 0;
    c.sent_at = 0;
}

fn flush(c: &mut PagerConn) -> Result<(), HistoryError> {
    while c.out_pos < c.out.len() {
        match c.stream.write(&c.out[c.out_pos..]) {
            Ok(0) => return Err(protocol("the server closed a pager connection")),
            Ok(n) => {
                c.out_pos += n;
                if c.out_pos == c.out.len() {
                    c.sent_at = now_ns();
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Reads what arrived; true when a whole answer was handled (time to ask
/// for the next page).
fn read(c: &mut PagerConn, chunk: &mut [u8], stats: &mut PagerStats) -> Result<bool, HistoryError> {
    loop {
        match c.stream.read(chunk) {
            Ok(0) => return Err(protocol("the server closed a pager connection")),
            Ok(n) => {
                c.inbuf.extend_from_slice(&chunk[..n]);
                stats.bytes += n as u64;
                if n < chunk.len() {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let Some(r) = parse_response(&c.inbuf).map_err(|e| protocol(e.to_string()))? else {
        return Ok(false);
    };
    let now = now_ns();
    let body = &c.inbuf[r.body.clone()];
    if r.status == 200 {
        let next = next_seq(body).map_err(protocol)?;
        let n = page_events(c.from, c.spec.head, next).map_err(protocol)?;
        if !c.checked {
            let counted = count(body, b"\"seq\":");
            if counted != n {
                return Err(protocol(format!(
                    "page of {} from {}: {counted} events, nextSeq says {n}",
                    c.spec.thread, c.from
                )));
            }
            c.checked = true;
        }
        stats.pages += 1;
        stats.events += n;
        let _ = stats
            .latency
            .record((now.saturating_sub(c.sent_at) / 1000).clamp(1, 100_000_000));
        c.from = next.unwrap_or(1);
    } else {
        stats.errors += 1;
        if stats.first_error.is_none() {
            stats.first_error = Some(format!(
                "HTTP {}: {}",
                r.status,
                String::from_utf8_lossy(body)
            ));
        }
    }
    c.inbuf.drain(..r.len);
    Ok(true)
}

/// Occurrences of `needle` in `hay`.
fn count(hay: &[u8], needle: &[u8]) -> u64 {
    let mut n = 0;
    let mut at = 0;
    while let Some(p) = find(&hay[at..], needle) {
        n += 1;
        at += p + needle.len();
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_next_seq_from_the_end_of_a_page() {
        assert_eq!(
            next_seq(br#"{"events":[{"seq":1},{"seq":2}],"nextSeq":3}"#),
            Ok(Some(3))
        );
        assert_eq!(next_seq(br#"{"events":[],"nextSeq":null}"#), Ok(None));
        assert!(next_seq(br#"{"events":[]}"#).is_err());
        assert!(next_seq(br#"{"events":[],"nextSeq":"x"}"#).is_err());
    }

    #[test]
    fn counts_the_events_of_a_page() {
        assert_eq!(page_events(1, 5000, Some(1001)), Ok(1000));
        assert_eq!(page_events(4001, 4500, None), Ok(500));
        assert_eq!(page_events(4501, 4500, None), Ok(0));
        assert!(page_events(1, 5000, Some(2002)).is_err());
        assert!(page_events(1, 5000, None).is_err());
        assert_eq!(count(br#"[{"seq":1},{"seq":2}]"#, b"\"seq\":"), 2);
    }

    #[test]
    fn a_page_request_asks_for_the_largest_page() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let r = String::from_utf8(page_request(addr, "t-1", 1001)).unwrap();
        assert!(r.starts_with("GET /v1/threads/t-1/events?fromSeq=1001&limit=1000 HTTP/1.1\r\n"));
        assert!(r.ends_with("\r\n\r\n"));
    }
}
