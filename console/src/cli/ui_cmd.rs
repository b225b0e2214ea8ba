//! `schedkit ui`'s flags. The page itself is `crate::ui` (served by the binary): it is
//! built on the commands, so the command line only names its flags.

use std::net::SocketAddr;

use clap::Args;

#[derive(Debug, Args)]
pub struct UiArgs {
    /// Where to listen. Loopback by default; any other address needs --token.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// The access token every request must carry (given once in the printed URL, then kept
    /// in a cookie); `generate` makes one, as does none on loopback. Required beyond
    /// loopback. Letters, digits and . _ ~ -, at least 16.
    #[arg(long, env = "SCHEDKIT_UI_TOKEN")]
    pub token: Option<String>,
}
