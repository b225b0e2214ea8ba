//! A TCP forwarder that a test can cut and heal, or have lose one answer: real network
//! failures between a client and LocalStack, with no mock in between.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// Forwards `127.0.0.1:<port>` to a target until cut.
pub struct TcpProxy {
    addr: SocketAddr,
    down: Arc<AtomicBool>,
    lose_answer: Arc<AtomicBool>,
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
        let connections: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let (d, l, c) = (down.clone(), lose_answer.clone(), connections.clone());
        let accept = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                if d.load(Ordering::SeqCst) {
                    continue; // dropped: the client sees the connection closed
                }
                let (target, lose) = (target.clone(), l.clone());
                let task = tokio::spawn(async move {
                    if let Ok(outbound) = TcpStream::connect(&target).await {
                        forward(inbound, outbound, lose).await;
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

/// Copies both ways until either side closes; drops the answer and closes when `lose` is
/// set (once).
async fn forward(inbound: TcpStream, outbound: TcpStream, lose: Arc<AtomicBool>) {
    let (mut client_read, mut client_write) = inbound.into_split();
    let (mut target_read, mut target_write) = outbound.into_split();
    let requests = tokio::io::copy(&mut client_read, &mut target_write);
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
