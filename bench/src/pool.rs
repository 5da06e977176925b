//! The subscriber side of the generator: worker threads, each a plain mio
//! event loop owning a slice of the WebSocket connections. Every readable
//! connection is drained into the worker's one large buffer, the clock is
//! read once per `read`, and frames are parsed in place: a delivery costs a
//! header parse, a stamp scan and, on sampled connections, a histogram
//! record. Partial frames are carried per connection in a reused `Vec`.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use crate::clock::now_ns;
use crate::stamp::{self, MAX_STEPS};
use crate::ws::{self, Handshake, Masker};

/// Size of each worker's read buffer.
const READ_BUF: usize = 1 << 20;
/// How often a worker publishes its counters.
const FLUSH_NS: u64 = 20_000_000;

/// When a connection counts as ready, and what it sends on the way.
#[derive(Debug, Clone)]
pub struct Ready {
    /// Wait for a text frame containing this before sending `on_open`
    /// (e.g. `pubb:connection_established`); `None` sends at upgrade.
    pub trigger: Option<&'static [u8]>,
    /// A text frame containing this acknowledges one `on_open` frame.
    pub ack: &'static [u8],
    /// Acknowledgements to wait for (0: ready once `on_open` is sent).
    pub acks: usize,
}

/// One connection to open.
#[derive(Debug, Clone)]
pub struct ConnSpec {
    /// Server address.
    pub addr: SocketAddr,
    /// Loopback source address to bind, to spread ephemeral ports.
    pub local_ip: Option<Ipv4Addr>,
    /// The upgrade request.
    pub handshake: Arc<Vec<u8>>,
    /// Text frames to send once the connection is open (see `Ready`).
    pub on_open: Vec<Vec<u8>>,
    /// Readiness rule.
    pub ready: Ready,
    /// Whether latencies seen on this connection are recorded.
    pub sample: bool,
}

/// Counters of a pool, merged across workers.
#[derive(Debug)]
pub struct Stats {
    /// Stamped frames received, per step.
    pub delivered: [u64; MAX_STEPS],
    /// Latency (µs) from scheduled send to receipt, per step, sampled.
    pub hist: Vec<Histogram<u64>>,
    /// Text frames without a stamp, once ready.
    pub other_frames: u64,
    /// Ready connections that the server closed.
    pub closed: u64,
    /// Clock reading of the last read that carried a delivery.
    pub last_delivery_ns: u64,
}

/// A histogram for latencies in microseconds, 1 µs to 100 s, 3 digits.
pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000, 3).expect("static histogram bounds are valid")
}

impl Stats {
    fn new() -> Self {
        Stats {
            delivered: [0; MAX_STEPS],
            hist: (0..MAX_STEPS).map(|_| new_hist()).collect(),
            other_frames: 0,
            closed: 0,
            last_delivery_ns: 0,
        }
    }

    fn absorb(&mut self, o: &mut Stats) {
        for s in 0..MAX_STEPS {
            self.delivered[s] += o.delivered[s];
            o.delivered[s] = 0;
            if !o.hist[s].is_empty() {
                // Both histograms share bounds, so adding cannot fail.
                let _ = self.hist[s].add(&o.hist[s]);
                o.hist[s].reset();
            }
        }
        self.other_frames += std::mem::take(&mut o.other_frames);
        self.closed += std::mem::take(&mut o.closed);
        self.last_delivery_ns = self.last_delivery_ns.max(o.last_delivery_ns);
    }
}

/// Why a pool failed.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// Some connections never became ready.
    #[error("{failed} of {total} connections failed; first: {first}")]
    Connections {
        /// How many failed.
        failed: usize,
        /// How many were asked for.
        total: usize,
        /// The first failure.
        first: String,
    },
    /// Readiness did not come in time.
    #[error("only {ready} of {total} connections ready after {secs} s")]
    Timeout {
        /// Ready so far.
        ready: usize,
        /// Asked for.
        total: usize,
        /// Seconds waited.
        secs: u64,
    },
    /// Setting up a worker failed.
    #[error("worker I/O: {0}")]
    Io(#[from] io::Error),
}

struct Shared {
    stop: AtomicBool,
    ready: AtomicUsize,
    failed: AtomicUsize,
    first_error: Mutex<Option<String>>,
    stats: Mutex<Stats>,
}

impl Shared {
    fn fail(&self, msg: String) {
        self.failed.fetch_add(1, Ordering::SeqCst);
        let mut first = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
        if first.is_none() {
            *first = Some(msg);
        }
    }
}

/// A running set of connections.
pub struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    total: usize,
}

impl Pool {
    /// Spreads `specs` over `workers` threads and starts connecting, at
    /// most `burst` handshakes in flight per worker. While frames keep
    /// coming, a worker reads at most once per `coalesce` (see
    /// [`Worker::run`]).
    pub fn start(
        specs: Vec<ConnSpec>,
        workers: usize,
        burst: usize,
        coalesce: Duration,
    ) -> Result<Pool, PoolError> {
        let total = specs.len();
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            ready: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
            first_error: Mutex::new(None),
            stats: Mutex::new(Stats::new()),
        });
        let workers = workers.max(1);
        let mut slices: Vec<Vec<ConnSpec>> = (0..workers).map(|_| Vec::new()).collect();
        for (i, s) in specs.into_iter().enumerate() {
            slices[i % workers].push(s);
        }
        let mut handles = Vec::new();
        for (w, slice) in slices.into_iter().enumerate() {
            let shared = shared.clone();
            let poll = Poll::new()?;
            handles.push(
                std::thread::Builder::new()
                    .name(format!("bench-worker-{w}"))
                    .spawn(move || {
                        Worker::new(poll, slice, burst, shared, w as u32, coalesce).run()
                    })?,
            );
        }
        Ok(Pool {
            shared,
            workers: handles,
            total,
        })
    }

    /// Connections ready so far.
    pub fn ready(&self) -> usize {
        self.shared.ready.load(Ordering::SeqCst)
    }

    /// Waits until every connection is ready.
    pub fn wait_ready(&self, timeout: Duration) -> Result<(), PoolError> {
        let deadline = now_ns() + timeout.as_nanos() as u64;
        loop {
            let ready = self.ready();
            let failed = self.shared.failed.load(Ordering::SeqCst);
            if failed > 0 {
                let first = self
                    .shared
                    .first_error
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone()
                    .unwrap_or_default();
                return Err(PoolError::Connections {
                    failed,
                    total: self.total,
                    first,
                });
            }
            if ready >= self.total {
                return Ok(());
            }
            if now_ns() > deadline {
                return Err(PoolError::Timeout {
                    ready,
                    total: self.total,
                    secs: timeout.as_secs(),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Runs `f` on the merged counters (at most `FLUSH_NS` old).
    pub fn with_stats<T>(&self, f: impl FnOnce(&Stats) -> T) -> T {
        let s = self.shared.stats.lock().unwrap_or_else(|e| e.into_inner());
        f(&s)
    }

    /// Stops the workers, closes every connection and returns the counters.
    pub fn stop(self) -> Stats {
        self.shared.stop.store(true, Ordering::SeqCst);
        for h in self.workers {
            let _ = h.join();
        }
        let mut s = self.shared.stats.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::replace(&mut *s, Stats::new())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Pending,
    Connecting,
    Upgrading,
    Triggering,
    Acking,
    Ready,
    Closed,
}

struct Conn {
    spec: ConnSpec,
    stream: Option<TcpStream>,
    state: State,
    acks_left: usize,
    carry: Vec<u8>,
    out: Vec<u8>,
}

struct Worker {
    poll: Poll,
    conns: Vec<Conn>,
    next_pending: usize,
    in_flight: usize,
    burst: usize,
    coalesce: Duration,
    shared: Arc<Shared>,
    local: Stats,
    buf: Vec<u8>,
    masker: Masker,
}

/// What reading a connection led to.
enum Outcome {
    Open,
    Closed(Option<String>),
}

impl Worker {
    fn new(
        poll: Poll,
        specs: Vec<ConnSpec>,
        burst: usize,
        shared: Arc<Shared>,
        seed: u32,
        coalesce: Duration,
    ) -> Self {
        let conns = specs
            .into_iter()
            .map(|spec| Conn {
                spec,
                stream: None,
                state: State::Pending,
                acks_left: 0,
                carry: Vec::new(),
                out: Vec::new(),
            })
            .collect();
        Worker {
            poll,
            conns,
            next_pending: 0,
            in_flight: 0,
            burst: burst.max(1),
            coalesce,
            shared,
            local: Stats::new(),
            buf: vec![0; READ_BUF],
            masker: Masker::new(0x9e37_79b9 ^ seed),
        }
    }

    /// The event loop. After a poll that found events, the worker sleeps
    /// `coalesce` on a timer of its own, then polls without blocking, and
    /// blocks in `epoll_wait` only once a poll finds nothing: while frames
    /// keep coming, the server never has to wake it. A reader that blocked
    /// again as soon as it had drained would make a server that writes a
    /// publication's frames one by one pay a wake-up of this thread for
    /// many of them (on loopback the sender wakes the reader, and in a VM
    /// that is an interrupt to a halted vCPU), a cost a subscriber on
    /// another machine, behind a NIC that coalesces its interrupts, does
    /// not put on the server.
    fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut last_flush = now_ns();
        let mut streaming = false;
        while !self.shared.stop.load(Ordering::Relaxed) {
            self.connect_more();
            let timeout = if streaming && !self.coalesce.is_zero() {
                std::thread::sleep(self.coalesce);
                Duration::ZERO
            } else {
                Duration::from_millis(5)
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != ErrorKind::Interrupted {
                    self.shared.fail(format!("poll: {e}"));
                    break;
                }
            }
            for ev in events.iter() {
                let i = ev.token().0;
                self.on_event(i, ev.is_writable() || ev.is_error());
            }
            streaming = !events.is_empty();
            let now = now_ns();
            if now - last_flush >= FLUSH_NS {
                self.flush_stats();
                last_flush = now;
            }
        }
        self.flush_stats();
    }

    fn flush_stats(&mut self) {
        let mut s = self.shared.stats.lock().unwrap_or_else(|e| e.into_inner());
        s.absorb(&mut self.local);
    }

    fn connect_more(&mut self) {
        while self.in_flight < self.burst && self.next_pending < self.conns.len() {
            let i = self.next_pending;
            self.next_pending += 1;
            match connect(&self.conns[i].spec) {
                Ok(mut stream) => {
                    let interest = Interest::READABLE | Interest::WRITABLE;
                    if let Err(e) = self
                        .poll
                        .registry()
                        .register(&mut stream, Token(i), interest)
                    {
                        self.shared.fail(format!("register: {e}"));
                        continue;
                    }
                    let c = &mut self.conns[i];
                    c.stream = Some(stream);
                    c.state = State::Connecting;
                    self.in_flight += 1;
                }
                Err(e) => self
                    .shared
                    .fail(format!("connect {}: {e}", self.conns[i].spec.addr)),
            }
        }
    }

    fn on_event(&mut self, i: usize, writable: bool) {
        let was = self.conns[i].state;
        if was == State::Connecting {
            if !writable {
                return;
            }
            let c = &mut self.conns[i];
            let Some(stream) = c.stream.as_ref() else {
                return;
            };
            if let Ok(Some(err)) | Err(err) = stream.take_error() {
                self.close(i, Some(format!("connect: {err}")));
                return;
            }
            match stream.peer_addr() {
                Ok(_) => {
                    c.out.extend_from_slice(&c.spec.handshake);
                    c.state = State::Upgrading;
                }
                Err(e) if e.kind() == ErrorKind::NotConnected => return,
                Err(e) => {
                    self.close(i, Some(format!("connect: {e}")));
                    return;
                }
            }
        }
        if self.conns[i].state == State::Closed {
            return;
        }
        let outcome = self.read_all(i).and_then(|o| match o {
            Outcome::Open => self.write_out(i).map(|_| Outcome::Open),
            closed => Ok(closed),
        });
        match outcome {
            Ok(Outcome::Open) => {}
            Ok(Outcome::Closed(why)) => self.close(i, why),
            Err(e) => self.close(i, Some(e)),
        }
    }

    fn write_out(&mut self, i: usize) -> Result<(), String> {
        let c = &mut self.conns[i];
        let Some(stream) = c.stream.as_mut() else {
            return Ok(());
        };
        let mut sent = 0;
        while sent < c.out.len() {
            match stream.write(&c.out[sent..]) {
                Ok(0) => return Err("write returned 0".into()),
                Ok(n) => sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("write: {e}")),
            }
        }
        c.out.drain(..sent);
        Ok(())
    }

    fn read_all(&mut self, i: usize) -> Result<Outcome, String> {
        let mut filled = {
            let c = &mut self.conns[i];
            let n = c.carry.len();
            if n > self.buf.len() {
                return Err("carried frame larger than the read buffer".into());
            }
            self.buf[..n].copy_from_slice(&c.carry);
            c.carry.clear();
            n
        };
        loop {
            if filled == self.buf.len() {
                return Err("frame larger than the read buffer".into());
            }
            let Some(stream) = self.conns[i].stream.as_mut() else {
                return Ok(Outcome::Closed(None));
            };
            match stream.read(&mut self.buf[filled..]) {
                Ok(0) => return Ok(Outcome::Closed(None)),
                Ok(n) => {
                    let short = filled + n < self.buf.len();
                    filled += n;
                    let now = now_ns();
                    let used = self.process(i, filled, now)?;
                    if self.conns[i].state == State::Closed {
                        return Ok(Outcome::Closed(None));
                    }
                    self.buf.copy_within(used..filled, 0);
                    filled -= used;
                    // A short read drained the socket; with edge-triggered
                    // readiness, later bytes raise a new event, so the
                    // extra read that would only say WouldBlock is skipped.
                    if short {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("read: {e}")),
            }
        }
        self.conns[i].carry.extend_from_slice(&self.buf[..filled]);
        Ok(Outcome::Open)
    }

    /// Handles the bytes `buf[..filled]` of connection `i`; returns how many
    /// were consumed.
    fn process(&mut self, i: usize, filled: usize, now: u64) -> Result<usize, String> {
        let data = &self.buf[..filled];
        let c = &mut self.conns[i];
        let mut pos = 0;
        if c.state == State::Upgrading {
            match ws::handshake_response(data) {
                Handshake::Incomplete => return Ok(0),
                Handshake::Refused(status) => return Err(format!("upgrade refused: {status}")),
                Handshake::Accepted(off) => {
                    pos = off;
                    if c.spec.ready.trigger.is_some() {
                        c.state = State::Triggering;
                    } else {
                        open(c, &mut self.masker);
                    }
                }
            }
            if c.state == State::Ready {
                self.in_flight -= 1;
                self.shared.ready.fetch_add(1, Ordering::SeqCst);
            }
        }
        let mut delivered_any = false;
        loop {
            let (frame, used) = match ws::parse(&data[pos..]) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => return Err(e.to_string()),
            };
            let payload = &data[pos + frame.payload.start..pos + frame.payload.end];
            pos += used;
            match frame.opcode {
                ws::OP_PING => {
                    ws::encode(&mut c.out, ws::OP_PONG, payload, self.masker.next_mask())
                }
                ws::OP_CLOSE => {
                    c.state = State::Closed;
                    break;
                }
                ws::OP_PONG => {}
                _ => {
                    if let Some((step, sched)) = stamp::find(payload) {
                        let s = step as usize % MAX_STEPS;
                        self.local.delivered[s] += 1;
                        delivered_any = true;
                        if c.spec.sample {
                            let us = (now.saturating_sub(sched) / 1000).max(1);
                            let _ = self.local.hist[s].record(us.min(100_000_000));
                        }
                        continue;
                    }
                    match c.state {
                        State::Triggering => {
                            if c.spec
                                .ready
                                .trigger
                                .is_some_and(|t| ws::find(payload, t).is_some())
                            {
                                open(c, &mut self.masker);
                                if c.state == State::Ready {
                                    self.in_flight -= 1;
                                    self.shared.ready.fetch_add(1, Ordering::SeqCst);
                                }
                            }
                        }
                        State::Acking => {
                            if ws::find(payload, c.spec.ready.ack).is_some() {
                                c.acks_left -= 1;
                                if c.acks_left == 0 {
                                    c.state = State::Ready;
                                    self.in_flight -= 1;
                                    self.shared.ready.fetch_add(1, Ordering::SeqCst);
                                }
                            }
                        }
                        _ => self.local.other_frames += 1,
                    }
                }
            }
        }
        if delivered_any {
            self.local.last_delivery_ns = now;
        }
        Ok(pos)
    }

    fn close(&mut self, i: usize, why: Option<String>) {
        let c = &mut self.conns[i];
        let was = c.state;
        c.state = State::Closed;
        if let Some(mut s) = c.stream.take() {
            let _ = self.poll.registry().deregister(&mut s);
        }
        c.carry = Vec::new();
        c.out = Vec::new();
        match was {
            State::Ready => self.local.closed += 1,
            State::Closed => {}
            _ => {
                self.in_flight -= 1;
                let why = why.unwrap_or_else(|| "closed before ready".into());
                self.shared.fail(format!("{}: {why}", c.spec.addr));
            }
        }
    }
}

/// Sends the connection's `on_open` frames and moves it to `Acking` or `Ready`.
fn open(c: &mut Conn, masker: &mut Masker) {
    for f in &c.spec.on_open {
        ws::encode(&mut c.out, ws::OP_TEXT, f, masker.next_mask());
    }
    c.acks_left = c.spec.ready.acks;
    c.state = if c.acks_left == 0 {
        State::Ready
    } else {
        State::Acking
    };
}

fn connect(spec: &ConnSpec) -> io::Result<TcpStream> {
    match spec.local_ip {
        None => TcpStream::connect(spec.addr),
        Some(ip) => {
            let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
            sock.set_nonblocking(true)?;
            sock.bind(&SocketAddr::V4(SocketAddrV4::new(ip, 0)).into())?;
            match sock.connect(&spec.addr.into()) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
                Err(e) => return Err(e),
            }
            Ok(TcpStream::from_std(sock.into()))
        }
    }
}
