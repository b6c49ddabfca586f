//! A LAVA server's REST API (version 0.2), as `cargo xtask lab` uses it:
//! submit a job definition, read a job's state, fetch its log and its
//! results. Over HTTP(S) with `ureq`, authenticated by the user's API
//! token (`Authorization: Token ...`), which is only ever sent to the
//! server: never printed, never written anywhere.
//!
//! Every request goes through [`http`], the one place that knows the HTTP
//! client: the `lab` feature (on by default) brings it in. The fuzz
//! targets, which read what xtask reads and never talk to a server, build
//! xtask without it, and so without a TLS stack to compile.

use anyhow::{bail, Context, Result};
use serde::Deserialize;

/// Where a token comes from when neither `--token-file` nor the local
/// instance gives one.
pub const TOKEN_ENV: &str = "LAVA_TOKEN";

/// One server: its base URL (`http://host:port/`), the token, and where the
/// token came from (which errors name; the token itself never is).
pub struct Server {
    pub url: String,
    token: String,
    pub token_from: String,
}

/// What the server says of a job (the fields `lab` reads).
#[derive(Clone, Debug, Deserialize)]
pub struct JobState {
    pub id: u64,
    /// `Submitted`, `Scheduling`, `Scheduled`, `Running`, `Canceling`,
    /// `Finished`.
    pub state: String,
    /// `Unknown` until finished; then `Complete`, `Incomplete` or
    /// `Canceled`.
    pub health: String,
    /// The job's name (`job_name`): `cargo xtask lava` puts the variant in it.
    pub description: String,
    #[serde(default)]
    pub actual_device: Option<String>,
    #[serde(default)]
    pub requested_device_type: Option<String>,
    #[serde(default)]
    pub failure_comment: Option<String>,
}

impl JobState {
    pub fn finished(&self) -> bool {
        self.state == "Finished"
    }
}

/// A request that did not reach the server (refused, reset, timed out):
/// the server may come back, so a wait can be resumed.
#[derive(Debug)]
pub struct Unreachable(pub String);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unreachable {}

impl Server {
    /// A server at `url` with `token` (read from `token_from`, which errors
    /// name). Checks nothing yet: see [`Server::check_token`].
    pub fn new(url: &str, token: &str, token_from: &str) -> Result<Server> {
        let url = url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            bail!("--server {url:?}: give the server's http:// or https:// address");
        }
        let token = token.trim().to_string();
        if token.is_empty() || token.contains(char::is_whitespace) {
            bail!("the LAVA token from {token_from} is empty or holds white space");
        }
        Ok(Server {
            url: format!("{}/", url.trim_end_matches('/')),
            token,
            token_from: token_from.into(),
        })
    }

    /// The lab's name as results record it: the server's host (and port).
    pub fn host(&self) -> String {
        let s = self.url.split("://").nth(1).unwrap_or(&self.url);
        s.split('/').next().unwrap_or(s).to_string()
    }

    fn api(&self, path: &str) -> String {
        format!("{}api/v0.2/{path}", self.url)
    }

    /// `path` of the API asked for with the token (a POST of `body` when
    /// there is one): the answer's text. A refusal and an unreachable
    /// server are each a clear error (the latter an [`Unreachable`]).
    fn send(&self, path: &str, body: Option<serde_json::Value>) -> Result<String> {
        let url = self.api(path);
        let what = format!("{} {url}", if body.is_some() { "POST" } else { "GET" });
        match http::call(&url, Some(&self.token), body) {
            Ok(text) => Ok(text),
            Err(http::Failure::Status(code @ (401 | 403), detail)) => bail!(
                "the LAVA server at {} refused the token from {} (HTTP {code}: {}): give a valid API token (the server's web page: API → Authentication Tokens)",
                self.url,
                self.token_from,
                short(&detail)
            ),
            Err(http::Failure::Status(code, detail)) => {
                bail!("{what}: HTTP {code}: {}", short(&detail))
            }
            Err(http::Failure::Transport(t)) => Err(anyhow::Error::new(Unreachable(format!(
                "cannot reach the LAVA server at {}: {t}",
                self.url
            )))),
        }
    }

    /// `send`'s answer read as JSON.
    fn json<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<T> {
        let text = self.send(path, body)?;
        serde_json::from_str(&text)
            .with_context(|| format!("{}: not the JSON expected", self.api(path)))
    }

    /// Checks that the server answers and accepts the token (whoami): the
    /// user's name.
    pub fn check_token(&self) -> Result<String> {
        #[derive(Deserialize)]
        struct Who {
            user: String,
        }
        let who: Who = self
            .json("system/whoami/", None)
            .with_context(|| format!("{} does not answer as a LAVA server", self.url))?;
        if who.user.is_empty() {
            bail!(
                "the LAVA server at {} did not accept the token from {}: it sees an anonymous user",
                self.url,
                self.token_from
            );
        }
        Ok(who.user)
    }

    /// Submits a job definition: its id.
    pub fn submit(&self, definition: &str) -> Result<u64> {
        #[derive(Deserialize)]
        struct Submitted {
            job_ids: Vec<u64>,
        }
        let s: Submitted = self
            .json(
                "jobs/",
                Some(serde_json::json!({ "definition": definition })),
            )
            .context("the server did not take the job")?;
        match s.job_ids.as_slice() {
            [id] => Ok(*id),
            ids => bail!("the server made {} jobs of one definition", ids.len()),
        }
    }

    /// The job's state now.
    pub fn job(&self, id: u64) -> Result<JobState> {
        self.json(&format!("jobs/{id}/"), None)
            .with_context(|| format!("the server's answer about job {id}"))
    }

    /// The job's log: the YAML lines the dispatcher wrote (`lavacli jobs
    /// logs --raw`).
    pub fn log(&self, id: u64) -> Result<String> {
        self.send(&format!("jobs/{id}/logs/"), None)
            .with_context(|| format!("reading job {id}'s log"))
    }

    /// The job's test results as YAML (`lavacli results JOB --yaml`).
    pub fn results(&self, id: u64) -> Result<String> {
        self.send(&format!("jobs/{id}/yaml/"), None)
            .with_context(|| format!("reading job {id}'s results"))
    }
}

/// The first line of a server's error page, cut short.
fn short(s: &str) -> String {
    let line = s
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    line.chars().take(200).collect()
}

/// The HTTP client, the one place that names it.
pub mod http {
    /// Why a request got no answer to read.
    pub enum Failure {
        /// The server answered with an error status, and this page.
        #[cfg_attr(not(feature = "lab"), allow(dead_code))]
        Status(u16, String),
        /// The request did not reach the server (refused, reset, timed
        /// out, or an xtask built without the `lab` feature).
        Transport(String),
    }

    /// GETs `url` (or POSTs `body` as JSON), with `token` as LAVA's
    /// `Authorization: Token` header when given: the answer's text.
    #[cfg(feature = "lab")]
    pub fn call(
        url: &str,
        token: Option<&str>,
        body: Option<serde_json::Value>,
    ) -> Result<String, Failure> {
        use std::sync::OnceLock;
        use std::time::Duration;
        static AGENT: OnceLock<ureq::Agent> = OnceLock::new();
        let agent = AGENT.get_or_init(|| {
            ureq::AgentBuilder::new()
                .timeout_connect(Duration::from_secs(5))
                .timeout(Duration::from_secs(60))
                .build()
        });
        let mut req = match body {
            Some(_) => agent.post(url),
            None => agent.get(url),
        };
        if let Some(t) = token {
            req = req.set("Authorization", &format!("Token {t}"));
        }
        let r = match body {
            Some(b) => req.send_json(b),
            None => req.call(),
        };
        match r {
            Ok(r) => r
                .into_string()
                .map_err(|e| Failure::Transport(format!("reading the answer: {e}"))),
            Err(ureq::Error::Status(code, r)) => {
                Err(Failure::Status(code, r.into_string().unwrap_or_default()))
            }
            Err(ureq::Error::Transport(t)) => Err(Failure::Transport(t.to_string())),
        }
    }

    /// Without the `lab` feature there is no HTTP client.
    #[cfg(not(feature = "lab"))]
    pub fn call(
        _url: &str,
        _token: Option<&str>,
        _body: Option<serde_json::Value>,
    ) -> Result<String, Failure> {
        Err(Failure::Transport(
            "this xtask was built without the `lab` feature (no HTTP client)".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_needs_an_http_url_and_a_token() {
        assert!(Server::new("lab.example", "t", "x").is_err());
        assert!(Server::new("http://lab.example", " ", "x").is_err());
        let s = Server::new("https://lab.example:8443/", "abc", "x").unwrap();
        assert_eq!(s.host(), "lab.example:8443");
        assert_eq!(s.api("jobs/"), "https://lab.example:8443/api/v0.2/jobs/");
    }
}
