//! Who may ask, and for which files: the token, the `Host` and `Origin` checks, and the
//! root folder.
//!
//! Every request must carry the server's random token — in the query (`?token=...`, the
//! printed URL), in the `Authorization: token ...` header, or in the cookie the page
//! gets when it is opened with the token — and must be addressed to the loopback name
//! the server listens on (`Host`), from a page of the server itself (`Origin`, when the
//! browser sends one: other sites' scripts, and a DNS name rebound to 127.0.0.1, are
//! refused). Files are opened only under the root folder, after symbolic links are
//! resolved.

use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};

/// Why a request was refused (the HTTP status and the message the client gets).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "this request has no valid token: open the URL that `udf-host serve` printed (it ends in ?token=...), \
         or send the header 'Authorization: token TOKEN'"
    )]
    Token,
    #[error("requests for host '{0}' are refused: udf-host serve answers only requests addressed to {1}")]
    Host(String, String),
    #[error("requests from other origins are refused (Origin: {0}); udf-host serve answers only its own page")]
    Origin(String),
    #[error("{path} is outside the served folder {root}: udf-host serve opens only files under --root")]
    OutsideRoot { path: String, root: String },
    #[error("{path}: no such file under the served folder {root}")]
    NotFound { path: String, root: String },
}

impl Refusal {
    /// The HTTP status code.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Token => 401,
            Refusal::NotFound { .. } => 404,
            _ => 403,
        }
    }
}

/// The access rules of one server.
#[derive(Debug, Clone)]
pub struct Access {
    token: String,
    /// `127.0.0.1:PORT`, `localhost:PORT`, ...: the `Host` values accepted (any, when
    /// listening on every address: `--bind 0.0.0.0`).
    hosts: Vec<String>,
    any_host: bool,
    port: u16,
    /// The root folder, canonical.
    root: PathBuf,
}

impl Access {
    /// Rules for a server listening on `address` with `token`, serving files under `root`
    /// (which must exist).
    ///
    /// # Errors
    /// `root` cannot be resolved (it does not exist, or cannot be read).
    pub fn new(token: String, address: SocketAddr, root: &Path) -> std::io::Result<Access> {
        let root = root.canonicalize()?;
        let port = address.port();
        let mut hosts = vec![format!("{}:{port}", address.ip())];
        if address.ip().is_loopback() {
            hosts.extend([format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}")]);
        }
        if let SocketAddr::V6(v6) = address {
            hosts.push(format!("[{}]:{port}", v6.ip()));
        }
        hosts.dedup();
        Ok(Access { token, hosts, any_host: address.ip().is_unspecified(), port, root })
    }

    /// A new random token: 24 bytes from rand's thread generator (a CSPRNG seeded by
    /// the operating system), as hex.
    pub fn random_token() -> String {
        use rand::RngCore;
        let mut bytes = [0u8; 24];
        rand::rng().fill_bytes(&mut bytes);
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The name of the cookie that carries the token (per port: cookies ignore ports).
    pub fn cookie_name(&self) -> String {
        format!("udf-host-token-{}", self.port)
    }

    /// Check a request: its `Host`, its `Origin` (if any) and its token (query
    /// parameter, `Authorization` header or cookie).
    ///
    /// # Errors
    /// The first rule it breaks.
    pub fn check(
        &self,
        host: Option<&str>,
        origin: Option<&str>,
        query_token: Option<&str>,
        authorization: Option<&str>,
        cookies: &[&str],
    ) -> Result<(), Refusal> {
        let host = host.unwrap_or_default();
        let port_suffix = format!(":{}", self.port);
        let known = self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host));
        let any_with_port = self.any_host && host.ends_with(&port_suffix);
        if !(known || any_with_port) {
            return Err(Refusal::Host(host.to_owned(), self.hosts.join(" or ")));
        }
        // The page's own origin is the host it was loaded from.
        if let Some(origin) = origin {
            let own = origin.strip_prefix("http://").is_some_and(|rest| rest.eq_ignore_ascii_case(host));
            if !own {
                return Err(Refusal::Origin(origin.to_owned()));
            }
        }
        let cookie_name = self.cookie_name();
        let from_cookie = cookies.iter().flat_map(|header| header.split(';')).find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == cookie_name).then_some(value)
        });
        let from_header = authorization.and_then(|a| a.strip_prefix("token ")).map(str::trim);
        let given = [query_token, from_header, from_cookie];
        if given.into_iter().flatten().any(|t| same(t.as_bytes(), self.token.as_bytes())) {
            Ok(())
        } else {
            Err(Refusal::Token)
        }
    }

    /// The file `path` names (relative to the root, or absolute), if it exists and lies
    /// under the root once links are resolved.
    ///
    /// # Errors
    /// [`Refusal::OutsideRoot`] or [`Refusal::NotFound`].
    pub fn resolve(&self, path: &str) -> Result<PathBuf, Refusal> {
        let outside = || Refusal::OutsideRoot { path: path.to_owned(), root: self.root.display().to_string() };
        let given = Path::new(path);
        // `..` is refused before touching the file system: whether it exists out there
        // is nobody's business.
        if given.components().any(|c| c == Component::ParentDir) {
            return Err(outside());
        }
        let joined = if given.is_absolute() { given.to_owned() } else { self.root.join(given) };
        if !joined.starts_with(&self.root) {
            return Err(outside());
        }
        let resolved = joined
            .canonicalize()
            .map_err(|_| Refusal::NotFound { path: path.to_owned(), root: self.root.display().to_string() })?;
        if resolved.starts_with(&self.root) { Ok(resolved) } else { Err(outside()) }
    }

    /// `path` (under the root) as the page names it: relative to the root.
    pub fn relative(&self, path: &Path) -> String {
        path.strip_prefix(&self.root).unwrap_or(path).display().to_string()
    }
}

/// Constant-time comparison (no early exit on the first different byte).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(root: &Path) -> Access {
        Access::new("secret".into(), "127.0.0.1:8123".parse().unwrap(), root).unwrap()
    }

    #[test]
    fn a_request_needs_the_token_by_query_header_or_cookie() {
        let dir = tempfile::tempdir().unwrap();
        let a = access(dir.path());
        let host = Some("127.0.0.1:8123");
        assert_eq!(a.check(host, None, None, None, &[]), Err(Refusal::Token));
        assert_eq!(a.check(host, None, Some("wrong"), None, &[]), Err(Refusal::Token));
        assert_eq!(a.check(host, None, Some("secre"), None, &[]), Err(Refusal::Token));
        assert_eq!(a.check(host, None, Some("secret"), None, &[]), Ok(()));
        assert_eq!(a.check(host, None, None, Some("token secret"), &[]), Ok(()));
        assert_eq!(a.check(host, None, None, None, &["a=b; udf-host-token-8123=secret"]), Ok(()));
        // Another server's cookie does not count.
        assert_eq!(a.check(host, None, None, None, &["udf-host-token-9999=secret"]), Err(Refusal::Token));
    }

    #[test]
    fn other_hosts_and_origins_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let a = access(dir.path());
        let t = Some("secret");
        assert_eq!(a.check(Some("localhost:8123"), Some("http://localhost:8123"), t, None, &[]), Ok(()));
        assert!(matches!(a.check(Some("evil.example:8123"), None, t, None, &[]), Err(Refusal::Host(..))));
        assert!(matches!(a.check(None, None, t, None, &[]), Err(Refusal::Host(..))));
        let cross = a.check(Some("127.0.0.1:8123"), Some("http://evil.example"), t, None, &[]);
        assert_eq!(cross, Err(Refusal::Origin("http://evil.example".into())));
        assert!(a.check(Some("127.0.0.1:8123"), Some("null"), t, None, &[]).is_err());
        assert!(a.check(Some("127.0.0.1:8123"), Some("http://127.0.0.1:8124"), t, None, &[]).is_err());
        // The origin must be the host the request is for.
        assert!(a.check(Some("127.0.0.1:8123"), Some("http://localhost:8123"), t, None, &[]).is_err());
        // Listening on every address: any host name with the port, the same origin.
        let dir = tempfile::tempdir().unwrap();
        let all = Access::new("secret".into(), "0.0.0.0:8123".parse().unwrap(), dir.path()).unwrap();
        assert_eq!(all.check(Some("10.1.2.3:8123"), Some("http://10.1.2.3:8123"), t, None, &[]), Ok(()));
        assert!(all.check(Some("10.1.2.3:8123"), Some("http://evil.example"), t, None, &[]).is_err());
        assert!(all.check(Some("10.1.2.3:9999"), None, t, None, &[]).is_err());
    }

    #[test]
    fn files_are_opened_only_under_the_root() {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/a.npy"), b"x").unwrap();
        std::fs::write(outer.path().join("secret.npy"), b"x").unwrap();
        std::os::unix::fs::symlink(outer.path().join("secret.npy"), root.join("link.npy")).unwrap();
        let a = access(&root);
        let canonical = root.canonicalize().unwrap();
        assert_eq!(a.resolve("sub/a.npy").unwrap(), canonical.join("sub/a.npy"));
        assert_eq!(a.resolve(canonical.join("sub/a.npy").to_str().unwrap()).unwrap(), canonical.join("sub/a.npy"));
        for outside in ["../secret.npy", "sub/../../secret.npy", "link.npy", "/etc/passwd"] {
            let refused = a.resolve(outside).unwrap_err();
            assert!(matches!(refused, Refusal::OutsideRoot { .. }), "{outside}: {refused}");
            assert!(refused.to_string().contains("outside the served folder"), "{refused}");
        }
        assert!(matches!(a.resolve("missing.npy"), Err(Refusal::NotFound { .. })));
    }
}
