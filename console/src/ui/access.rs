//! Who may use the page, and which requests may change state.
//!
//! Three guards, each against its own attack:
//! - **The access token**: the page acts with an operator's AWS identity, so nobody else
//!   may use it: not another machine, nor another user or process on this one, nor a web
//!   page the operator visits (whose requests to 127.0.0.1 would otherwise be answered).
//!   Every request needs the token: given once in the URL the server prints, then kept in a
//!   strict same-site, HTTP-only cookie, which a browser never sends on another site's
//!   behalf. On loopback it is made when `--token` gives none; beyond loopback it must be
//!   given (or `--token generate`), so a server open to the network is a decision.
//! - **The Host check**: on loopback, a web page could point its own domain at 127.0.0.1
//!   (DNS rebinding) and read this page as its own origin. Only requests naming this
//!   server's loopback address (or `localhost`) are answered.
//! - **The anti-forgery token**: another site's page can make the operator's browser post
//!   a form here. Every form carries a token only this server's pages hold (another origin
//!   cannot read them), and a request that changes state without it is refused.

use std::net::SocketAddr;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use crate::cli::UsageError;

/// The cookie that keeps the access token once the printed URL has been opened, named
/// after the port: cookies ignore ports, and two servers on one host (two stages) would
/// otherwise overwrite each other's.
fn cookie_name(port: u16) -> String {
    format!("schedkit_ui_token_{port}")
}

/// The shortest access token accepted: a guessable one guards nothing.
const SHORTEST_TOKEN: usize = 16;

/// What `--token` said, decided against the address the server listens on.
#[derive(Debug, Clone)]
pub struct Access {
    /// Required of every request (query once, then the cookie).
    token: String,
    /// The cookie that carries it.
    cookie: String,
    /// Carried by every form; required of every request that changes state.
    form_token: String,
    /// The `Host` values answered on loopback (None: any, the token guards alone).
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
    /// The guards for a server on `listen` with `--token` `given` (`generate` makes one,
    /// as does none on loopback). Anything but loopback without a token is refused: it
    /// would serve an operator's AWS identity to whoever reaches the port.
    pub fn decide(listen: SocketAddr, given: Option<&str>) -> Result<Access, UsageError> {
        let loopback = listen.ip().is_loopback();
        let token = match given {
            Some("generate") => random_token(),
            Some(t) => {
                check_token(t)?;
                t.to_string()
            }
            None if loopback => random_token(),
            None => {
                return Err(UsageError(format!(
                    "listening on {listen} (not loopback) needs an access token: give --token <secret> (SCHEDKIT_UI_TOKEN), or --token generate to have one made and printed with the URL"
                )));
            }
        };
        let port = listen.port();
        let hosts = loopback.then(|| {
            let mut hosts = vec![
                listen.to_string(),
                format!("localhost:{port}"),
                format!("127.0.0.1:{port}"),
                format!("[::1]:{port}"),
            ];
            // A browser leaves the default port out of `Host`.
            if port == 80 {
                hosts.extend(["localhost", "127.0.0.1", "[::1]"].map(String::from));
            }
            hosts
        });
        Ok(Access {
            token,
            cookie: cookie_name(port),
            form_token: random_token(),
            hosts,
        })
    }

    /// The address to open, with the access token.
    pub fn url(&self, listen: SocketAddr) -> String {
        format!("http://{listen}/?token={}", self.token)
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
        let token = &self.token;
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
            .any(|(name, value)| name == self.cookie && same(value, token));
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

/// The characters a token may have (it travels in a URL and a cookie unencoded), and at
/// least [`SHORTEST_TOKEN`] of them: a guessable token guards nothing.
fn check_token(t: &str) -> Result<(), UsageError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._~-".contains(c);
    if let Some(c) = t.chars().find(|c| !allowed(*c)) {
        return Err(UsageError(format!(
            "--token has `{c}`: use letters, digits and . _ ~ - only (it travels in a URL and a cookie)"
        )));
    }
    if t.chars().count() < SHORTEST_TOKEN {
        return Err(UsageError(format!(
            "--token is {} characters: give at least {SHORTEST_TOKEN}, or `--token generate`",
            t.chars().count()
        )));
    }
    Ok(())
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
            let mut to = Redirect::to(&without_token(&req)).into_response();
            let cookie = format!(
                "{}={}; HttpOnly; SameSite=Strict; Path=/",
                access.cookie, access.token
            );
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                to.headers_mut().insert(header::SET_COOKIE, v);
            }
            to
        }
    }
}

/// The request's path and query, the token left out; always a path of this server (a
/// path starting `//` would redirect to another host).
fn without_token(req: &Request) -> String {
    let path = match req.uri().path() {
        p if p.starts_with("//") || !p.starts_with('/') => "/",
        p => p,
    };
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

    fn token_of(access: &Access) -> String {
        access.token.clone()
    }

    #[test]
    fn anything_but_loopback_without_a_token_is_refused() {
        for listen in [
            "0.0.0.0:8080",
            "192.168.1.5:8080",
            "[::]:8080",
            "[::ffff:127.0.0.1]:8080",
        ] {
            let e = Access::decide(listen.parse().unwrap(), None).unwrap_err();
            assert!(e.0.contains("needs an access token"), "{listen}: {e}");
        }
        let given = Access::decide(
            "0.0.0.0:8080".parse().unwrap(),
            Some("a-long-enough-token.1"),
        )
        .unwrap();
        assert_eq!(token_of(&given), "a-long-enough-token.1");
    }

    #[test]
    fn a_token_is_long_and_url_safe_or_refused() {
        let listen: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let short = Access::decide(listen, Some("abc")).unwrap_err();
        assert!(short.0.contains("at least 16"), "{short}");
        for bad in [
            "aaaaaaaa;bbbbbbbbb",
            "aaaaaaaa bbbbbbbbb",
            "aaaaaaaa&bbbbbbbbb",
            "aaaaaaaaébbbbbbbbb",
        ] {
            let e = Access::decide(listen, Some(bad)).unwrap_err();
            assert!(e.0.contains("letters, digits"), "{bad}: {e}");
        }
    }

    #[test]
    fn on_loopback_a_token_is_made_when_none_is_given_and_required() {
        let listen: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let access = Access::decide(listen, None).unwrap();
        let token = token_of(&access);
        assert!(token.len() >= 64 && access.url(listen).ends_with(&format!("/?token={token}")));
        let h = headers("127.0.0.1:8080", None);
        assert!(matches!(
            access.judge(&h, None),
            Verdict::Refused(StatusCode::UNAUTHORIZED, _)
        ));
        assert_ne!(
            token,
            token_of(&Access::decide(listen, None).unwrap()),
            "each server its own"
        );
    }

    #[test]
    fn a_token_in_the_url_sets_the_ports_cookie_which_then_passes() {
        let listen: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let access = Access::decide(listen, Some("generate")).unwrap();
        let token = token_of(&access);
        let h = headers("example.com:8080", None);
        assert!(matches!(
            access.judge(&h, None),
            Verdict::Refused(StatusCode::UNAUTHORIZED, _)
        ));
        assert!(matches!(
            access.judge(&h, Some(&format!("token={token}"))),
            Verdict::SetCookie
        ));
        assert!(matches!(
            access.judge(&h, Some("token=guess")),
            Verdict::Refused(..)
        ));
        let cookie = |name: &str, value: &str| {
            headers("example.com:8080", Some(&format!("a=b; {name}={value}")))
        };
        assert!(matches!(
            access.judge(&cookie("schedkit_ui_token_8080", &token), None),
            Verdict::Pass
        ));
        assert!(matches!(
            access.judge(
                &cookie("schedkit_ui_token_8080", &format!("{token}x")),
                None
            ),
            Verdict::Refused(..)
        ));
        assert!(
            matches!(
                access.judge(&cookie("schedkit_ui_token_8081", &token), None),
                Verdict::Refused(..)
            ),
            "another port's cookie"
        );
    }

    #[test]
    fn on_loopback_only_requests_for_its_own_address_are_answered() {
        let listen: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let access = Access::decide(listen, None).unwrap();
        let token = token_of(&access);
        let cookie = format!("schedkit_ui_token_8080={token}");
        for host in ["127.0.0.1:8080", "localhost:8080"] {
            assert!(
                matches!(
                    access.judge(&headers(host, Some(&cookie)), None),
                    Verdict::Pass
                ),
                "{host}"
            );
        }
        for host in ["evil.example:8080", "127.0.0.1:9999", "127.0.0.1", ""] {
            assert!(
                matches!(
                    access.judge(&headers(host, Some(&cookie)), None),
                    Verdict::Refused(StatusCode::MISDIRECTED_REQUEST, _)
                ),
                "{host}"
            );
        }
        let on_80 = Access::decide("127.0.0.1:80".parse().unwrap(), None).unwrap();
        let cookie = format!("schedkit_ui_token_80={}", token_of(&on_80));
        assert!(matches!(
            on_80.judge(&headers("localhost", Some(&cookie)), None),
            Verdict::Pass
        ));
    }

    #[test]
    fn the_redirect_that_drops_the_token_stays_on_this_server() {
        let to = |uri: &str| {
            without_token(
                &Request::builder()
                    .uri(uri)
                    .body(axum::body::Body::empty())
                    .unwrap(),
            )
        };
        assert_eq!(to("/dlq?job=a&token=t"), "/dlq?job=a");
        assert_eq!(to("/?token=t"), "/");
        assert_eq!(to("//evil.example/?token=t"), "/");
        assert_eq!(to("//evil.example/x?token=t&a=b"), "/?a=b");
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
