//! A TCP forwarder that a test can cut and heal, have lose one answer, or hold one request:
//! real network failures between a client and LocalStack, with no mock in between.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// A proxy to the tests' LocalStack.
pub async fn to_localstack() -> TcpProxy {
    TcpProxy::start(crate::endpoint().trim_start_matches("http://"))
        .await
        .expect("a loopback port to listen on")
}

/// Forwards `127.0.0.1:<port>` to a target until cut.
pub struct TcpProxy {
    addr: SocketAddr,
    down: Arc<AtomicBool>,
    lose_answer: Arc<AtomicBool>,
    hold: Arc<Mutex<Option<Hold>>>,
    connections: Arc<Mutex<Vec<AbortHandle>>>,
    accept: AbortHandle,
}

impl TcpProxy {
    /// Starts forwarding to `target` (e.g. `127.0.0.1:4566`).
    pub async fn start(target: &str) -> std::io::Result<TcpProxy> {
        let target = target.to_string();
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let down = Arc::new(AtomicBool::new(false));
        let lose_answer = Arc::new(AtomicBool::new(false));
        let hold: Arc<Mutex<Option<Hold>>> = Arc::default();
        let connections: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let (d, l, c, h) = (
            down.clone(),
            lose_answer.clone(),
            connections.clone(),
            hold.clone(),
        );
        let accept = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                if d.load(Ordering::SeqCst) {
                    continue; // dropped: the client sees the connection closed
                }
                let (target, lose, hold) = (target.clone(), l.clone(), h.clone());
                let task = tokio::spawn(async move {
                    if let Ok(outbound) = TcpStream::connect(&target).await {
                        forward(inbound, outbound, lose, hold).await;
                    }
                });
                c.lock().unwrap().push(task.abort_handle());
            }
        })
        .abort_handle();
        Ok(TcpProxy {
            addr,
            down,
            lose_answer,
            hold,
            connections,
            accept,
        })
    }

    /// `http://127.0.0.1:<port>`, to use as an endpoint URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Drops every open connection and refuses new ones.
    pub fn cut(&self) {
        self.down.store(true, Ordering::SeqCst);
        for c in self.connections.lock().unwrap().drain(..) {
            c.abort();
        }
    }

    /// The next answer from the target is dropped and its connection closed: the request
    /// took effect, the client never learns it (and its SDK tries again).
    pub fn lose_next_answer(&self) {
        self.lose_answer.store(true, Ordering::SeqCst);
    }

    /// The next request whose bytes contain `marker` reaches the target only `hold` later
    /// (and its answer the client): a slow or throttled write. Other connections flow
    /// meanwhile.
    pub fn hold_request(&self, marker: &str, hold: Duration) {
        *self.hold.lock().unwrap() = Some(Hold {
            marker: marker.as_bytes().to_vec(),
            hold,
        });
    }

    /// Forwards again.
    pub fn heal(&self) {
        self.down.store(false, Ordering::SeqCst);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}

/// A request to hold back, armed by [`TcpProxy::hold_request`].
struct Hold {
    marker: Vec<u8>,
    hold: Duration,
}

/// Copies both ways until either side closes; drops the answer and closes when `lose` is
/// set (once); delays a request that matches `hold` (once).
async fn forward(
    inbound: TcpStream,
    outbound: TcpStream,
    lose: Arc<AtomicBool>,
    hold: Arc<Mutex<Option<Hold>>>,
) {
    let (mut client_read, mut client_write) = inbound.into_split();
    let (mut target_read, mut target_write) = outbound.into_split();
    let requests = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = client_read.read(&mut buf).await?;
            if n == 0 {
                return Ok::<_, std::io::Error>(());
            }
            let chunk = &buf[..n];
            let wait = {
                let mut armed = hold.lock().unwrap();
                let matches = armed.as_ref().is_some_and(|h| {
                    chunk
                        .windows(h.marker.len())
                        .any(|w| w == h.marker.as_slice())
                });
                if matches {
                    armed.take().map(|h| h.hold)
                } else {
                    None
                }
            };
            if let Some(wait) = wait {
                tokio::time::sleep(wait).await;
            }
            target_write.write_all(chunk).await?;
        }
    };
    let answers = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = target_read.read(&mut buf).await?;
            if n == 0 || lose.swap(false, Ordering::SeqCst) {
                return Ok::<_, std::io::Error>(());
            }
            client_write.write_all(&buf[..n]).await?;
        }
    };
    tokio::select! {
        _ = requests => {}
        _ = answers => {}
    }
}
