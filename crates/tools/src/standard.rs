//! The standard tools (`fs`, `http`, `process`), denied unless granted — Deno's model.
//!
//! Grants come from `--allow-read=DIR`, `--allow-write=DIR`, `--allow-net=HOST[:PORT]`,
//! `--allow-run=PROGRAM` and the `[permissions]` table of `sap.toml`. A path is allowed
//! when, with `..` and symbolic links resolved, it lies inside a granted folder: an
//! escape by `..`, by an absolute path or by a link is refused like any other path. A
//! refused call is an error that names the flag to add — or, when the run has a
//! [`Client`] (an editor), a question to its user: allowed once, allowed for the rest of
//! the session, or refused with the same error. With a client that hands files, `fs::read`
//! and `fs::write` go through it (an editor's unsaved buffers), still within the grants.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value as JsonValue;

use llm::types::TypeDesc;
use runtime::value::{Value, decode};

use crate::client::{Access, Answer, Client, Permission};

/// What a run may touch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Grants {
    /// Folders (canonical) whose files may be read, and listed.
    pub read: Vec<PathBuf>,
    /// Folders (canonical) whose files may be written.
    pub write: Vec<PathBuf>,
    /// Hosts, each with a port or any port.
    pub net: Vec<(String, Option<u16>)>,
    /// Programs, as the program names them (`git`, `/usr/bin/python3`).
    pub run: Vec<String>,
}

impl Grants {
    /// Adds a folder to `read` or `write`; `base` resolves a relative one. A folder that
    /// does not exist is an error, so a typo does not pass silently.
    pub fn add_dir(list: &mut Vec<PathBuf>, dir: &str, base: &Path) -> Result<(), String> {
        let path = base.join(dir);
        let canonical = path
            .canonicalize()
            .map_err(|e| format!("cannot grant access to {}: {e}", path.display()))?;
        list.push(canonical);
        Ok(())
    }

    /// Adds `HOST` or `HOST:PORT` to `net`.
    pub fn add_net(&mut self, spec: &str) -> Result<(), String> {
        let bad = || format!("`{spec}` is not HOST or HOST:PORT");
        let (host, port) = if let Some(rest) = spec.strip_prefix('[') {
            // `[::1]` or `[::1]:8080`.
            let (host, after) = rest.split_once(']').ok_or_else(bad)?;
            let port = match after.strip_prefix(':') {
                Some(p) => Some(p.parse::<u16>().map_err(|_| bad())?),
                None if after.is_empty() => None,
                None => return Err(bad()),
            };
            (host.to_owned(), port)
        } else if spec.matches(':').count() == 1 {
            let (host, port) = spec.split_once(':').ok_or_else(bad)?;
            (
                host.to_owned(),
                Some(port.parse::<u16>().map_err(|_| bad())?),
            )
        } else {
            (spec.to_owned(), None)
        };
        if host.is_empty() {
            return Err(format!("`{spec}` is not HOST or HOST:PORT"));
        }
        self.net.push((host.to_ascii_lowercase(), port));
        Ok(())
    }

    /// The canonical form of `path` when reading it is granted.
    fn readable(&self, tool: &str, path: &str) -> Result<PathBuf, Denied> {
        let target = Path::new(path)
            .canonicalize()
            .map_err(|e| Denied::Error(format!("`{tool}`: cannot read {path}: {e}")))?;
        if self.read.iter().any(|root| target.starts_with(root)) {
            return Ok(target);
        }
        let scope = suggest_dir(&target);
        Err(Denied::Asks(Permission {
            tool: tool.to_owned(),
            access: Access::Read,
            target: target.display().to_string(),
            refusal: format!(
                "`{tool}` may not read {path}: run with --allow-read={scope} (or add it to `read` in the [permissions] table of sap.toml)"
            ),
            scope,
        }))
    }

    /// Whether these grants cover what `permission` asks (a grant given "always" in
    /// a session covers the same tool's later calls inside it).
    pub fn covers(&self, permission: &Permission) -> bool {
        let target = &permission.target;
        match permission.access {
            Access::Read => self
                .read
                .iter()
                .any(|root| Path::new(target).starts_with(root)),
            Access::Write => self
                .write
                .iter()
                .any(|root| Path::new(target).starts_with(root)),
            Access::Net => self.net.iter().any(|(h, p)| match target.rsplit_once(':') {
                Some((host, port)) => h == host && p.is_none_or(|p| p.to_string() == port),
                None => h == target,
            }),
            Access::Run => self.run.iter().any(|p| p == target),
        }
    }

    /// Adds what `permission`'s "always" grants: its folder, host or program.
    pub fn allow(&mut self, permission: &Permission) {
        let scope = &permission.scope;
        match permission.access {
            Access::Read => self.read.push(PathBuf::from(scope)),
            Access::Write => self.write.push(PathBuf::from(scope)),
            Access::Net => self.net.push((scope.clone(), None)),
            Access::Run => self.run.push(scope.clone()),
        }
    }

    /// The path to write when writing `path` is granted: its folder resolved, and the
    /// file itself, if it is a link, resolved too.
    fn writable(&self, tool: &str, path: &str) -> Result<PathBuf, Denied> {
        let p = Path::new(path);
        let name = p
            .file_name()
            .ok_or_else(|| Denied::Error(format!("`{tool}`: {path} does not name a file")))?;
        let parent = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let cannot =
            |e: std::io::Error| Denied::Error(format!("`{tool}`: cannot write {path}: {e}"));
        let dir = parent.canonicalize().map_err(cannot)?;
        let mut target = dir.join(name);
        if target.is_symlink() {
            target = target.canonicalize().map_err(cannot)?;
        }
        if self.write.iter().any(|root| target.starts_with(root)) {
            return Ok(target);
        }
        let scope = suggest_dir(&target);
        Err(Denied::Asks(Permission {
            tool: tool.to_owned(),
            access: Access::Write,
            target: target.display().to_string(),
            refusal: format!(
                "`{tool}` may not write {path}: run with --allow-write={scope} (or add it to `write` in the [permissions] table of sap.toml)"
            ),
            scope,
        }))
    }

    fn reachable(&self, tool: &str, url: &reqwest::Url) -> Result<(), Denied> {
        let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
        let host = host.trim_matches(['[', ']']);
        let port = url.port_or_known_default();
        if self
            .net
            .iter()
            .any(|(h, p)| h == host && (p.is_none() || *p == port))
        {
            return Ok(());
        }
        let shown = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_owned(),
        };
        Err(Denied::Asks(Permission {
            tool: tool.to_owned(),
            access: Access::Net,
            target: match port {
                Some(p) => format!("{host}:{p}"),
                None => host.to_owned(),
            },
            scope: host.to_owned(),
            refusal: format!(
                "`{tool}` may not connect to {shown}: run with --allow-net={shown} (or add it to `net` in the [permissions] table of sap.toml)"
            ),
        }))
    }

    fn runnable(&self, program: &str) -> Result<(), Denied> {
        if self.run.iter().any(|p| p == program) {
            return Ok(());
        }
        Err(Denied::Asks(Permission {
            tool: "process::run".to_owned(),
            access: Access::Run,
            target: program.to_owned(),
            scope: program.to_owned(),
            refusal: format!(
                "`process::run` may not run `{program}`: run with --allow-run={program} (or add it to `run` in the [permissions] table of sap.toml)"
            ),
        }))
    }
}

/// Why a grant check did not pass: an error, or a refusal a client may overrule.
#[derive(Debug)]
enum Denied {
    Error(String),
    Asks(Permission),
}

impl Denied {
    fn message(self) -> String {
        match self {
            Denied::Error(m) => m,
            Denied::Asks(p) => p.refusal,
        }
    }
}

/// A grant check's outcome, with the run's client asked when the grants refuse: what
/// the check gives when the answer is yes, the refusal's error when it is no.
async fn permitted<T>(
    checked: Result<T, Denied>,
    client: Option<&dyn Client>,
    granted: impl FnOnce(&Permission) -> T,
) -> Result<T, String> {
    match (checked, client) {
        (Ok(v), _) => Ok(v),
        (Err(Denied::Asks(p)), Some(client)) => match client.ask(p.clone()).await {
            Answer::Once | Answer::Always => Ok(granted(&p)),
            Answer::Reject => Err(format!("{} (the user refused)", p.refusal)),
        },
        (Err(denied), _) => Err(denied.message()),
    }
}

/// The folder to suggest granting for a refused path.
fn suggest_dir(target: &Path) -> String {
    let dir = if target.is_dir() {
        target
    } else {
        target.parent().unwrap_or(target)
    };
    dir.display().to_string()
}

/// Calls the standard tool `module::tool` with sap values.
pub async fn call(
    grants: &Grants,
    client: Option<&dyn Client>,
    module: &str,
    tool: &str,
    args: &[Value],
    ret: &TypeDesc,
    deadline: Option<Instant>,
) -> Result<Value, String> {
    let name = format!("{module}::{tool}");
    let text = |i: usize| -> Result<&str, String> {
        match args.get(i) {
            Some(Value::Str(s)) => Ok(s),
            _ => Err(format!("`{name}` takes a string as argument {}", i + 1)),
        }
    };
    let timeout = deadline
        .map(|d| d.saturating_duration_since(Instant::now()))
        .unwrap_or(Duration::from_secs(300));
    match (module, tool) {
        ("fs", "read") => {
            let path = permitted(grants.readable(&name, text(0)?), client, |p| {
                PathBuf::from(&p.target)
            })
            .await?;
            let content = match client.filter(|c| c.reads_files()) {
                Some(c) => c.read_text(path.clone()).await,
                None => tokio::fs::read_to_string(&path)
                    .await
                    .map_err(|e| e.to_string()),
            }
            .map_err(|e| format!("`{name}`: cannot read {}: {e}", path.display()))?;
            Ok(Value::str(&content))
        }
        ("fs", "write") => {
            let path = permitted(grants.writable(&name, text(0)?), client, |p| {
                PathBuf::from(&p.target)
            })
            .await?;
            let content = text(1)?;
            match client.filter(|c| c.writes_files()) {
                Some(c) => c.write_text(path.clone(), content.to_owned()).await,
                None => tokio::fs::write(&path, content)
                    .await
                    .map_err(|e| e.to_string()),
            }
            .map_err(|e| format!("`{name}`: cannot write {}: {e}", path.display()))?;
            Ok(Value::Unit)
        }
        ("fs", "list") => {
            let dir = permitted(grants.readable(&name, text(0)?), client, |p| {
                PathBuf::from(&p.target)
            })
            .await?;
            let mut entries = tokio::fs::read_dir(&dir)
                .await
                .map_err(|e| format!("`{name}`: cannot list {}: {e}", dir.display()))?;
            let mut names = Vec::new();
            while let Some(entry) = entries
                .next_entry()
                .await
                .map_err(|e| format!("`{name}`: cannot list {}: {e}", dir.display()))?
            {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
            names.sort();
            Ok(Value::List(std::sync::Arc::new(
                names.iter().map(|n| Value::str(n)).collect(),
            )))
        }
        ("http", "get") | ("http", "post") => {
            let url = reqwest::Url::parse(text(0)?)
                .map_err(|e| format!("`{name}`: `{}` is not a URL: {e}", text(0).unwrap_or("")))?;
            permitted(grants.reachable(&name, &url), client, |_| ()).await?;
            http_transport::install_crypto();
            // Each redirect must stay inside the grants too.
            let redirect_grants = grants.clone();
            let client = reqwest::Client::builder()
                .timeout(timeout.min(Duration::from_secs(60)))
                .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                    if attempt.previous().len() > 5 {
                        attempt.error("too many redirects")
                    } else if redirect_grants.reachable("http", attempt.url()).is_err() {
                        attempt.stop()
                    } else {
                        attempt.follow()
                    }
                }))
                .build()
                .map_err(|e| format!("`{name}`: {e}"))?;
            let request = if tool == "get" {
                client.get(url.clone())
            } else {
                let body = args.get(1).map(Value::to_json).unwrap_or(JsonValue::Null);
                client
                    .post(url.clone())
                    .header("content-type", "application/json")
                    .body(body.to_string())
            };
            let response = request
                .send()
                .await
                .map_err(|e| format!("`{name}` {url}: {e}"))?;
            let status = response.status();
            let body = response
                .text()
                .await
                .map_err(|e| format!("`{name}` {url}: {e}"))?;
            if !status.is_success() {
                let cut: String = body.chars().take(200).collect();
                return Err(format!("`{name}` {url}: HTTP {status}: {cut}"));
            }
            if tool == "get" {
                Ok(Value::str(&body))
            } else {
                let json: JsonValue = serde_json::from_str(&body)
                    .map_err(|e| format!("`{name}` {url}: the answer is not JSON ({e})"))?;
                Ok(Value::Json(std::sync::Arc::new(json)))
            }
        }
        ("process", "run") => {
            let program = text(0)?;
            permitted(grants.runnable(program), client, |_| ()).await?;
            let argv: Vec<String> = match args.get(1) {
                Some(Value::List(items)) => items
                    .iter()
                    .map(|v| match v {
                        Value::Str(s) => Ok(s.to_string()),
                        _ => Err(format!("`{name}` takes a list of strings")),
                    })
                    .collect::<Result<_, _>>()?,
                _ => Vec::new(),
            };
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(&argv)
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true);
            let output = tokio::time::timeout(timeout, cmd.output())
                .await
                .map_err(|_| format!("`{name}`: `{program}` did not finish before the time budget ended; it was stopped"))?
                .map_err(|e| format!("`{name}`: cannot run `{program}`: {e}"))?;
            let json = serde_json::json!({
                "status": output.status.code().unwrap_or(-1),
                "stdout": String::from_utf8_lossy(&output.stdout),
                "stderr": String::from_utf8_lossy(&output.stderr),
            });
            decode(ret, &json).map_err(|e| format!("`{name}`: {e}"))
        }
        _ => Err(format!("there is no standard tool `{name}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> test_support::Scratch {
        let dir = test_support::Scratch::new(&format!("grants-{name}"));
        std::fs::create_dir_all(dir.join("granted/sub")).unwrap();
        std::fs::write(dir.join("granted/sub/a.txt"), "inside").unwrap();
        std::fs::write(dir.join("secret.txt"), "outside").unwrap();
        dir
    }

    #[test]
    fn reads_inside_a_grant_and_refuses_every_escape() {
        let dir = folder("read");
        let mut g = Grants::default();
        Grants::add_dir(&mut g.read, "granted", &dir).unwrap();
        let inside = dir.join("granted/sub/a.txt");
        assert!(g.readable("fs::read", inside.to_str().unwrap()).is_ok());
        // `..` out of the grant.
        let dotdot = dir.join("granted/sub/../../secret.txt");
        let err = g
            .readable("fs::read", dotdot.to_str().unwrap())
            .unwrap_err()
            .message();
        assert!(err.contains("--allow-read="), "{err}");
        // An absolute path elsewhere.
        assert!(g.readable("fs::read", "/etc/hostname").is_err());
        // A link inside the grant that points out of it.
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.join("secret.txt"), dir.join("granted/link")).unwrap();
            let link = dir.join("granted/link");
            assert!(g.readable("fs::read", link.to_str().unwrap()).is_err());
            assert!(g.writable("fs::write", link.to_str().unwrap()).is_err());
        }
        // Writing needs its own grant.
        let err = g
            .writable("fs::write", dir.join("granted/new.txt").to_str().unwrap())
            .unwrap_err()
            .message();
        assert!(err.contains("--allow-write="), "{err}");
        Grants::add_dir(&mut g.write, "granted", &dir).unwrap();
        assert!(
            g.writable("fs::write", dir.join("granted/new.txt").to_str().unwrap())
                .is_ok()
        );
        assert!(Grants::add_dir(&mut g.read, "no-such-folder", &dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn hosts_and_programs_are_granted_by_name() {
        let mut g = Grants::default();
        g.add_net("api.example.com").unwrap();
        g.add_net("127.0.0.1:8080").unwrap();
        let ok = |u: &str| g.reachable("http::get", &reqwest::Url::parse(u).unwrap());
        assert!(ok("https://api.example.com/x").is_ok());
        assert!(ok("http://api.example.com:9999/x").is_ok());
        assert!(ok("http://127.0.0.1:8080/").is_ok());
        let err = ok("http://127.0.0.1:8081/").unwrap_err().message();
        assert!(err.contains("--allow-net=127.0.0.1:8081"), "{err}");
        assert!(ok("https://evil.example.com/").is_err());
        assert!(g.add_net("host:notaport").is_err());
        g.run.push("git".into());
        assert!(g.runnable("git").is_ok());
        assert!(
            g.runnable("/usr/bin/git")
                .unwrap_err()
                .message()
                .contains("--allow-run=/usr/bin/git")
        );
    }
}
