//! A TCP proxy for fault injection between a client (the checkpointer) and a server
//! (PostgreSQL), on loopback: it forwards bytes both ways and, on command, drops every connection,
//! refuses new ones, stalls or delays traffic, or cuts a connection right after the server has
//! received a given message — a `COMMIT`, or a statement that commits on its own — but before the
//! client hears back (a commit whose outcome the client cannot know).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How traffic flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forward everything.
    Pass,
    /// Close new connections at once (existing ones keep flowing).
    Refuse,
    /// Forward nothing, either way, on any connection, until the mode changes.
    Stall,
    /// Forward each chunk after this delay.
    Delay(Duration),
}

/// A running proxy. Dropping it stops it and closes every connection.
pub struct TcpProxy {
    addr: SocketAddr,
    mode: watch::Sender<Mode>,
    conns: Arc<Mutex<Vec<CancellationToken>>>,
    cut_next: Arc<Mutex<Option<Vec<u8>>>>,
    /// Connections accepted so far.
    pub accepted: Arc<AtomicU64>,
    /// Connections cut right after the message [`TcpProxy::cut_after_next`] named.
    pub commits_cut: Arc<AtomicU64>,
    stop: CancellationToken,
}

impl TcpProxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (mode, mode_rx) = watch::channel(Mode::Pass);
        let conns: Arc<Mutex<Vec<CancellationToken>>> = Arc::default();
        let cut_next: Arc<Mutex<Option<Vec<u8>>>> = Arc::default();
        let accepted = Arc::new(AtomicU64::new(0));
        let commits_cut = Arc::new(AtomicU64::new(0));
        let stop = CancellationToken::new();
        let (c, cut, acc, cc, st) = (
            conns.clone(),
            cut_next.clone(),
            accepted.clone(),
            commits_cut.clone(),
            stop.clone(),
        );
        tokio::spawn(async move {
            loop {
                let (client, _) = tokio::select! {
                    _ = st.cancelled() => return,
                    r = listener.accept() => match r { Ok(x) => x, Err(_) => continue },
                };
                acc.fetch_add(1, Ordering::Relaxed);
                if *mode_rx.borrow() == Mode::Refuse {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                let token = st.child_token();
                c.lock().unwrap().push(token.clone());
                spawn_connection(
                    client,
                    server,
                    token,
                    mode_rx.clone(),
                    cut.clone(),
                    cc.clone(),
                );
            }
        });
        Self {
            addr,
            mode,
            conns,
            cut_next,
            accepted,
            commits_cut,
            stop,
        }
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Changes how traffic flows.
    pub fn set_mode(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// Closes every open connection, both sides.
    pub fn drop_all(&self) {
        for t in self.conns.lock().unwrap().drain(..) {
            t.cancel();
        }
    }

    /// The next `COMMIT` a client sends reaches the server, then its connection is cut before the
    /// answer comes back.
    pub fn cut_next_commit(&self) {
        self.cut_after_next(b"COMMIT\0");
    }

    /// The next client message containing `marker` (a statement's text, or a parameter of it)
    /// reaches the server, then its connection is cut before the answer comes back.
    pub fn cut_after_next(&self, marker: &[u8]) {
        *self.cut_next.lock().unwrap() = Some(marker.to_vec());
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.stop.cancel();
        self.drop_all();
    }
}

/// Waits while the mode is `Stall`, then sleeps the mode's delay.
async fn gate(mode: &mut watch::Receiver<Mode>) {
    loop {
        let m = *mode.borrow_and_update();
        match m {
            Mode::Stall => {
                if mode.changed().await.is_err() {
                    return;
                }
            }
            Mode::Delay(d) => {
                tokio::time::sleep(d).await;
                return;
            }
            Mode::Pass | Mode::Refuse => return,
        }
    }
}

fn spawn_connection(
    client: TcpStream,
    server: TcpStream,
    token: CancellationToken,
    mode: watch::Receiver<Mode>,
    cut_next: Arc<Mutex<Option<Vec<u8>>>>,
    commits_cut: Arc<AtomicU64>,
) {
    // Without this, Nagle's algorithm and delayed ACKs add ~40 ms to every round trip.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    // Set when this connection must swallow the server's answer and close.
    let hold = Arc::new(AtomicBool::new(false));
    let (t1, mut m1, h1) = (token.clone(), mode.clone(), hold.clone());
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = tokio::select! {
                _ = t1.cancelled() => return,
                r = cr.read(&mut buf) => match r { Ok(0) | Err(_) => { t1.cancel(); return } Ok(n) => n },
            };
            gate(&mut m1).await;
            let chunk = &buf[..n];
            let cut = {
                let mut armed = cut_next.lock().unwrap();
                let hit = armed
                    .as_ref()
                    .is_some_and(|m| chunk.windows(m.len()).any(|w| w == m.as_slice()));
                if hit {
                    *armed = None;
                }
                hit
            };
            if cut {
                h1.store(true, Ordering::SeqCst);
                let _ = sw.write_all(chunk).await;
                // Let the server commit, then cut the connection before its answer is passed on.
                tokio::time::sleep(Duration::from_millis(200)).await;
                commits_cut.fetch_add(1, Ordering::Relaxed);
                t1.cancel();
                return;
            }
            if sw.write_all(chunk).await.is_err() {
                t1.cancel();
                return;
            }
        }
    });
    let (t2, mut m2) = (token, mode);
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = tokio::select! {
                _ = t2.cancelled() => return,
                r = sr.read(&mut buf) => match r { Ok(0) | Err(_) => { t2.cancel(); return } Ok(n) => n },
            };
            gate(&mut m2).await;
            if hold.load(Ordering::SeqCst) {
                t2.cancelled().await;
                return;
            }
            if cw.write_all(&buf[..n]).await.is_err() {
                t2.cancel();
                return;
            }
        }
    });
}
