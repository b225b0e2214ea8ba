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
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let back =
        tokio::spawn(async move { tokio::io::copy(&mut server_read, &mut client_write).await });
    let mut requests = BufReader::new(client_read);
    loop {
        let mut head = Vec::new();
        let mut target = String::new();
        let mut request_line = String::new();
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
            if request_line.is_empty() {
                request_line = header.to_string();
                continue;
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
        let (table, items) = tables_of(&body);
        let operation = if target.is_empty() {
            query_action(&body)
                .or_else(|| rest_operation(&request_line))
                .unwrap_or_else(|| "(other)".into())
        } else {
            target
        };
        {
            let mut counts = counts.lock().unwrap();
            *counts.entry((operation, table)).or_default() += 1;
            for item in items {
                *counts
                    .entry((TRANSACTION_ITEM.to_string(), item))
                    .or_default() += 1;
            }
        }
        // One write per request, on sockets without Nagle's delay: a request split in two
        // writes would wait for the first one's (delayed) acknowledgement, tens of
        // milliseconds that a side making one request at a time would pay on every call.
        head.extend_from_slice(&body);
        server_write.write_all(&head).await?;
    }
}

/// The operation under which the items of a `TransactWriteItems` are counted, one per
/// item, by their table (DynamoDB bills a transaction per item, at twice a write's units).
pub const TRANSACTION_ITEM: &str = "item of a TransactWriteItems";

/// The `TableName` a JSON request names (empty for none, `(transaction)` for
/// `TransactWriteItems`), and the table of each item of a transaction.
fn tables_of(body: &[u8]) -> (String, Vec<String>) {
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) else {
        return (String::new(), Vec::new());
    };
    if let Some(items) = json.get("TransactItems").and_then(|t| t.as_array()) {
        let tables = items
            .iter()
            .filter_map(|item| {
                item.as_object()?
                    .values()
                    .next()?
                    .get("TableName")?
                    .as_str()
            })
            .map(str::to_string)
            .collect();
        return ("(transaction)".into(), tables);
    }
    let table = json
        .get("TableName")
        .and_then(|t| t.as_str())
        .unwrap_or_default()
        .to_string();
    (table, Vec::new())
}

/// The EventBridge Scheduler operation of a REST request line (`GET /schedules/x?...`),
/// named `scheduler.<Operation>`.
fn rest_operation(request_line: &str) -> Option<String> {
    let mut parts = request_line.split_whitespace();
    let (method, path) = (parts.next()?, parts.next()?);
    let path = path.split('?').next().unwrap_or(path);
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let operation = match (method, segments.as_slice()) {
        ("GET", ["schedules"]) => "ListSchedules",
        ("GET", ["schedules", _]) => "GetSchedule",
        ("POST", ["schedules", _]) => "CreateSchedule",
        ("PUT", ["schedules", _]) => "UpdateSchedule",
        ("DELETE", ["schedules", _]) => "DeleteSchedule",
        ("GET", ["schedule-groups"]) => "ListScheduleGroups",
        ("GET", ["schedule-groups", _]) => "GetScheduleGroup",
        ("POST", ["schedule-groups", _]) => "CreateScheduleGroup",
        ("GET", ["tags", ..]) => "ListTagsForResource",
        _ => return None,
    };
    Some(format!("scheduler.{operation}"))
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
    fn a_request_is_counted_by_its_table_and_a_transaction_by_its_items_tables() {
        assert_eq!(
            tables_of(br#"{"TableName":"t","Key":{}}"#),
            ("t".into(), vec![])
        );
        assert_eq!(
            tables_of(
                br#"{"TransactItems":[{"Update":{"TableName":"a"}},{"Put":{"TableName":"b"}}]}"#
            ),
            ("(transaction)".into(), vec!["a".into(), "b".into()])
        );
        assert_eq!(tables_of(b"Action=SendMessage"), (String::new(), vec![]));
        assert_eq!(
            query_action(b"Action=SendMessage&QueueUrl=x").as_deref(),
            Some("SendMessage")
        );
        assert_eq!(
            rest_operation("GET /schedules/job-1?groupName=g HTTP/1.1").as_deref(),
            Some("scheduler.GetSchedule")
        );
        assert_eq!(
            rest_operation("GET /schedules?ScheduleGroup=g HTTP/1.1").as_deref(),
            Some("scheduler.ListSchedules")
        );
        assert_eq!(rest_operation("POST / HTTP/1.1"), None);
    }
}
