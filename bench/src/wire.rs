//! Counting AWS requests on the wire, the same way for both sides of a benchmark: a
//! forwarder in front of LocalStack that reads each HTTP/1.1 request's headers and body
//! (to find where the next one starts on a kept-alive connection) and counts it by its
//! `X-Amz-Target` (`DynamoDB_20120810.UpdateItem`, `AmazonSQS.ReceiveMessage`) and, for
//! DynamoDB, the table it names. Responses are copied back untouched.
//!
//! Written by hand: a counting proxy is a few dozen lines, and what it must count (the
//! operation and table of a JSON-protocol request) is AWS-specific.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// Requests seen, by (operation, table); the table is empty for requests that name none.
pub type Counts = BTreeMap<(String, String), u64>;

/// A counting forwarder to `upstream`, listening on a loopback port until dropped.
pub struct WireCounter {
    addr: SocketAddr,
    counts: Arc<Mutex<Counts>>,
    accept: tokio::task::AbortHandle,
}

impl WireCounter {
    /// Starts forwarding `127.0.0.1:<port>` to `upstream` (`host:port`).
    pub async fn start(upstream: &str) -> std::io::Result<WireCounter> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let counts = Arc::new(Mutex::new(Counts::new()));
        let upstream = upstream.to_string();
        let kept = counts.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (upstream, counts) = (upstream.clone(), kept.clone());
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(&upstream).await {
                        let _ = forward(client, server, counts).await;
                    }
                });
            }
        })
        .abort_handle();
        Ok(WireCounter {
            addr,
            counts,
            accept,
        })
    }

    /// The endpoint clients use instead of LocalStack's.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What was counted since the last call; starts counting again from zero.
    pub fn take(&self) -> Counts {
        std::mem::take(&mut self.counts.lock().unwrap())
    }
}

impl Drop for WireCounter {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Copies responses back as they come, and requests forward one by one, counting each.
async fn forward(
    client: TcpStream,
    server: TcpStream,
    counts: Arc<Mutex<Counts>>,
) -> std::io::Result<()> {
    let (client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let back =
        tokio::spawn(async move { tokio::io::copy(&mut server_read, &mut client_write).await });
    let mut requests = BufReader::new(client_read);
    loop {
        let mut head = Vec::new();
        let mut target = String::new();
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if requests.read_line(&mut line).await? == 0 {
                back.abort();
                return Ok(());
            }
            head.extend_from_slice(line.as_bytes());
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                let value = value.trim();
                if name.eq_ignore_ascii_case("x-amz-target") {
                    target = value.to_string();
                } else if name.eq_ignore_ascii_case("content-length") {
                    length = value.parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        requests.read_exact(&mut body).await?;
        let table = table_of(&body);
        let operation = if target.is_empty() {
            query_action(&body).unwrap_or_else(|| "(other)".into())
        } else {
            target
        };
        *counts
            .lock()
            .unwrap()
            .entry((operation, table))
            .or_default() += 1;
        server_write.write_all(&head).await?;
        server_write.write_all(&body).await?;
    }
}

/// The `TableName` a JSON request names (empty for none, `(transaction)` for
/// `TransactWriteItems`, whose items may name several).
fn table_of(body: &[u8]) -> String {
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) else {
        return String::new();
    };
    if json.get("TransactItems").is_some() {
        return "(transaction)".into();
    }
    json.get("TableName")
        .and_then(|t| t.as_str())
        .unwrap_or_default()
        .to_string()
}

/// `Action=...` of a query-protocol request.
fn query_action(body: &[u8]) -> Option<String> {
    std::str::from_utf8(body)
        .ok()?
        .split('&')
        .find_map(|kv| kv.strip_prefix("Action="))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_counted_by_its_table_or_its_transaction() {
        assert_eq!(table_of(br#"{"TableName":"t","Key":{}}"#), "t");
        assert_eq!(
            table_of(br#"{"TransactItems":[{"Update":{"TableName":"a"}}]}"#),
            "(transaction)"
        );
        assert_eq!(table_of(b"Action=SendMessage"), "");
        assert_eq!(
            query_action(b"Action=SendMessage&QueueUrl=x").as_deref(),
            Some("SendMessage")
        );
    }
}
