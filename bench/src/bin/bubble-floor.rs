//! `bubble-floor`: the floor of fan-out on this machine.
//!
//! The least work any server can do to deliver a published message to N
//! WebSocket subscribers on loopback: one thread, one `epoll` loop (through
//! `mio`), nonblocking sockets, the frame built once per publish and handed
//! to each subscriber's socket as is. No routing, no history, no JSON, no
//! per-delivery allocation: whatever a real server spends beyond this is its
//! own overhead, and what this spends is the kernel's.
//!
//! It speaks the wire shape nginx + nchan speak in the benchmark, so the
//! load generator drives it unchanged:
//!
//! - `GET /sub/<channel>` with `Sec-WebSocket-Key` upgrades to a WebSocket
//!   subscribed to `<channel>`; the client's frames are read and discarded,
//!   and its Close (or EOF) closes the socket.
//! - `POST /pub/<channel>` with a `Content-Length` body sends the body as
//!   one unmasked text frame to every subscriber, then answers `201` on the
//!   keep-alive connection.
//! - Anything else gets `404`.
//!
//! Two delivery modes: `write` makes one `write` per subscriber per publish
//! at once; `writev` queues frames and flushes every socket with one `write`
//! of everything queued at the end of each event-loop iteration, so publishes
//! handled in the same iteration leave in one system call. A socket whose
//! queue exceeds [`MAX_QUEUE`] is closed. SIGTERM and SIGINT end the loop.

use std::collections::HashMap;
use std::io::{self, ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::ops::Range;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::ExitCode;

use base64::Engine;
use clap::{Parser, ValueEnum};
use mio::net::{TcpListener, TcpStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use sha1::{Digest, Sha1};

/// A socket whose unsent bytes exceed this is closed.
const MAX_QUEUE: usize = 1 << 20;
/// Largest request head (request line and headers) accepted.
const MAX_HEAD: usize = 16 << 10;
/// Largest publish body accepted (its frame must fit a queue).
const MAX_BODY: usize = MAX_QUEUE - 16;
/// Listen backlog (the kernel caps it at `somaxconn`).
const BACKLOG: i32 = 4096;
/// Bytes read per `read` call.
const READ_CHUNK: usize = 64 << 10;
/// Token of the listening socket.
const LISTENER: Token = Token(0);
/// Token of the signal descriptor.
const SIGNALS: Token = Token(1);
/// Connection `i` is registered as `Token(i + FIRST_CONN)`.
const FIRST_CONN: usize = 2;
/// The GUID RFC 6455 appends to the client's key.
const WS_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/// The answer to a publish.
const CREATED: &[u8] = b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
/// The answer to anything else.
const NOT_FOUND: &[u8] = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";

/// How frames reach the sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// One `write` per subscriber per publish, immediately.
    Write,
    /// Queue, then one `write` per socket at the end of each loop iteration.
    Writev,
    /// One `send` per subscriber per publish, all of a publish's sends
    /// submitted to the kernel at once through `io_uring`.
    Uring,
}

/// Submission slots of the `uring` mode's ring.
const RING_ENTRIES: u32 = 4096;

/// The `uring` mode's ring: one thread submits, completions are posted
/// when it asks, and the sockets are registered descriptors.
fn uring() -> io::Result<io_uring::IoUring> {
    let ring = io_uring::IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(RING_ENTRIES)?;
    // Connection `i` sends through registered slot `i`: as many slots as
    // the process may open descriptors.
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid `rlimit` for the call to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let slots = limit.rlim_cur.min(65_536) as u32;
    ring.submitter().register_files_sparse(slots)?;
    Ok(ring)
}

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "bubble-floor",
    about = "The fan-out floor: a minimal server that writes pre-built WebSocket frames"
)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Delivery mode.
    #[arg(long, value_enum, default_value_t = Mode::Write)]
    mode: Mode,
}

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// A WebSocket upgrade on `/sub/<channel>`; the range is the key.
    Subscribe(Range<usize>),
    /// A publish on `/pub/<channel>`; the range is the body.
    Publish(Range<usize>),
    /// Anything else (answered with 404).
    Other,
}

/// A complete request at the start of a buffer; ranges index that buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Request {
    /// What it asks for.
    kind: Kind,
    /// The channel name (empty for [`Kind::Other`]).
    channel: Range<usize>,
    /// Bytes the request occupies, body included.
    len: usize,
}

/// Why a request cannot be served (the connection is closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BadRequest {
    /// The head exceeds [`MAX_HEAD`].
    HeadTooLong,
    /// The request line is not `METHOD PATH VERSION`.
    RequestLine,
    /// `Content-Length` is not a number or exceeds [`MAX_BODY`].
    ContentLength,
    /// Bodies other than `Content-Length` ones are not supported.
    Chunked,
}

/// The headers the floor looks at.
#[derive(Debug, Default)]
struct Headers {
    /// `Content-Length`, if present.
    content_length: Option<usize>,
    /// Where `Sec-WebSocket-Key`'s value lies, if present.
    key: Option<Range<usize>>,
}

/// Position of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `range` trimmed of ASCII spaces and tabs on both ends, within `buf`.
fn trim(buf: &[u8], mut range: Range<usize>) -> Range<usize> {
    while range.start < range.end && matches!(buf[range.start], b' ' | b'\t') {
        range.start += 1;
    }
    while range.end > range.start && matches!(buf[range.end - 1], b' ' | b'\t') {
        range.end -= 1;
    }
    range
}

/// Reads the header lines of `buf[start..end]` (each ending in `\r\n`).
fn parse_headers(buf: &[u8], start: usize, end: usize) -> Result<Headers, BadRequest> {
    let mut headers = Headers::default();
    let mut at = start;
    while at < end {
        let line_end = find(&buf[at..end], b"\r\n").map_or(end, |i| at + i);
        if let Some(colon) = buf[at..line_end].iter().position(|&b| b == b':') {
            let name = &buf[at..at + colon];
            let value = trim(buf, at + colon + 1..line_end);
            if name.eq_ignore_ascii_case(b"content-length") {
                let n = std::str::from_utf8(&buf[value])
                    .ok()
                    .and_then(|s| s.parse::<usize>().ok())
                    .filter(|&n| n <= MAX_BODY)
                    .ok_or(BadRequest::ContentLength)?;
                headers.content_length = Some(n);
            } else if name.eq_ignore_ascii_case(b"sec-websocket-key") {
                headers.key = Some(value);
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                return Err(BadRequest::Chunked);
            }
        }
        at = line_end + 2;
    }
    Ok(headers)
}

/// Splits the request line `buf[..end]` into method and path ranges.
fn parse_request_line(buf: &[u8], end: usize) -> Result<(Range<usize>, Range<usize>), BadRequest> {
    let line = &buf[..end];
    let sp1 = line
        .iter()
        .position(|&b| b == b' ')
        .ok_or(BadRequest::RequestLine)?;
    let sp2 = line[sp1 + 1..]
        .iter()
        .position(|&b| b == b' ')
        .map(|i| sp1 + 1 + i)
        .ok_or(BadRequest::RequestLine)?;
    if !line[sp2 + 1..].starts_with(b"HTTP/1.") {
        return Err(BadRequest::RequestLine);
    }
    Ok((0..sp1, sp1 + 1..sp2))
}

/// The channel of `path` if it starts with `prefix`: the rest up to any
/// query string, when not empty.
fn channel_of(buf: &[u8], path: &Range<usize>, prefix: &[u8]) -> Option<Range<usize>> {
    if !buf[path.clone()].starts_with(prefix) {
        return None;
    }
    let start = path.start + prefix.len();
    let end = buf[start..path.end]
        .iter()
        .position(|&b| b == b'?')
        .map_or(path.end, |i| start + i);
    (end > start).then_some(start..end)
}

/// Parses the request at the start of `buf`: `Ok(None)` while incomplete.
fn parse_request(buf: &[u8]) -> Result<Option<Request>, BadRequest> {
    let Some(head_end) = find(buf, b"\r\n\r\n") else {
        return if buf.len() > MAX_HEAD {
            Err(BadRequest::HeadTooLong)
        } else {
            Ok(None)
        };
    };
    if head_end > MAX_HEAD {
        return Err(BadRequest::HeadTooLong);
    }
    let line_end = find(&buf[..head_end + 2], b"\r\n").unwrap_or(head_end);
    let (method, path) = parse_request_line(buf, line_end)?;
    let headers = parse_headers(buf, line_end + 2, head_end + 2)?;
    let body = head_end + 4..head_end + 4 + headers.content_length.unwrap_or(0);
    if buf.len() < body.end {
        return Ok(None);
    }
    let (kind, channel) = classify(buf, method, path, headers.key, body.clone());
    Ok(Some(Request {
        kind,
        channel,
        len: body.end,
    }))
}

/// Tells a subscribe from a publish from anything else.
fn classify(
    buf: &[u8],
    method: Range<usize>,
    path: Range<usize>,
    key: Option<Range<usize>>,
    body: Range<usize>,
) -> (Kind, Range<usize>) {
    let method = &buf[method];
    if method == b"GET" {
        if let (Some(channel), Some(key)) = (channel_of(buf, &path, b"/sub/"), key) {
            return (Kind::Subscribe(key), channel);
        }
    } else if method == b"POST" {
        if let Some(channel) = channel_of(buf, &path, b"/pub/") {
            return (Kind::Publish(body), channel);
        }
    }
    (Kind::Other, 0..0)
}

/// Replaces `out` with one final, unmasked text frame carrying `payload`.
fn build_frame(out: &mut Vec<u8>, payload: &[u8]) {
    out.clear();
    out.push(0x81);
    let len = payload.len();
    if len < 126 {
        out.push(len as u8);
    } else if len <= usize::from(u16::MAX) {
        out.push(126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(payload);
}

/// `Sec-WebSocket-Accept` for the client's `key` (RFC 6455, 4.2.2).
fn accept_key(key: &[u8]) -> String {
    let mut sha = Sha1::new();
    sha.update(key);
    sha.update(WS_GUID.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(sha.finalize())
}

/// The `101` answer to an upgrade with `key`.
fn switching_protocols(key: &[u8]) -> String {
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {}\r\n\r\n",
        accept_key(key)
    )
}

/// Walks the client's frames without keeping them, to notice a Close.
#[derive(Debug, Default)]
struct FrameSkipper {
    /// The header being gathered.
    header: [u8; 14],
    /// Bytes of it gathered so far.
    have: usize,
    /// Payload bytes of the current frame still to skip.
    skip: u64,
}

/// Length of a client frame header, from its first two bytes.
fn header_len(second: u8) -> usize {
    let masked = if second & 0x80 != 0 { 4 } else { 0 };
    masked
        + match second & 0x7f {
            126 => 4,
            127 => 10,
            _ => 2,
        }
}

/// Payload length announced by a complete frame header.
fn payload_len(header: &[u8]) -> u64 {
    match header[1] & 0x7f {
        126 => u64::from(u16::from_be_bytes([header[2], header[3]])),
        127 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&header[2..10]);
            u64::from_be_bytes(b)
        }
        n => u64::from(n),
    }
}

impl FrameSkipper {
    /// Consumes `data`; true once a Close frame's header has been seen.
    fn feed(&mut self, mut data: &[u8]) -> bool {
        while !data.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(data.len() as u64) as usize;
                self.skip -= n as u64;
                data = &data[n..];
                continue;
            }
            let want = if self.have < 2 {
                2
            } else {
                header_len(self.header[1])
            };
            let n = (want - self.have).min(data.len());
            self.header[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if self.have >= 2 && self.have == header_len(self.header[1]) {
                if self.header[0] & 0x0f == 0x8 {
                    return true;
                }
                self.skip = payload_len(&self.header);
                self.have = 0;
            }
        }
        false
    }
}

/// Where a subscriber sits: its channel and its index in that channel's list.
#[derive(Debug, Clone, Copy)]
struct Sub {
    /// The channel's id.
    chan: usize,
    /// Index in the channel's subscriber list.
    slot: usize,
}

/// One accepted connection: HTTP until it upgrades, then a subscriber.
#[derive(Debug)]
struct Conn {
    /// The socket.
    stream: TcpStream,
    /// Request bytes not yet served (HTTP connections only).
    inbuf: Vec<u8>,
    /// Bytes accepted for sending but not yet written.
    out: Vec<u8>,
    /// Whether it is in the server's flush list (`writev` mode).
    dirty: bool,
    /// Set once upgraded.
    sub: Option<Sub>,
    /// The client's frames, once upgraded.
    skipper: FrameSkipper,
}

/// Failed to hand bytes to a socket; it must be closed.
#[derive(Debug)]
struct Dead;

/// One `write` of `bytes`, retried only on `EINTR`; `WouldBlock` is 0 bytes.
fn write_once(stream: &mut TcpStream, bytes: &[u8]) -> Result<usize, Dead> {
    loop {
        match stream.write(bytes) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(0),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return Err(Dead),
        }
    }
}

impl Conn {
    /// A fresh HTTP connection.
    fn new(stream: TcpStream) -> Self {
        Conn {
            stream,
            inbuf: Vec::new(),
            out: Vec::new(),
            dirty: false,
            sub: None,
            skipper: FrameSkipper::default(),
        }
    }

    /// Hands `bytes` to the socket the `mode` way; `token` is its index,
    /// pushed on `dirty` when it joins the flush list.
    fn send(
        &mut self,
        token: usize,
        bytes: &[u8],
        mode: Mode,
        dirty: &mut Vec<usize>,
    ) -> Result<(), Dead> {
        if matches!(mode, Mode::Write | Mode::Uring) && self.out.is_empty() {
            let n = write_once(&mut self.stream, bytes)?;
            self.out.extend_from_slice(&bytes[n..]);
        } else {
            self.out.extend_from_slice(bytes);
            if mode == Mode::Writev && !self.dirty {
                self.dirty = true;
                dirty.push(token);
            }
        }
        if self.out.len() > MAX_QUEUE {
            return Err(Dead);
        }
        Ok(())
    }

    /// One `write` of everything queued; what is left waits for writability.
    fn flush(&mut self) -> Result<(), Dead> {
        if self.out.is_empty() {
            return Ok(());
        }
        let n = write_once(&mut self.stream, &self.out)?;
        self.out.drain(..n);
        Ok(())
    }
}

/// The id of channel `name` in `channels`, created (with an empty list in
/// `subs`) on first use.
fn channel_id(
    channels: &mut HashMap<Vec<u8>, usize>,
    subs: &mut Vec<Vec<usize>>,
    name: &[u8],
) -> usize {
    if let Some(&id) = channels.get(name) {
        return id;
    }
    let id = subs.len();
    subs.push(Vec::new());
    channels.insert(name.to_vec(), id);
    id
}

/// The server: its sockets, channels and reused buffers.
struct Server {
    /// The event loop.
    poll: Poll,
    /// The listening socket.
    listener: TcpListener,
    /// Delivery mode.
    mode: Mode,
    /// Connections by index (`Token(index + FIRST_CONN)`).
    conns: Vec<Option<Conn>>,
    /// Free indices of `conns`.
    free: Vec<usize>,
    /// Channel ids by name.
    channels: HashMap<Vec<u8>, usize>,
    /// Subscribers (connection indices) by channel id.
    subs: Vec<Vec<usize>>,
    /// The frame being published (reused).
    frame: Vec<u8>,
    /// The `uring` mode's ring.
    ring: Option<io_uring::IoUring>,
    /// Read buffer (reused).
    scratch: Vec<u8>,
    /// Connections with queued bytes to flush at the end of the iteration.
    dirty: Vec<usize>,
    /// Connections to close after a delivery loop.
    doomed: Vec<usize>,
}

impl Server {
    /// A server listening with `listener`, delivering the `mode` way.
    fn new(listener: TcpListener, mode: Mode) -> io::Result<Self> {
        Ok(Server {
            poll: Poll::new()?,
            listener,
            mode,
            conns: Vec::new(),
            free: Vec::new(),
            channels: HashMap::new(),
            subs: Vec::new(),
            frame: Vec::new(),
            ring: match mode {
                Mode::Uring => Some(uring()?),
                Mode::Write | Mode::Writev => None,
            },
            scratch: vec![0; READ_CHUNK],
            dirty: Vec::new(),
            doomed: Vec::new(),
        })
    }

    /// Runs until a signal on `signals` arrives.
    fn run(&mut self, signals: &OwnedFd) -> io::Result<()> {
        let registry = self.poll.registry();
        registry.register(&mut self.listener, LISTENER, Interest::READABLE)?;
        registry.register(
            &mut SourceFd(&signals.as_raw_fd()),
            SIGNALS,
            Interest::READABLE,
        )?;
        let mut events = Events::with_capacity(1024);
        loop {
            match self.poll.poll(&mut events, None) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for event in events.iter() {
                match event.token() {
                    SIGNALS => return Ok(()),
                    LISTENER => self.accept_all(),
                    Token(t) => self.on_event(t - FIRST_CONN, event),
                }
            }
            self.flush_dirty();
        }
    }

    /// Accepts every pending connection.
    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => self.add(stream),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    eprintln!("bubble-floor: accept: {e}");
                    return;
                }
            }
        }
    }

    /// Registers a new connection (readable and writable, edge-triggered).
    fn add(&mut self, mut stream: TcpStream) {
        let _ = stream.set_nodelay(true);
        let index = self.free.pop().unwrap_or(self.conns.len());
        let token = Token(index + FIRST_CONN);
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = self.poll.registry().register(&mut stream, token, interest) {
            eprintln!("bubble-floor: register: {e}");
            self.free.push(index);
            return;
        }
        if let Some(ring) = &self.ring {
            let fd = stream.as_raw_fd();
            if ring
                .submitter()
                .register_files_update(index as u32, &[fd])
                .is_err()
            {
                eprintln!("bubble-floor: too many connections for the ring");
            }
        }
        let conn = Some(Conn::new(stream));
        if index == self.conns.len() {
            self.conns.push(conn);
        } else {
            self.conns[index] = conn;
        }
    }

    /// Closes connection `t` (if open) and drops its subscription.
    fn close(&mut self, t: usize) {
        let Some(conn) = self.conns.get_mut(t).and_then(Option::take) else {
            return;
        };
        if let Some(ring) = &self.ring {
            // The ring's reference would keep the socket open.
            let _ = ring.submitter().register_files_update(t as u32, &[-1]);
        }
        if let Some(Sub { chan, slot }) = conn.sub {
            let list = &mut self.subs[chan];
            list.swap_remove(slot);
            if let Some(&moved) = list.get(slot) {
                if let Some(Some(Conn { sub: Some(s), .. })) = self.conns.get_mut(moved) {
                    s.slot = slot;
                }
            }
        }
        self.free.push(t);
    }

    /// Handles readiness of connection `t`.
    fn on_event(&mut self, t: usize, event: &mio::event::Event) {
        if event.is_readable() || event.is_read_closed() || event.is_error() {
            self.read(t);
        }
        if event.is_writable() {
            self.on_writable(t);
        }
    }

    /// Flushes connection `t` now (`write`) or at the end of the iteration
    /// (`writev`).
    fn on_writable(&mut self, t: usize) {
        let Some(Some(conn)) = self.conns.get_mut(t) else {
            return;
        };
        if conn.out.is_empty() {
            return;
        }
        match self.mode {
            Mode::Write | Mode::Uring => {
                if conn.flush().is_err() {
                    self.close(t);
                }
            }
            Mode::Writev => {
                if !conn.dirty {
                    conn.dirty = true;
                    self.dirty.push(t);
                }
            }
        }
    }

    /// Reads connection `t` until it would block, serving what arrives.
    fn read(&mut self, t: usize) {
        loop {
            let Some(Some(conn)) = self.conns.get_mut(t) else {
                return;
            };
            let n = match conn.stream.read(&mut self.scratch) {
                Ok(0) => return self.close(t),
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return self.close(t),
            };
            if conn.sub.is_some() {
                if conn.skipper.feed(&self.scratch[..n]) {
                    return self.close(t);
                }
            } else {
                conn.inbuf.extend_from_slice(&self.scratch[..n]);
                self.serve(t);
            }
        }
    }

    /// Serves every complete request in connection `t`'s input.
    fn serve(&mut self, t: usize) {
        let mut at = 0;
        loop {
            let Some(Some(conn)) = self.conns.get(t) else {
                return;
            };
            if conn.sub.is_some() {
                return self.after_upgrade(t, at);
            }
            let req = match parse_request(&conn.inbuf[at..]) {
                Ok(Some(req)) => req,
                Ok(None) => break,
                Err(_) => return self.close(t),
            };
            if self.handle(t, at, &req).is_err() {
                return self.close(t);
            }
            at += req.len;
        }
        if let Some(Some(conn)) = self.conns.get_mut(t) {
            conn.inbuf.drain(..at);
        }
    }

    /// Serves one request of connection `t`, found at `at` in its input.
    fn handle(&mut self, t: usize, at: usize, req: &Request) -> Result<(), Dead> {
        match &req.kind {
            Kind::Publish(body) => self.publish(t, at, req.channel.clone(), body.clone()),
            Kind::Subscribe(key) => self.subscribe(t, at, req.channel.clone(), key.clone()),
            Kind::Other => self.reply(t, NOT_FOUND),
        }
    }

    /// Sends `bytes` on connection `t`.
    fn reply(&mut self, t: usize, bytes: &[u8]) -> Result<(), Dead> {
        match self.conns.get_mut(t) {
            Some(Some(conn)) => conn.send(t, bytes, self.mode, &mut self.dirty),
            _ => Err(Dead),
        }
    }

    /// Builds the frame of a publish, delivers it, answers 201.
    fn publish(
        &mut self,
        t: usize,
        at: usize,
        channel: Range<usize>,
        body: Range<usize>,
    ) -> Result<(), Dead> {
        let Some(Some(conn)) = self.conns.get(t) else {
            return Err(Dead);
        };
        let input = &conn.inbuf[at..];
        let chan = self.channels.get(&input[channel]).copied();
        if let Some(chan) = chan {
            build_frame(&mut self.frame, &input[body]);
            self.deliver(chan);
        }
        self.reply(t, CREATED)
    }

    /// Hands the current frame to every subscriber of `chan`; closes those
    /// that fail or overflow.
    fn deliver(&mut self, chan: usize) {
        if self.ring.is_some() {
            return self.deliver_uring(chan);
        }
        for &s in &self.subs[chan] {
            if let Some(Some(conn)) = self.conns.get_mut(s) {
                if conn
                    .send(s, &self.frame, self.mode, &mut self.dirty)
                    .is_err()
                {
                    self.doomed.push(s);
                }
            }
        }
        while let Some(s) = self.doomed.pop() {
            self.close(s);
        }
    }

    /// `uring` mode: one `send` per idle subscriber, all submitted with one
    /// system call; what a send did not take waits for writability.
    fn deliver_uring(&mut self, chan: usize) {
        let Some(ring) = self.ring.as_mut() else {
            return;
        };
        let flags = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
        let subs = &self.subs[chan];
        for batch in subs.chunks(RING_ENTRIES as usize) {
            let mut pending = 0;
            for &s in batch {
                let Some(Some(conn)) = self.conns.get_mut(s) else {
                    continue;
                };
                if !conn.out.is_empty() {
                    conn.out.extend_from_slice(&self.frame);
                    if conn.out.len() > MAX_QUEUE {
                        self.doomed.push(s);
                    }
                    continue;
                }
                let entry = io_uring::opcode::Send::new(
                    io_uring::types::Fixed(s as u32),
                    self.frame.as_ptr(),
                    self.frame.len() as u32,
                )
                .flags(flags)
                .build()
                .user_data(s as u64);
                // SAFETY: the frame buffer and the socket outlive the
                // submission: every entry completes (MSG_DONTWAIT) before
                // `submit_and_wait` returns and the buffer is not touched
                // until the completions are read below.
                if unsafe { ring.submission().push(&entry) }.is_ok() {
                    pending += 1;
                }
            }
            if pending == 0 {
                continue;
            }
            if ring.submit_and_wait(pending).is_err() {
                self.doomed.extend_from_slice(batch);
                continue;
            }
            for cqe in ring.completion() {
                let s = cqe.user_data() as usize;
                let Some(Some(conn)) = self.conns.get_mut(s) else {
                    continue;
                };
                let res = cqe.result();
                if res == -libc::EAGAIN {
                    conn.out.extend_from_slice(&self.frame);
                } else if res < 0 {
                    self.doomed.push(s);
                } else if (res as usize) < self.frame.len() {
                    conn.out.extend_from_slice(&self.frame[res as usize..]);
                }
            }
        }
        while let Some(s) = self.doomed.pop() {
            self.close(s);
        }
    }

    /// Answers an upgrade and subscribes connection `t` to `channel`.
    fn subscribe(
        &mut self,
        t: usize,
        at: usize,
        channel: Range<usize>,
        key: Range<usize>,
    ) -> Result<(), Dead> {
        let Some(Some(conn)) = self.conns.get(t) else {
            return Err(Dead);
        };
        let input = &conn.inbuf[at..];
        let response = switching_protocols(&input[key]);
        let chan = channel_id(&mut self.channels, &mut self.subs, &input[channel]);
        let slot = self.subs[chan].len();
        self.subs[chan].push(t);
        if let Some(Some(conn)) = self.conns.get_mut(t) {
            conn.sub = Some(Sub { chan, slot });
        }
        self.reply(t, response.as_bytes())
    }

    /// After the upgrade request (which ended before `at`), the input holds
    /// client frames: skip them and free the request buffer.
    fn after_upgrade(&mut self, t: usize, at: usize) {
        let Some(Some(conn)) = self.conns.get_mut(t) else {
            return;
        };
        let inbuf = std::mem::take(&mut conn.inbuf);
        if conn.skipper.feed(&inbuf[at..]) {
            self.close(t);
        }
    }

    /// One `write` per queued socket (`writev` mode's end of iteration).
    fn flush_dirty(&mut self) {
        let mut list = std::mem::take(&mut self.dirty);
        for &t in &list {
            let Some(Some(conn)) = self.conns.get_mut(t) else {
                continue;
            };
            conn.dirty = false;
            if conn.flush().is_err() {
                self.close(t);
            }
        }
        list.clear();
        self.dirty = list;
    }
}

/// Binds a nonblocking listener on `addr` with a [`BACKLOG`]-deep queue.
fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    socket.set_nonblocking(true)?;
    Ok(TcpListener::from_std(socket.into()))
}

/// Blocks SIGTERM and SIGINT and returns a descriptor that reads them.
fn signal_fd() -> io::Result<OwnedFd> {
    // SAFETY: `set` is initialised by `sigemptyset` before use; the calls
    // only read it, and a non-negative `signalfd` result is a descriptor we
    // own from here on.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        let fd = libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// Binds, announces the address, serves until signalled.
fn serve(args: &Args) -> io::Result<()> {
    let signals = signal_fd()?;
    let listener = bind(args.listen)?;
    let addr = listener.local_addr()?;
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "listening on http://{addr}")?;
    stdout.flush()?;
    drop(stdout);
    Server::new(listener, args.mode)?.run(&signals)
}

/// Parses the command line and serves; failures go to stderr.
fn main() -> ExitCode {
    let args = Args::parse();
    match serve(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bubble-floor: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PUB: &[u8] = b"POST /pub/a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";

    fn parse(buf: &[u8]) -> Request {
        parse_request(buf).expect("well formed").expect("complete")
    }

    #[test]
    fn parses_a_publish() {
        let req = parse(PUB);
        assert_eq!(&PUB[req.channel.clone()], b"a");
        assert_eq!(req.len, PUB.len());
        let Kind::Publish(body) = req.kind else {
            panic!("not a publish: {req:?}");
        };
        assert_eq!(&PUB[body], b"hello");
    }

    #[test]
    fn parses_an_upgrade() {
        let buf = b"GET /sub/chan1?x=1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\
                    Connection: Upgrade\r\nsec-websocket-key:  dGhlIHNhbXBsZSBub25jZQ== \r\n\
                    Sec-WebSocket-Version: 13\r\n\r\n\x81\x80";
        let req = parse(buf);
        assert_eq!(&buf[req.channel.clone()], b"chan1");
        assert_eq!(req.len, buf.len() - 2);
        let Kind::Subscribe(key) = req.kind else {
            panic!("not a subscribe: {req:?}");
        };
        assert_eq!(&buf[key], b"dGhlIHNhbXBsZSBub25jZQ==");
    }

    #[test]
    fn waits_for_split_requests() {
        for cut in 0..PUB.len() {
            assert_eq!(parse_request(&PUB[..cut]), Ok(None), "cut at {cut}");
        }
    }

    #[test]
    fn parses_pipelined_requests() {
        let mut buf = PUB.to_vec();
        buf.extend_from_slice(b"POST /pub/b HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi");
        buf.extend_from_slice(b"GET /x HTTP/1.1\r\n\r\nPOST");
        let first = parse(&buf);
        let rest = &buf[first.len..];
        let second = parse(rest);
        assert_eq!(&rest[second.channel.clone()], b"b");
        assert_eq!(second.kind, Kind::Publish(second.len - 2..second.len));
        let rest = &rest[second.len..];
        let third = parse(rest);
        assert_eq!(third.kind, Kind::Other);
        assert_eq!(parse_request(&rest[third.len..]), Ok(None));
    }

    #[test]
    fn sends_everything_else_to_404() {
        for buf in [
            &b"GET /sub/a HTTP/1.1\r\n\r\n"[..],
            b"GET /pub/a HTTP/1.1\r\n\r\n",
            b"POST /sub/a HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
            b"POST /pub/ HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(
                parse(buf).kind,
                Kind::Other,
                "{}",
                String::from_utf8_lossy(buf)
            );
        }
    }

    #[test]
    fn refuses_malformed_requests() {
        let long = vec![b'a'; MAX_HEAD + 1];
        assert_eq!(parse_request(&long), Err(BadRequest::HeadTooLong));
        assert_eq!(
            parse_request(b"NONSENSE\r\n\r\n"),
            Err(BadRequest::RequestLine)
        );
        assert_eq!(
            parse_request(b"POST /pub/a HTTP/1.1\r\nContent-Length: x\r\n\r\n"),
            Err(BadRequest::ContentLength)
        );
        assert_eq!(
            parse_request(b"POST /pub/a HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n"),
            Err(BadRequest::ContentLength)
        );
        assert_eq!(
            parse_request(b"POST /pub/a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(BadRequest::Chunked)
        );
    }

    #[test]
    fn builds_frames_of_every_length_class() {
        let mut out = vec![9, 9, 9];
        build_frame(&mut out, b"abc");
        assert_eq!(out, b"\x81\x03abc");
        build_frame(&mut out, &[b'x'; 126]);
        assert_eq!((&out[..4], out.len()), (&[0x81, 126, 0, 126][..], 130));
        build_frame(&mut out, &[b'x'; 70_000]);
        let mut head = vec![0x81, 127];
        head.extend_from_slice(&70_000u64.to_be_bytes());
        assert_eq!((&out[..10], out.len()), (&head[..], 70_010));
    }

    #[test]
    fn computes_the_rfc_6455_accept_key() {
        assert_eq!(
            accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        assert!(switching_protocols(b"dGhlIHNhbXBsZSBub25jZQ==")
            .contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
    }

    #[test]
    fn skips_client_frames_and_spots_a_close() {
        // A masked ping with 3 bytes, a masked 200-byte text, then a close,
        // fed one byte at a time.
        let mut bytes = vec![0x89, 0x83, 1, 2, 3, 4, b'a', b'b', b'c'];
        bytes.extend_from_slice(&[0x81, 0x80 | 126, 0, 200, 1, 2, 3, 4]);
        bytes.extend(std::iter::repeat_n(0x88, 200));
        let close = [0x88, 0x80, 1, 2, 3, 4];
        let mut skipper = FrameSkipper::default();
        for b in &bytes {
            assert!(!skipper.feed(std::slice::from_ref(b)));
        }
        assert!(!skipper.feed(&close[..1]));
        assert!(skipper.feed(&close[1..]));
        let mut whole = FrameSkipper::default();
        bytes.extend_from_slice(&close);
        assert!(whole.feed(&bytes));
    }
}
