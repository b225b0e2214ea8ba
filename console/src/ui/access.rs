//! Who may use the page, and which requests may change state.
//!
//! Three guards, each against its own attack:
//! - **The access token** (`--token`): a page reachable from other machines would hand
//!   anyone who finds it an operator's AWS identity. Anything but loopback needs one; it is
//!   given once in the URL the server prints and kept in a same-site, HTTP-only cookie.
//! - **The Host check**: on loopback without a token, a web page the operator visits could
//!   point its own domain at 127.0.0.1 (DNS rebinding) and read this page as its own origin.
//!   Only requests naming this server's loopback address (or `localhost`) are answered.
//! - **The anti-forgery token**: another site's page can make the operator's browser post
//!   a form here. Every form carries a token only this server's pages hold (another origin
//!   cannot read them), and a request that changes state without it is refused.

use std::net::SocketAddr;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use crate::cli::UsageError;

/// The cookie that keeps the access token once the printed URL has been opened.
const COOKIE: &str = "schedkit_ui_token";

/// The shortest access token accepted: a guessable one guards nothing.
const SHORTEST_TOKEN: usize = 16;

/// What `--token` said, decided against the address the server listens on.
#[derive(Debug, Clone)]
pub struct Access {
    /// Required of every request (query once, then the cookie); None on loopback without one.
    token: Option<String>,
    /// Carried by every form; required of every request that changes state.
    form_token: String,
    /// The `Host` values answered when no access token guards the page (loopback).
    hosts: Option<Vec<String>>,
}

/// A token nobody can guess: two random UUIDs (244 random bits), hex.
fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

impl Access {
    /// The guards for a server on `listen` with `--token` `given` (`generate` makes one).
    /// Anything but loopback without a token is refused: it would serve an operator's AWS
    /// identity to whoever reaches the port.
    pub fn decide(listen: SocketAddr, given: Option<&str>) -> Result<Access, UsageError> {
        let token = match given {
            Some("generate") => Some(random_token()),
            Some(t) if t.chars().count() < SHORTEST_TOKEN => {
                return Err(UsageError(format!(
                    "--token is {} characters: give at least {SHORTEST_TOKEN}, or `--token generate`",
                    t.chars().count()
                )));
            }
            Some(t) => Some(t.to_string()),
            None if listen.ip().is_loopback() => None,
            None => {
                return Err(UsageError(format!(
                    "listening on {listen} (not loopback) needs an access token: give --token <secret> (SCHEDKIT_UI_TOKEN), or --token generate to have one made and printed with the URL"
                )));
            }
        };
        let port = listen.port();
        let hosts = token.is_none().then(|| {
            vec![
                listen.to_string(),
                format!("localhost:{port}"),
                format!("127.0.0.1:{port}"),
                format!("[::1]:{port}"),
            ]
        });
        Ok(Access {
            token,
            form_token: random_token(),
            hosts,
        })
    }

    /// The address to open: with the access token when there is one.
    pub fn url(&self, listen: SocketAddr) -> String {
        match &self.token {
            Some(t) => format!("http://{listen}/?token={t}"),
            None => format!("http://{listen}/"),
        }
    }

    /// The token every form carries.
    pub fn form_token(&self) -> &str {
        &self.form_token
    }

    /// Whether a form's token is this server's.
    pub fn form_token_matches(&self, given: Option<&str>) -> bool {
        given.is_some_and(|g| same(g, &self.form_token))
    }

    /// The verdict on a request's headers and query: let it through, set the cookie
    /// (the token came in the URL), or refuse it.
    fn judge(&self, headers: &HeaderMap, query: Option<&str>) -> Verdict {
        if let Some(hosts) = &self.hosts {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("");
            if !hosts.iter().any(|h| h == host) {
                return Verdict::Refused(
                    StatusCode::MISDIRECTED_REQUEST,
                    format!(
                        "this page answers only requests for its own loopback address ({}), not `{host}`",
                        hosts[0]
                    ),
                );
            }
        }
        let Some(token) = &self.token else {
            return Verdict::Pass;
        };
        let in_query = query.and_then(|q| {
            serde_urlencoded::from_str::<Vec<(String, String)>>(q)
                .ok()?
                .into_iter()
                .find(|(k, _)| k == "token")
                .map(|(_, v)| v)
        });
        if in_query.as_deref().is_some_and(|t| same(t, token)) {
            return Verdict::SetCookie;
        }
        let in_cookie = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .any(|(name, value)| name == COOKIE && same(value, token));
        if in_cookie {
            Verdict::Pass
        } else {
            Verdict::Refused(
                StatusCode::UNAUTHORIZED,
                "this page needs its access token: open the URL `schedkit ui` printed (…/?token=…)"
                    .into(),
            )
        }
    }
}

enum Verdict {
    Pass,
    SetCookie,
    Refused(StatusCode, String),
}

/// Equal without saying where they differ (a comparison that stops early tells a timing
/// attacker how much of a guess was right).
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |diff, (x, y)| diff | (x ^ y))
            == 0
}

/// The middleware: every request passes the access guards first. A URL carrying the
/// token is answered with the cookie and a redirect to itself without it, so the token
/// does not stay in the address bar or the history.
pub async fn guard(
    State(access): State<std::sync::Arc<Access>>,
    req: Request,
    next: Next,
) -> Response {
    match access.judge(req.headers(), req.uri().query()) {
        Verdict::Pass => next.run(req).await,
        Verdict::Refused(status, why) => (status, super::html::refusal(&why)).into_response(),
        Verdict::SetCookie => {
            let token = access.token.as_deref().unwrap_or_default();
            let mut to = Redirect::to(&without_token(&req)).into_response();
            let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                to.headers_mut().insert(header::SET_COOKIE, v);
            }
            to
        }
    }
}

/// The request's path and query, the token left out.
fn without_token(req: &Request) -> String {
    let path = req.uri().path();
    let rest: Vec<(String, String)> = req
        .uri()
        .query()
        .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _): &(String, String)| k != "token")
        .collect();
    if rest.is_empty() {
        path.to_string()
    } else {
        format!(
            "{path}?{}",
            serde_urlencoded::to_string(rest).unwrap_or_default()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(host: &str, cookie: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        if let Some(c) = cookie {
            h.insert(header::COOKIE, HeaderValue::from_str(c).unwrap());
        }
        h
    }

    #[test]
    fn anything_but_loopback_without_a_token_is_refused() {
        for listen in ["0.0.0.0:8080", "192.168.1.5:8080", "[::]:8080"] {
            let e = Access::decide(listen.parse().unwrap(), None).unwrap_err();
            assert!(e.0.contains("needs an access token"), "{e}");
        }
        assert!(Access::decide("127.0.0.1:8080".parse().unwrap(), None).is_ok());
        assert!(Access::decide("[::1]:8080".parse().unwrap(), None).is_ok());
        let short = Access::decide("0.0.0.0:8080".parse().unwrap(), Some("abc")).unwrap_err();
        assert!(short.0.contains("at least 16"), "{short}");
    }

    #[test]
    fn a_generated_token_is_printed_with_the_url_and_required() {
        let listen: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let access = Access::decide(listen, Some("generate")).unwrap();
        let url = access.url(listen);
        let token = url.split("token=").nth(1).unwrap().to_string();
        assert!(token.len() >= 64, "{url}");
        let h = headers("example.com:8080", None);
        assert!(matches!(
            access.judge(&h, None),
            Verdict::Refused(StatusCode::UNAUTHORIZED, _)
        ));
        assert!(matches!(
            access.judge(&h, Some(&format!("token={token}"))),
            Verdict::SetCookie
        ));
        let with_cookie = headers("example.com:8080", Some(&format!("a=b; {COOKIE}={token}")));
        assert!(matches!(access.judge(&with_cookie, None), Verdict::Pass));
        let wrong = headers("example.com:8080", Some(&format!("{COOKIE}={token}x")));
        assert!(matches!(access.judge(&wrong, None), Verdict::Refused(..)));
    }

    #[test]
    fn on_loopback_only_requests_for_its_own_address_are_answered() {
        let listen: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let access = Access::decide(listen, None).unwrap();
        for host in ["127.0.0.1:8080", "localhost:8080"] {
            assert!(
                matches!(access.judge(&headers(host, None), None), Verdict::Pass),
                "{host}"
            );
        }
        for host in ["evil.example:8080", "127.0.0.1:9999", ""] {
            assert!(
                matches!(
                    access.judge(&headers(host, None), None),
                    Verdict::Refused(StatusCode::MISDIRECTED_REQUEST, _)
                ),
                "{host}"
            );
        }
    }

    #[test]
    fn a_form_token_is_this_servers_or_refused() {
        let access = Access::decide("127.0.0.1:1".parse().unwrap(), None).unwrap();
        let own = access.form_token().to_string();
        assert!(access.form_token_matches(Some(&own)));
        assert!(!access.form_token_matches(None));
        assert!(!access.form_token_matches(Some("")));
        assert!(!access.form_token_matches(Some(&own[1..])));
        let other = Access::decide("127.0.0.1:1".parse().unwrap(), None).unwrap();
        assert!(
            !other.form_token_matches(Some(&own)),
            "each server its own token"
        );
    }
}
